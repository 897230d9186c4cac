// The WebGPU engine in headless Debian Chromium. With --enable-unsafe-webgpu
// (see harness.mjs) navigator.gpu finds the bundled SwiftShader adapter
// (software, f32 only: no shader-f16), which is what the WGSL kernels run
// on here:
//  - every tiny PRM family scored on WebGPU equals the float64 reference
//    within 1e-4 (the native CPU engine's own bar against that reference, so
//    WebGPU and native CPU agree within 2e-4, inside the 1e-3), and
//    the CPU-wasm engine in the same page within 1e-4;
//  - sessions on WebGPU equal full scoring; worker mode runs WebGPU too;
//  - 200 scorings keep the device's live buffers, their bytes and the JS
//    heap flat;
//  - 'auto' keeps off the software adapter and says why.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { FAMILIES, reference, tolerance } from '../helpers.js';
import { inPage, openPage, soak, startServer, value } from './harness.mjs';

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

test('navigator.gpu finds the SwiftShader adapter and runs a compute shader', async () => {
  const r = value(
    await inPage(chrome.page, async () => {
      const adapter = await navigator.gpu.requestAdapter();
      if (!adapter) throw new Error('requestAdapter() returned null');
      const info = adapter.info;
      const device = await adapter.requestDevice();
      // out[i] = a[i] * 2 + i over 1000 elements (16 workgroups of 64).
      const n = 1000;
      const module = device.createShaderModule({
        code: `@group(0) @binding(0) var<storage, read> a: array<f32>;
               @group(0) @binding(1) var<storage, read_write> out: array<f32>;
               @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) {
                 if (id.x < arrayLength(&a)) { out[id.x] = a[id.x] * 2.0 + f32(id.x); }
               }`,
      });
      const input = new Float32Array(n).map((_, i) => i * 0.5 - 7);
      const a = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
      const out = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
      const read = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
      device.queue.writeBuffer(a, 0, input);
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
      const bind = device.createBindGroup({
        layout: pipeline.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: a } },
          { binding: 1, resource: { buffer: out } },
        ],
      });
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bind);
      pass.dispatchWorkgroups(Math.ceil(n / 64));
      pass.end();
      enc.copyBufferToBuffer(out, 0, read, 0, n * 4);
      device.queue.submit([enc.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const got = new Float32Array(read.getMappedRange().slice(0));
      let worst = 0;
      for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(got[i] - (input[i] * 2 + i)));
      device.destroy();
      return {
        vendor: info.vendor,
        architecture: info.architecture,
        description: info.description,
        isFallbackAdapter: info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? null,
        features: [...adapter.features].sort(),
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        worst,
      };
    }),
  );
  console.log(`# WebGPU adapter: ${JSON.stringify(r)}`);
  assert.equal(r.architecture, 'swiftshader');
  // The engine's f32 path is what runs here: SwiftShader has no shader-f16.
  assert.ok(!r.features.includes('shader-f16'));
  assert.equal(r.worst, 0, 'the compute shader wrote exact results');
  assert.ok(r.maxStorageBufferBindingSize >= 128 * 1024 * 1024);
});

for (const [name, family] of FAMILIES) {
  test(`${name}: WebGPU scores match the reference and CPU-wasm; sessions match full scoring`, async () => {
    const ref = reference(name);
    const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
    const got = value(
      await inPage(
        chrome.page,
        async (s, { url, family, traces }) => {
          const run = async (backend) => {
            const scorer = await s.StepScorer.load({ model: url, backend, family });
            try {
              const scores = [];
              for (const t of traces) scores.push(await scorer.score(t));
              const many = await scorer.scoreMany(traces);
              const incremental = [];
              for (const t of traces) {
                const session = scorer.session(t.problem);
                // Appends issued without awaiting each: the session runs them in order.
                const pending = t.steps.map((step) => session.append(step));
                incremental.push(await Promise.all(pending));
                if (session.scores.length !== t.steps.length) throw new Error(`session kept ${session.scores.length} scores`);
                session.dispose();
              }
              return { info: scorer.info(), scores, many, incremental };
            } finally {
              scorer.dispose();
            }
          };
          return { gpu: await run('webgpu'), cpu: await run('cpu') };
        },
        { url: `${server.url}/fixtures/${name}/`, family, traces },
      ),
    );
    const { gpu, cpu } = got;
    assert.equal(gpu.info.backend, 'webgpu');
    assert.match(gpu.info.adapter, /swiftshader/i);
    assert.ok(gpu.info.gpuBuffers.liveBuffers > 0 && gpu.info.gpuBuffers.liveBytes > 0, JSON.stringify(gpu.info.gpuBuffers));
    assert.equal(cpu.info.gpuBuffers, null);
    let worstRef = 0;
    let worstCpu = 0;
    for (const [k, c] of ref.cases.entries()) {
      const r = gpu.scores[k];
      assert.equal(r.tokens, c.input_ids.length, `case ${k}: tokens`);
      assert.deepEqual(gpu.many[k], r, `case ${k}: scoreMany equals score`);
      for (const [i, want] of c.step_scores.entries()) {
        const g = r.stepScores[i];
        const onCpu = cpu.scores[k].stepScores[i];
        worstRef = Math.max(worstRef, Math.abs(g - want));
        worstCpu = Math.max(worstCpu, Math.abs(g - onCpu));
        assert.ok(Math.abs(g - want) <= tolerance(ref.family, want), `case ${k} step ${i}: WebGPU ${g} vs reference ${want}`);
        assert.ok(Math.abs(g - onCpu) <= tolerance(ref.family, onCpu), `case ${k} step ${i}: WebGPU ${g} vs CPU-wasm ${onCpu}`);
        const inc = gpu.incremental[k][i];
        assert.ok(Math.abs(inc - g) <= tolerance(ref.family, g), `case ${k} step ${i}: WebGPU session ${inc} vs full ${g}`);
      }
      if (ref.family === 'confidence') {
        for (const [i, st] of r.confidence.entries()) {
          const want = cpu.scores[k].confidence[i];
          assert.ok(Math.abs(st.meanLogprob - want.meanLogprob) <= 1e-4, `case ${k} step ${i}: mean log-prob ${st.meanLogprob} vs CPU ${want.meanLogprob}`);
          assert.ok(Math.abs(st.meanEntropy - want.meanEntropy) <= 1e-4, `case ${k} step ${i}: entropy ${st.meanEntropy} vs CPU ${want.meanEntropy}`);
        }
      }
    }
    console.log(`# ${name} on WebGPU: max |Δ| vs reference ${worstRef.toExponential(2)}, vs CPU-wasm ${worstCpu.toExponential(2)}`);
    assert.deepEqual(chrome.errors, []);
  });
}

