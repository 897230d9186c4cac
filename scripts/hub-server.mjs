// A local stand-in for the Hugging Face hub in tests: serves files of one
// directory (default ~/.cache/stepscore) in the hub's URL layout,
// GET /{repo}/resolve/{revision}/{file}, by the file's name (the repo and
// revision are not checked: the client checks the bytes by sha256). CORS
// open and Cross-Origin-Resource-Policy: cross-origin, as the hub sends, so
// pages (cross-origin isolated ones too) can fetch. Never the network.
//
//   node scripts/hub-server.mjs [--root DIR] [--tamper FILE]
// prints `http://127.0.0.1:PORT` on its first line, then serves until killed.
// --tamper FILE serves FILE with its first byte after the header changed
// (the same size, another sha256): the refused-download tests.
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { root: { type: 'string' }, tamper: { type: 'string' } },
});
const root = values.root ?? process.env.STEPSCORE_CACHE ?? join(homedir(), '.cache', 'stepscore');
const LAYOUT = /^\/(.+)\/resolve\/([^/]+)\/(.+)$/;

const server = createServer((req, res) => {
  const headers = {
    'access-control-allow-origin': '*',
    'cross-origin-resource-policy': 'cross-origin',
  };
  const m = LAYOUT.exec(decodeURIComponent(new URL(req.url, 'http://x').pathname));
  const name = m ? basename(m[3]) : null;
  let size = -1;
  try {
    size = name && !name.startsWith('.') ? statSync(join(root, name)).size : -1;
  } catch {
    size = -1;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, headers).end();
    return;
  }
  if (size < 0) {
    res.writeHead(404, { ...headers, 'content-type': 'text/plain' }).end(`not found: ${req.url}\n`);
    return;
  }
  res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(size) });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = createReadStream(join(root, name));
  if (values.tamper === name) {
    let first = true;
    stream.on('data', (chunk) => {
      if (first && chunk.length > 64) chunk[64] ^= 0xff;
      first = false;
      res.write(chunk);
    });
    stream.on('end', () => res.end());
  } else {
    stream.pipe(res);
  }
});
server.listen(0, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}`);
});
