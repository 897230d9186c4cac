// What the model panel shows about a loaded model (backend and why, the
// browser's WebGPU adapter, dimensions, files) and how dropped files become
// a model source.
import { StepscoreError, type ModelSource, type ScorerInfo } from 'stepscore';
import { $, el, replace } from './dom';

export function errorText(e: unknown): string {
  if (e instanceof StepscoreError) return `${e.code}: ${e.message}`;
  if (e instanceof Error) return e.message;
  return String(e);
}

export function mb(bytes: number): string {
  return bytes < 1e6 ? `${(bytes / 1e3).toFixed(1)} kB` : `${(bytes / 1e6).toFixed(1)} MB`;
}

async function webgpuAdapterText(): Promise<string> {
  const gpu = (navigator as Navigator & { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
  if (!gpu) return 'not available (navigator.gpu is missing)';
  try {
    const adapter = (await gpu.requestAdapter()) as { info?: { vendor?: string; architecture?: string; description?: string } } | null;
    if (!adapter) return 'navigator.gpu is present but no adapter was granted';
    const info = adapter.info ?? {};
    const parts = [info.description, info.vendor, info.architecture].filter((x) => x);
    return `available (adapter: ${parts.join(' / ') || 'unnamed'})`;
  } catch (e) {
    return `requestAdapter failed: ${errorText(e)}`;
  }
}

export function showBackend(info: ScorerInfo): void {
  const badge = $('backend-badge');
  badge.classList.remove('gpu', 'cpu');
  if (info.backend === 'webgpu') {
    badge.classList.add('gpu');
    badge.textContent = `Running on this device’s graphics processor (WebGPU${info.adapter ? `: ${info.adapter}` : ''}).`;
  } else {
    // In plain words; the info table below keeps the SDK's own reason (info().fallbackReason).
    badge.classList.add('cpu');
    badge.textContent = info.requestedBackend === 'cpu'
      ? 'Running on this device’s processor (CPU), as chosen in the Backend menu.'
      : info.adapter
        ? `Running on this device’s processor (CPU): this browser’s WebGPU is a software emulation (${info.adapter}), which would be slower here. To try it anyway, choose “WebGPU only” in the Backend menu.`
        : 'Running on this device’s processor (CPU): this browser does not offer WebGPU (access to the graphics processor) here.';
  }
  badge.dataset.backend = info.backend;
}

export async function showInfo(info: ScorerInfo, name: string, note: string | null): Promise<void> {
  const dl = $('model-info');
  const rows: Array<[string, string]> = [
    ['Model', name],
    ...(note ? [['About the scores', note] as [string, string]] : []),
    ['Family', info.family],
    ['Format', info.format],
    ['Architecture', info.architectures.join(', ') || '–'],
    ['Backend', info.backend === 'webgpu' ? `WebGPU (${info.adapter ?? '?'})` : 'CPU (WebAssembly)'],
    ['Why this backend', info.fallbackReason ?? (info.requestedBackend === info.backend ? `${info.requestedBackend} was requested` : '–')],
    ['WebGPU in this browser', await webgpuAdapterText()],
    ['Runs in', info.worker ? 'a Web Worker (the page stays responsive while it scores)' : 'the page’s thread'],
    ['Layers × hidden', `${info.layers} × ${info.hiddenSize} (${info.heads} heads, ${info.kvHeads} kv heads)`],
    ['Vocabulary', String(info.vocabSize)],
    ['Token limit', `${info.maxTokens} (context ${info.contextLength})`],
    ['Files', info.files.map((f) => `${f.name} (${mb(f.bytes)})`).join(', ')],
    ['Engine memory', info.wasmMemoryBytes ? mb(info.wasmMemoryBytes) : '–'],
  ];
  replace(dl, ...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  dl.hidden = false;
}

export function modelFilesSource(files: File[]): { source: ModelSource; name: string } | string {
  if (files.length === 0) return 'no files given';
  if (files.length === 1) {
    const f = files[0];
    if (!f.name.toLowerCase().endsWith('.gguf')) {
      return `${f.name}: a single file must be a .gguf model; for a Hugging Face checkpoint choose config.json, tokenizer.json and the .safetensors file(s) together`;
    }
    return { source: f, name: f.name };
  }
  const named: Record<string, Blob> = {};
  for (const f of files) named[f.name] = f;
  const missing = ['config.json', 'tokenizer.json'].filter((n) => !(n in named));
  if (!files.some((f) => f.name.endsWith('.safetensors'))) missing.push('a .safetensors weights file');
  if (missing.length) return `the checkpoint is missing ${missing.join(', ')}`;
  return { source: named, name: files.map((f) => f.name).join(' + ') };
}
