// Loading from URLs, Blobs and buffers; backends; and the error codes of
// every way a load or a scoring call can fail.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { StepScorer, StepscoreError } from 'stepscore';
import { checkpointFiles, reference, rejectsWith, startServer } from './helpers.js';

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server.close();
});

const SKYWORK = 'skywork-prm-tiny';

test('a directory URL loads with download progress and scores like bytes do', async () => {
  const events = [];
  const scorer = await StepScorer.load({
    model: `${server.url}/fixtures/${SKYWORK}`,
    onProgress: (p) => events.push(p),
  });
  try {
    const c = reference(SKYWORK).cases[0];
    const fromUrl = await scorer.score({ problem: c.problem, steps: c.steps });
    const local = await StepScorer.load({ model: checkpointFiles(SKYWORK) });
    assert.deepEqual(fromUrl, await local.score({ problem: c.problem, steps: c.steps }));
    local.dispose();

    // No sharded index was needed: model.safetensors was found first.
    const fetched = server.requests.filter((r) => r.includes(SKYWORK));
    assert.deepEqual(
      fetched.map((r) => r.split('/').pop()),
      ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'],
    );
    const downloads = events.filter((e) => e.phase === 'download');
    for (const file of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']) {
      const mine = downloads.filter((e) => e.file === file);
      assert.ok(mine.length >= 2, `${file}: progress events`);
      for (let i = 1; i < mine.length; i++) assert.ok(mine[i].loaded >= mine[i - 1].loaded, `${file}: loaded is monotonic`);
      const last = mine[mine.length - 1];
      assert.equal(last.loaded, last.total, `${file}: ends at its Content-Length`);
    }
    assert.deepEqual(events[events.length - 1], { phase: 'load', file: null, loaded: 0, total: null });

    const info = scorer.info();
    assert.equal(info.format, 'hf');
    assert.equal(info.family, 'value-head');
    const sizes = Object.fromEntries(info.files.map((f) => [f.name, f.bytes]));
    assert.equal(info.modelBytes, Object.values(sizes).reduce((a, b) => a + b, 0));
    assert.equal(sizes['model.safetensors'], checkpointFiles(SKYWORK)['model.safetensors'].length);
    assert.equal(info.hiddenSize, 32);
    assert.ok(info.wasmMemoryBytes > info.modelBytes);
  } finally {
    scorer.dispose();
  }
});

test('auto falls back to the CPU in Node and says why', async () => {
  const scorer = await StepScorer.load({ model: checkpointFiles(SKYWORK) });
  const info = scorer.info();
  assert.equal(info.requestedBackend, 'auto');
  assert.equal(info.backend, 'cpu');
  assert.equal(info.adapter, null);
  assert.match(info.fallbackReason, /navigator\.gpu is missing/);
  scorer.dispose();
  const cpu = await StepScorer.load({ model: checkpointFiles(SKYWORK), backend: 'cpu' });
  assert.equal(cpu.info().fallbackReason, null);
  cpu.dispose();
});

test("backend 'webgpu' rejects before downloading without an adapter; 'auto' keeps off software adapters", async () => {
  const before = server.requests.length;
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/${SKYWORK}`, backend: 'webgpu' }), 'WEBGPU_UNAVAILABLE', /navigator\.gpu/);
  assert.equal(server.requests.length, before, 'nothing was fetched');
  const had = Object.getOwnPropertyDescriptor(globalThis, 'navigator');
  const withGpu = (gpu) => Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
  try {
    // An adapter API that finds nothing.
    withGpu({ requestAdapter: async () => null });
    await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/${SKYWORK}`, backend: 'webgpu' }), 'WEBGPU_UNAVAILABLE', /found no adapter/);
    assert.equal(server.requests.length, before, 'nothing was fetched');
    const none = await StepScorer.load({ model: checkpointFiles(SKYWORK) });
    assert.equal(none.info().backend, 'cpu');
    assert.match(none.info().fallbackReason, /found no adapter; using the CPU \(wasm\) engine/);
    none.dispose();
    // A software adapter as headless Chromium reports SwiftShader: 'auto' stays on the CPU.
    withGpu({ requestAdapter: async () => ({ info: { vendor: 'google', architecture: 'swiftshader', description: '', isFallbackAdapter: false } }) });
    const auto = await StepScorer.load({ model: checkpointFiles(SKYWORK) });
    assert.equal(auto.info().backend, 'cpu');
    assert.equal(auto.info().adapter, 'google swiftshader');
    assert.match(auto.info().fallbackReason, /google swiftshader\) is a software rasterizer/);
    assert.equal(auto.info().gpuBuffers, null);
    auto.dispose();
  } finally {
    if (had) Object.defineProperty(globalThis, 'navigator', had);
    else delete globalThis.navigator;
  }
  // The core's backend names: 'gpu' is 'webgpu'; anything else is refused with the core's message.
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), backend: 'gpu' }), 'WEBGPU_UNAVAILABLE', /backend 'gpu': .*navigator\.gpu/);
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), backend: 'cuda' }), 'INVALID_ARGUMENT', /unknown backend `cuda` \(expected auto, gpu \(also webgpu\) or cpu\)/);
});

test('a 404 URL rejects with FETCH_FAILED naming the URL', async () => {
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/missing.gguf` }), 'FETCH_FAILED', /missing\.gguf: HTTP 404/);
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/no-such-dir/` }), 'FETCH_FAILED', /config\.json: HTTP 404/);
  // Nothing listens on port 9 of 127.0.0.1: a network error, not an HTTP status.
  await rejectsWith(assert, StepScorer.load({ model: 'http://127.0.0.1:9/m.gguf' }), 'FETCH_FAILED', /127\.0\.0\.1:9/);
});

