// test-install.sh's page check: serves the Vite build (dist/) on 127.0.0.1,
// opens it in headless Debian Chromium (flags as scripts/test/test-browser.sh
// uses) with ?hub= pointing at the local hub server, and waits for the
// example's result: the catalog name downloaded, scored in a worker.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, normalize } from 'node:path';
import { chromium } from 'playwright-core';

const root = join(process.cwd(), 'dist');
const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.css': 'text/css' };
const server = createServer(async (req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
  const file = join(root, path === '/' ? 'index.html' : path);
  if (!file.startsWith(root)) return res.writeHead(403).end();
  try {
    const body = await readFile(file);
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' }).end(body);
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const page_url = `http://127.0.0.1:${server.address().port}/?hub=${encodeURIComponent(process.env.HUB)}`;
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM,
  headless: true,
  args: [
    '--no-sandbox',
    '--enable-unsafe-webgpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-default-apps',
    '--no-first-run',
    '--no-default-browser-check',
  ],
});
try {
  const page = await browser.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(m.text()));
  page.on('pageerror', (e) => logs.push(String(e)));
  await page.goto(page_url);
  await page.waitForFunction(() => window.stepscoreResult || window.stepscoreError, null, { timeout: 300_000 });
  const { result, error } = await page.evaluate(() => ({ result: window.stepscoreResult, error: window.stepscoreError }));
  assert.equal(error, undefined, `${error}\n${logs.join('\n')}`);
  assert.equal(result.stepScores.length, 2);
  assert.equal(result.worker, true);
  for (const s of result.stepScores) assert.ok(s >= 0 && s <= 1);
  console.log(`   page: ${JSON.stringify(result)}`);
} finally {
  await browser.close();
  server.close();
}
