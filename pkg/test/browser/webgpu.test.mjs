// WebGPU in headless Debian Chromium. With --enable-unsafe-webgpu (see
// harness.mjs) navigator.gpu finds the bundled SwiftShader adapter; this
// records what it offers, runs one compute shader on it (so a WebGPU engine
// has a working device to land on), and checks that backend 'auto' falls
// back to the CPU engine with the reason in info() while the package has no
// WebGPU engine. Scoring parity on WebGPU comes with that engine.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertCode, inPage, openPage, startServer, value } from './harness.mjs';

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
        device: info.device,
        description: info.description,
        isFallbackAdapter: info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? null,
        features: [...adapter.features].sort(),
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
        maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
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

test("backend 'auto' falls back to the CPU with the reason in info(); 'webgpu' says why it cannot", async () => {
  const url = `${server.url}/fixtures/skywork-prm-tiny/`;
  for (const worker of [false, true]) {
    const info = value(
      await inPage(
        chrome.page,
        async (s, { url, worker }) => {
          const scorer = await s.StepScorer.load({ model: url, backend: 'auto', worker, cache: false });
          try {
            await scorer.score({ problem: 'p', steps: ['a'] });
            return scorer.info();
          } finally {
            scorer.dispose();
          }
        },
        { url, worker },
      ),
    );
    assert.equal(info.requestedBackend, 'auto');
    assert.equal(info.worker, worker);
    if (info.backend === 'cpu') {
      assert.match(info.fallbackReason, /WebGPU engine is not in this version.*using the CPU \(wasm\) engine/);
    } else {
      assert.equal(info.backend, 'webgpu');
      assert.ok(info.adapter);
    }
    const before = server.count('/config.json');
    const gpu = await inPage(chrome.page, (s, { url, worker }) => s.StepScorer.load({ model: url, backend: 'webgpu', worker }), { url, worker });
    if (!gpu.ok) {
      assertCode(assert, gpu, 'NOT_IMPLEMENTED', /backend 'webgpu'/);
      assert.equal(server.count('/config.json'), before, 'refused before downloading');
    }
  }
  assert.deepEqual(chrome.errors, []);
});