test('aborting rejects with ABORTED: before the start and in the middle of a download', async () => {
  const early = new AbortController();
  early.abort(new Error('user left'));
  await rejectsWith(assert, StepScorer.load({ model: `${server.url}/fixtures/${SKYWORK}`, signal: early.signal }), 'ABORTED', /user left/);

  const mid = new AbortController();
  let sawBytes = 0;
  const load = StepScorer.load({
    model: `${server.url}/slow/fixtures/${SKYWORK}/model.safetensors.gguf`.replace('model.safetensors.gguf', ''),
    signal: mid.signal,
    onProgress: (p) => {
      if (p.file === 'model.safetensors' && p.loaded > 0) {
        sawBytes = p.loaded;
        mid.abort();
      }
    },
  });
  await rejectsWith(assert, load, 'ABORTED');
  assert.ok(sawBytes > 0 && sawBytes < 129356, `aborted mid-body after ${sawBytes} bytes`);
});

test('corrupt model files reject with MODEL_INVALID or TOKENIZER_INVALID', async () => {
  const garbage = new Uint8Array([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0, 1, 2, 3]);
  await rejectsWith(assert, StepScorer.load({ model: garbage }), 'MODEL_INVALID', /model\.gguf/);
  await rejectsWith(assert, StepScorer.load({ model: new Blob([garbage]) }), 'MODEL_INVALID');
  await rejectsWith(assert, StepScorer.load({ model: new Blob(['{"not": "gguf"}']) }), 'MODEL_INVALID', /does not start with "GGUF"/);

  const truncated = checkpointFiles(SKYWORK);
  truncated['model.safetensors'] = truncated['model.safetensors'].subarray(0, 5000);
  await rejectsWith(assert, StepScorer.load({ model: truncated }), 'MODEL_INVALID', /model\.safetensors/);

  const badConfig = checkpointFiles(SKYWORK);
  badConfig['config.json'] = '{"model_type": "qwen2"}';
  await rejectsWith(assert, StepScorer.load({ model: badConfig }), 'MODEL_INVALID', /config\.json/);

  const badTokenizer = checkpointFiles(SKYWORK);
  badTokenizer['tokenizer.json'] = '{"model": 1}';
  await rejectsWith(assert, StepScorer.load({ model: badTokenizer }), 'TOKENIZER_INVALID');

  const noTokenizer = checkpointFiles(SKYWORK);
  delete noTokenizer['tokenizer.json'];
  await rejectsWith(assert, StepScorer.load({ model: noTokenizer }), 'TOKENIZER_INVALID', /tokenizer\.json: file not provided/);

  await rejectsWith(assert, StepScorer.load({ model: 42 }), 'INVALID_ARGUMENT');
  await rejectsWith(assert, StepScorer.load({}), 'INVALID_ARGUMENT', /`model` option is required/);
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), family: 'nope' }), 'INVALID_ARGUMENT', /unknown/i);
  await rejectsWith(assert, StepScorer.load({ model: checkpointFiles(SKYWORK), maxTokens: -1 }), 'INVALID_ARGUMENT', /maxTokens/);
});

test('invalid traces, over-long traces and disposed scorers reject with their codes', async () => {
  const scorer = await StepScorer.load({ model: checkpointFiles(SKYWORK), maxTokens: 24 });
  try {
    await rejectsWith(assert, scorer.score({ steps: ['a'] }), 'TRACE_INVALID', /trace, field `problem`: missing field `problem`/);
    await rejectsWith(assert, scorer.score({ problem: 'p', steps: ['a', 7] }), 'TRACE_INVALID', /trace, field `steps\[1\]`: expected a string/);
    await rejectsWith(assert, scorer.score({ problem: 'p', steps: [] }), 'TRACE_INVALID', /field `steps`: empty step list/);
    await rejectsWith(assert, scorer.score('2+2'), 'TRACE_INVALID');
    await rejectsWith(assert, scorer.scoreMany([{ problem: 'p', steps: ['a'] }, { problem: 'p' }]), 'TRACE_INVALID', /traces\[1\]: cannot tell the row format/);

    const long = { problem: 'What is 2 + 3?', steps: ['2 + 3 = 5, because two plus three is five.', 'So the answer is 5, as we computed above.'] };
    await rejectsWith(assert, scorer.score(long), 'TRACE_TOO_LONG', /over the limit of 24/);
    const session = scorer.session('What is 2 + 3?');
    await rejectsWith(assert, session.append(5), 'TRACE_INVALID', /step 0 must be a string/);
    assert.throws(() => scorer.session(3), (e) => e instanceof StepscoreError && e.code === 'TRACE_INVALID');
  } finally {
    scorer.dispose();
  }

  const cut = await StepScorer.load({ model: checkpointFiles(SKYWORK), maxTokens: 24, truncation: 'drop-steps' });
  const r = await cut.score({ problem: 'What is 2 + 3?', steps: ['2 + 3 = 5.', 'So the answer is 5, as we computed above with care.'] });
  assert.equal(r.truncatedSteps, 1);
  assert.equal(r.stepScores[1], null);
  assert.ok(r.stepScores[0] > 0 && r.stepScores[0] < 1);
  const session = cut.session('p');
  cut.dispose();
  cut.dispose();
  await rejectsWith(assert, cut.score({ problem: 'p', steps: ['a'] }), 'DISPOSED');
  await rejectsWith(assert, session.append('a'), 'DISPOSED');
  assert.throws(() => cut.info(), (e) => e.code === 'DISPOSED');
});
