// The threaded wasm build in Chromium. On a page served with COOP/COEP
// (cross-origin isolated), worker mode picks the threaded build (a pool of
// module Web Workers on one shared memory) and scores exactly like the
// single-thread build in the page's main thread and in Node (tolerance 0:
// the thread count never changes which instructions compute an output; see
// pkg/test/threads.test.js). Without isolation, and on the page's own main
// thread, the package says why it uses the single-thread build.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { StepScorer } from 'stepscore';
import { inPage, openPage, smollm2Path, startServer, value } from './harness.mjs';

const GGUF = smollm2Path();
const skip = existsSync(GGUF) ? false : `${GGUF} is missing (run \`stepscore fetch stepscore-prm-smollm2\`)`;
if (skip) console.log(`# SKIPPED SmolLM2 threaded browser test: ${skip}`);

// ~100 tokens: every parallel site splits its work (see threads.test.js).
const TRACE = {
  problem: 'A shop sells 14 boxes of 12 pencils and 9 boxes of 8 pens. How many items does it sell?',
  steps: ['14 boxes of 12 pencils are 14 * 12 = 168 pencils.', '9 boxes of 8 pens are 9 * 8 = 72 pens.', 'Together that is 168 + 72 = 240 items.', 'The answer is 240.'],
};

const opened = [];
after(async () => {
  for (const c of opened.reverse()) await c.close();
});

async function open(isolate) {
  const server = await startServer({ isolate });
  opened.push(server);
  const chrome = await openPage(server);
  opened.push(chrome);
  return { server, page: chrome.page };
}

test('an isolated page: worker mode runs the threaded build and scores like the single-thread build', { skip, timeout: 600_000 }, async () => {
  const { server, page } = await open(true);
  const got = value(
    await inPage(
      page,
      async (s, { url, trace }) => {
        const threaded = await s.StepScorer.load({ model: url, family: 'confidence', backend: 'cpu', worker: true, threads: 2 });
        const single = await s.StepScorer.load({ model: url, family: 'confidence', backend: 'cpu' });
        try {
          return {
            isolated: crossOriginIsolated,
            threadedInfo: threaded.info(),
            singleInfo: single.info(),
            threaded: await threaded.score(trace, { tokenLogprobs: true }),
            single: await single.score(trace, { tokenLogprobs: true }),
          };
        } finally {
          threaded.dispose();
          single.dispose();
        }
      },
      { url: `${server.url}/smollm2.gguf`, trace: TRACE },
    ),
  );
  assert.equal(got.isolated, true);
  const t = got.threadedInfo;
  assert.deepEqual([t.build, t.buildReason, t.threads, t.worker], ['threads', null, 2, true]);
  assert.equal(got.singleInfo.build, 'single');
  assert.match(got.singleInfo.buildReason, /main thread/);
  assert.ok(got.threaded.tokens > 90);
  assert.deepEqual(got.threaded, got.single);
  // The same numbers as Node's threaded build (the same wasm, other host).
  const node = await StepScorer.load({ model: new Uint8Array(readFileSync(GGUF)), family: 'confidence', backend: 'cpu' });
  try {
    assert.deepEqual(await node.score(TRACE, { tokenLogprobs: true }), got.threaded);
  } finally {
    node.dispose();
  }
});

test('a page without COOP/COEP: worker mode says why it runs the single-thread build', async () => {
  const { server, page } = await open(false);
  const info = value(
    await inPage(
      page,
      async (s, url) => {
        const scorer = await s.StepScorer.load({ model: url, backend: 'cpu', worker: true });
        try {
          return { isolated: crossOriginIsolated, info: scorer.info() };
        } finally {
          scorer.dispose();
        }
      },
      `${server.url}/fixtures/skywork-prm-tiny/`,
    ),
  );
  assert.equal(info.isolated, false);
  assert.deepEqual([info.info.build, info.info.threads], ['single', 1]);
  assert.match(info.info.buildReason, /cross-origin isolated/);
});
