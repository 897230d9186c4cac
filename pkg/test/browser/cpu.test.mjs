// The CPU (wasm) engine in Chromium: every tiny PRM family scores its fixture
// traces like the independent float64 reference (reference.json) — which the
// native CPU engine matches within 1e-4 (crates/stepscore/tests) — so browser
// and native agree within 2e-4, inside the 1e-3. The same wasm in
// Node must give identical numbers. Sessions equal full scoring (1e-4);
// error codes for a corrupt file, a 404 and an abort; the JS heap and the
// wasm memory stay flat over 200 scorings.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
import { FAMILIES, checkpointFiles, reference, tolerance } from '../helpers.js';
import { assertCode, inPage, openPage, soak, startServer, value } from './harness.mjs';

let server;
let chrome;
before(async () => {
  server = await startServer();
  chrome = await openPage(server);
});
after(async () => {
  await chrome?.close();
  await server?.close();
});

for (const [name, family] of FAMILIES) {
  test(`${name}: Chromium CPU-wasm scores match the reference and Node`, async () => {
    const ref = reference(name);
    const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
    const got = value(
      await inPage(
        chrome.page,
        async (s, { url, family, traces }) => {
          const scorer = await s.StepScorer.load({ model: url, backend: 'cpu', family });
          try {
            const scores = [];
            for (const t of traces) scores.push(await scorer.score(t));
            // Incremental: each step appended to a session.
            const incremental = [];
            for (const t of traces) {
              const session = scorer.session(t.problem);
              const row = [];
              for (const step of t.steps) row.push(await session.append(step));
              incremental.push(row);
              session.dispose();
            }
            return { info: scorer.info(), scores, incremental };
          } finally {
            scorer.dispose();
          }
        },
        { url: `${server.url}/fixtures/${name}/`, family, traces },
      ),
    );
    assert.equal(got.info.family, ref.family);
    assert.equal(got.info.backend, 'cpu');
    for (const [k, c] of ref.cases.entries()) {
      const r = got.scores[k];
      assert.equal(r.tokens, c.input_ids.length, `case ${k}: tokens`);
      for (const [i, want] of c.step_scores.entries()) {
        const g = r.stepScores[i];
        assert.ok(Math.abs(g - want) <= tolerance(ref.family, want), `case ${k} step ${i}: ${g} vs reference ${want}`);
        const inc = got.incremental[k][i];
        assert.ok(Math.abs(inc - g) <= tolerance(ref.family, g), `case ${k} step ${i}: incremental ${inc} vs full ${g}`);
      }
    }
    // Same wasm, same inputs: Node's run is identical to the browser's.
    const node = await StepScorer.load({ model: checkpointFiles(name), backend: 'cpu', family });
    try {
      for (const [k, t] of traces.entries()) assert.deepEqual(got.scores[k], await node.score(t), `case ${k}: Chromium vs Node`);
    } finally {
      node.dispose();
    }
  });
}

test('a corrupt model, a 404 URL and an aborted load reject with their codes (page and worker)', async () => {
  const corrupt = server.put('corrupt.gguf', Buffer.concat([Buffer.from('GGUF'), Buffer.from([3, 0, 0, 0]), Buffer.alloc(64, 0xab)]));
  const cases = [
    [corrupt, 'MODEL_INVALID', /corrupt\.gguf/],
    [`${server.url}/fixtures/missing.gguf`, 'FETCH_FAILED', /missing\.gguf: HTTP 404/],
    [`${server.url}/fixtures/no-such-dir/`, 'FETCH_FAILED', /config\.json: HTTP 404/],
  ];
  for (const worker of [false, true]) {
    for (const [url, code, message] of cases) {
      assertCode(assert, await inPage(chrome.page, (s, { url, worker }) => s.StepScorer.load({ model: url, worker, cache: false }), { url, worker }), code, message);
    }
    // Abort mid-body: the slow route sends 1 KiB per 20 ms.
    const aborted = await inPage(
      chrome.page,
      async (s, { url, worker }) => {
        const controller = new AbortController();
        let seen = 0;
        try {
          await s.StepScorer.load({
            model: url,
            worker,
            cache: false,
            signal: controller.signal,
            onProgress: (p) => {
              if (p.file === 'model.safetensors' && p.loaded > 0 && !seen) {
                seen = p.loaded;
                controller.abort(new Error('the user left'));
              }
            },
          });
        } catch (e) {
          e.message = `${e.message} [after ${seen} bytes]`;
          throw e;
        }
      },
      { url: `${server.url}/slow/fixtures/skywork-prm-tiny/`, worker },
    );
    assertCode(assert, aborted, 'ABORTED', /the user left/);
    const seen = Number(/after (\d+) bytes/.exec(aborted.message)[1]);
    assert.ok(seen > 0 && seen < 129356, `worker=${worker}: aborted mid-body after ${seen} bytes`);
  }
});

for (const worker of [false, true]) {
  test(`200 consecutive scorings keep the JS heap and the wasm memory flat (${worker ? 'worker' : 'page'})`, async () => {
    const ref = reference('qwen2-prm-tiny');
    const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
    // Warm-up: the engine's buffers and V8's code reach their steady size.
    // Since scoring returns Promises through wasm-bindgen-futures, V8 keeps
    // tiering up that glue for a few hundred calls: after a 40-call warm-up
    // the next 200 grew the page's heap by ~33 KB, the 200 after by ~7 KB;
    // measured per 100 calls after 40: +13, +18, +8, +2.5, +2, +4.5, +1.6 KB.
    // 300 calls take ~2 s here.
    const { heaps, rounds } = await soak(chrome, {
      url: `${server.url}/fixtures/qwen2-prm-tiny/`,
      options: { backend: 'cpu', worker },
      traces,
      warmup: 300,
    });
    const [heap0, heap1, heap2] = heaps;
    const [wasm0, wasm1, wasm2] = rounds.map((r) => r.info.wasmMemoryBytes);
    const diag = `heap after warm-up ${heap0} B, after 200 more ${heap1} B, after 400 ${heap2} B; wasm memory ${wasm0} / ${wasm1} / ${wasm2} B`;
    console.log(`# soak (${worker ? 'worker' : 'page'}): ${diag}`);
    // V8's post-GC heap moves by up to ~12 KB between two evaluations on this
    // page whether or not anything is scored (measured: 0 scorings +6.7 KB,
    // 200 scorings +9.6..11.8 KB, 400 scorings +8.8 KB: no growth with n).
    // 32 KiB per 200 calls still catches any leak of ≥ 160 B a call, less
    // than one retained result object.
    for (const [label, d] of [['first', heap1 - heap0], ['second', heap2 - heap1]]) {
      assert.ok(d < 32 * 1024, `JS heap grew ${d} B over the ${label} 200 scorings: ${diag}`);
    }
    assert.equal(wasm1, wasm0, `wasm memory grew: ${diag}`);
    assert.equal(wasm2, wasm0, `wasm memory grew: ${diag}`);
    assert.deepEqual(chrome.errors, []);
  });
}