test("WebGPU in a worker scores like WebGPU in the page; 'auto' stays on the CPU on the software adapter and says why", async () => {
  const ref = reference('skywork-prm-tiny');
  const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
  const url = `${server.url}/fixtures/skywork-prm-tiny/`;
  const got = value(
    await inPage(
      chrome.page,
      async (s, { url, traces }) => {
        const out = {};
        for (const [label, options] of [
          ['page', { backend: 'webgpu' }],
          ['worker', { backend: 'webgpu', worker: true }],
          ['auto', { backend: 'auto' }],
          ['autoWorker', { backend: 'auto', worker: true }],
        ]) {
          const scorer = await s.StepScorer.load({ model: url, cache: false, ...options });
          try {
            const session = scorer.session(traces[0].problem);
            const appended = [];
            for (const step of traces[0].steps) appended.push(await session.append(step));
            out[label] = { info: scorer.info(), scores: await scorer.scoreMany(traces), appended, sessionScores: session.scores };
          } finally {
            scorer.dispose();
          }
        }
        return out;
      },
      { url, traces },
    ),
  );
  assert.equal(got.page.info.backend, 'webgpu');
  assert.equal(got.worker.info.backend, 'webgpu');
  assert.equal(got.worker.info.worker, true);
  assert.ok(got.worker.info.gpuBuffers.liveBuffers > 0, 'the worker reports its device buffers');
  assert.deepEqual(got.worker.scores, got.page.scores, 'the same kernels on the same adapter: identical');
  assert.deepEqual(got.worker.appended, got.page.appended);
  assert.deepEqual(got.worker.sessionScores, got.worker.appended, 'the worker mirrors the session state');
  for (const label of ['auto', 'autoWorker']) {
    const info = got[label].info;
    assert.equal(info.requestedBackend, 'auto');
    assert.equal(info.backend, 'cpu', label);
    assert.match(info.adapter, /swiftshader/i);
    assert.match(info.fallbackReason, /swiftshader.*is a software rasterizer; the CPU \(wasm\) engine is faster/i);
    assert.equal(info.gpuBuffers, null);
  }
  assert.deepEqual(chrome.errors, []);
});

test('200 consecutive WebGPU scorings keep device buffers, their bytes and the JS heap flat', async () => {
  const ref = reference('qwen2-prm-tiny');
  const traces = ref.cases.map((c) => ({ problem: c.problem, steps: c.steps }));
  // Warm-up: the post-GC heap climbs over the first ~300 WebGPU scorings
  // (measured per 100: +29, +14, +4, +3, +1.5 KB, then within ±13 KB: V8
  // tiering up the WebGPU glue), so the baseline is taken after 300.
  const { heaps, rounds } = await soak(chrome, {
    url: `${server.url}/fixtures/qwen2-prm-tiny/`,
    options: { backend: 'webgpu' },
    traces,
    warmup: 300,
  });
  const [heap0, heap1, heap2] = heaps;
  const [r0, r1, r2] = rounds.map((r) => ({ gpu: r.info.gpuBuffers, wasm: r.info.wasmMemoryBytes, last: r.last }));
  const diag = `device buffers ${JSON.stringify([r0.gpu, r1.gpu, r2.gpu])}; heap ${heap0} / ${heap1} / ${heap2} B; wasm memory ${r0.wasm} / ${r1.wasm} / ${r2.wasm} B`;
  console.log(`# WebGPU soak: ${diag}`);
  assert.ok(r0.gpu.liveBuffers > 0);
  for (const r of [r1, r2]) {
    assert.equal(r.gpu.liveBuffers, r0.gpu.liveBuffers, `live device buffers changed: ${diag}`);
    assert.equal(r.gpu.liveBytes, r0.gpu.liveBytes, `live device bytes changed: ${diag}`);
    assert.equal(r.wasm, r0.wasm, `wasm memory grew: ${diag}`);
    assert.deepEqual(r.last, r0.last, 'the same trace scores the same after 200 more scorings');
  }
  // The CPU soak's bound (cpu.test.mjs explains the ~12 KB of V8 noise).
  for (const [label, d] of [['first', heap1 - heap0], ['second', heap2 - heap1]]) {
    assert.ok(d < 32 * 1024, `JS heap grew ${d} B over the ${label} 200 scorings: ${diag}`);
  }
  assert.deepEqual(chrome.errors, []);
});
