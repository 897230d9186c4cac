//! The device: adapter choice, device creation, error capture, and the
//! submit/readback primitives the kernels share.

use std::sync::{Arc, Mutex};

use super::adapter::{choose, AdapterReport, ADAPTER_ENV};
use super::pipeline::PipelineCache;
use super::pool::{Pool, PoolStats, PooledBuffer, Usage};
use super::readback::oneshot;
use super::shaders::Shader;
use crate::error::{Error, Result};

/// How to pick and set up the device.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// A case-insensitive substring of the adapter name; overrides
    /// `STEPSCORE_ADAPTER`.
    pub adapter: Option<String>,
    /// Backends to consider (default: all compiled in).
    pub backends: Option<wgpu::Backends>,
    /// Splits weights as if the adapter's max storage binding size were this
    /// (only ever lowers it; tests of the split path).
    pub max_storage_binding_size: Option<u64>,
    /// Ignore `STEPSCORE_ADAPTER`.
    pub ignore_env: bool,
    /// Create the device without the optional features (SHADER_F16,
    /// SUBGROUP) even where the adapter has them: the feature set of
    /// Chromium's SwiftShader WebGPU adapter, so tests on any adapter show
    /// that every kernel runs without them.
    pub baseline_features: bool,
    /// Emulate the 8-bit integer dot products in core WGSL even where the
    /// WGSL implementation has `packed_4x8_integer_dot_product` (browsers
    /// without it run the emulation; tests of both paths).
    pub emulate_packed_dot: bool,
}

/// How the kernels read F16 weights (and the activations rounded to f16
/// for them) on one device, chosen once when the device is created. Both
/// widen to f32 exactly and compute in f32, so they give the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Float16Path {
    /// As `f16` values (`enable f16;`): the device has SHADER_F16.
    ShaderF16,
    /// As u32 words widened with `unpack2x16float` (core WGSL): devices
    /// without SHADER_F16, such as Chromium's SwiftShader adapter.
    Words,
}

impl Float16Path {
    /// The path of a device created with (or without) SHADER_F16.
    pub fn for_device(shader_f16: bool) -> Float16Path {
        if shader_f16 {
            Float16Path::ShaderF16
        } else {
            Float16Path::Words
        }
    }

    /// How reports name it.
    pub fn describe(self) -> &'static str {
        match self {
            Float16Path::ShaderF16 => "f16 weights read as f16 (shader-f16)",
            Float16Path::Words => "f16 weights read as u32 words (no shader-f16)",
        }
    }
}

/// Errors the device reported outside any call (validation, out of memory)
/// and its loss, captured by callbacks instead of wgpu's default panic.
#[derive(Default)]
struct DeviceErrors {
    first: Option<String>,
    lost: Option<String>,
}

/// A wgpu device ready for the engine's kernels.
pub struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    report: AdapterReport,
    limits: wgpu::Limits,
    float16: Float16Path,
    binding_limit: u64,
    pub(crate) pool: Pool,
    pipelines: PipelineCache,
    errors: Arc<Mutex<DeviceErrors>>,
    packed_dot: bool,
}

fn lock(m: &Mutex<DeviceErrors>) -> std::sync::MutexGuard<'_, DeviceErrors> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn all_adapters(backends: wgpu::Backends) -> (wgpu::Instance, Vec<wgpu::Adapter>) {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    let instance = wgpu::Instance::new(desc);
    let mut adapters = instance.enumerate_adapters(backends).await;
    if adapters.is_empty() {
        // Browsers expose one adapter through request_adapter only.
        if let Ok(a) = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
        {
            adapters.push(a);
        }
    }
    (instance, adapters)
}

impl GpuContext {
    /// Every adapter wgpu finds, with its features and limits.
    pub async fn adapters_async(backends: Option<wgpu::Backends>) -> Vec<AdapterReport> {
        let (_instance, adapters) = all_adapters(backends.unwrap_or(wgpu::Backends::all())).await;
        adapters.iter().map(AdapterReport::from_adapter).collect()
    }

    /// Picks an adapter (see [`GpuOptions`]) and creates its device, with
    /// SHADER_F16 and SUBGROUP enabled when the adapter has them (unless
    /// `baseline_features`).
    pub async fn new_async(options: GpuOptions) -> Result<GpuContext> {
        let (instance, adapters) =
            all_adapters(options.backends.unwrap_or(wgpu::Backends::all())).await;
        let packed_dot = !options.emulate_packed_dot
            && instance
                .wgsl_language_features()
                .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct);
        let reports: Vec<AdapterReport> =
            adapters.iter().map(AdapterReport::from_adapter).collect();
        let env = if options.ignore_env {
            None
        } else {
            std::env::var(ADAPTER_ENV).ok()
        };
        let filter = options.adapter.clone().or(env);
        let (i, reason) = choose(&reports, filter.as_deref())?;
        let (adapter, mut report) = match (adapters.get(i), reports.get(i)) {
            (Some(a), Some(r)) => (a, r.clone()),
            _ => return Err(Error::Gpu("adapter index out of range".into())),
        };
        report.reason = reason;

        let mut features = wgpu::Features::empty();
        for f in [wgpu::Features::SHADER_F16, wgpu::Features::SUBGROUP] {
            if !options.baseline_features && adapter.features().contains(f) {
                features |= f;
            }
        }
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("stepscore"),
                required_features: features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("creating a device on {}: {e}", report.name)))?;

        let float16 =
            Float16Path::for_device(device.features().contains(wgpu::Features::SHADER_F16));
        // The reason travels into every engine report (doctor, bench, the
        // scorer's backend report): say there which F16 path runs.
        report.reason = if report.reason.is_empty() {
            float16.describe().to_string()
        } else {
            format!("{}; {}", report.reason, float16.describe())
        };

        let errors = Arc::new(Mutex::new(DeviceErrors::default()));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut s = lock(&sink);
            if s.first.is_none() {
                s.first = Some(e.to_string());
            }
        }));
        let sink = errors.clone();
        device.set_device_lost_callback(move |reason, message| {
            lock(&sink).lost = Some(format!("{reason:?}: {message}"));
        });

        let mut binding_limit = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if let Some(l) = options.max_storage_binding_size {
            binding_limit = binding_limit.min(l);
        }
        let pool = Pool::new(device.clone(), limits.max_buffer_size);
        Ok(GpuContext {
            device,
            queue,
            report,
            limits,
            float16,
            binding_limit,
            pool,
            pipelines: PipelineCache::default(),
            errors,
            packed_dot,
        })
    }

    /// What was chosen and why.
    pub fn adapter(&self) -> &AdapterReport {
        &self.report
    }

    /// Whether the device was created with SHADER_F16 (the F16 matmul then
    /// reads f16 values; see [`Float16Path`]).
    pub fn has_shader_f16(&self) -> bool {
        self.device.features().contains(wgpu::Features::SHADER_F16)
    }

    /// Whether the quantized matmuls use WGSL's `dot4I8Packed` (else its
    /// exact emulation in core WGSL).
    pub fn has_packed_dot(&self) -> bool {
        self.packed_dot
    }

    /// How the kernels read F16 weights on this device.
    pub fn float16_path(&self) -> Float16Path {
        self.float16
    }

    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// The largest weight chunk the kernels bind (the adapter's storage
    /// binding limit, or the lower test override).
    pub fn binding_limit(&self) -> u64 {
        self.binding_limit
    }

    /// The adapter's own storage binding limit (activation tensors).
    pub fn adapter_binding_limit(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Frees pooled buffers that are not in use.
    pub fn trim_pool(&self) {
        self.pool.trim()
    }

    /// Number of compiled pipelines.
    pub fn pipeline_count(&self) -> usize {
        self.pipelines.len()
    }

    /// Destroys the device now, as a driver reset would: every later call
    /// on this context fails with [`Error::Gpu`] naming the loss. (Tests of
    /// the loss path; recovering means creating a new context; feature
    /// `testing`.)
    #[cfg(any(test, feature = "testing"))]
    pub fn destroy_device(&self) {
        self.device.destroy();
        // wgpu reports the loss only from a later poll; record it now.
        lock(&self.errors)
            .lost
            .get_or_insert_with(|| "Destroyed: destroy_device was called".into());
    }

    /// Fails if the device was lost, or reports (and clears) the first error
    /// the device raised since the last check.
    pub fn check(&self) -> Result<()> {
        let mut e = lock(&self.errors);
        if let Some(lost) = &e.lost {
            return Err(Error::Gpu(format!(
                "device {} lost ({lost})",
                self.report.name
            )));
        }
        match e.first.take() {
            Some(msg) => Err(Error::Gpu(format!("{}: {msg}", self.report.name))),
            None => Ok(()),
        }
    }

    pub(crate) fn pipeline(
        &self,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.pipelines.get(shader, entry, constants) {
            return Ok(p);
        }
        self.check()?;
        let p = self.pipelines.build(&self.device, shader, entry, constants);
        if let Err(e) = self.check() {
            self.pipelines.forget_module(shader);
            return Err(Error::Gpu(format!(
                "building shader {} entry {entry}: {e}",
                shader.name
            )));
        }
        self.pipelines.insert(shader, entry, constants, p.clone());
        Ok(p)
    }

    /// A storage buffer holding `data`.
    pub(crate) fn upload_storage(&self, data: &[u8]) -> Result<PooledBuffer> {
        let buf = self.pool.acquire(Usage::Storage, data.len() as u64)?;
        if !data.is_empty() {
            self.queue.write_buffer(buf.buffer()?, 0, data);
        }
        Ok(buf)
    }

    /// Copies `bytes` of `src` from byte `offset` back to the host (both
    /// multiples of 4). The async core of every readback: in browsers the
    /// map callback is driven by the event loop; natively `device.poll`
    /// drives it here.
    pub(crate) async fn read_range_async(
        &self,
        src: &wgpu::Buffer,
        offset: u64,
        bytes: u64,
    ) -> Result<Vec<u8>> {
        self.check()?;
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let staging = self.pool.acquire(Usage::Readback, bytes)?;
        let dst = staging.buffer()?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("readback"),
            });
        enc.copy_buffer_to_buffer(src, offset, dst, 0, bytes);
        let index = self.queue.submit([enc.finish()]);
        self.pool.count_read_back(bytes);
        let (tx, rx) = oneshot();
        dst.map_async(wgpu::MapMode::Read, 0..bytes, move |r| tx.send(r));
        #[cfg(not(target_arch = "wasm32"))]
        if let Err(e) = self.device.poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        }) {
            // A recorded loss or error explains a failed wait better.
            self.check()?;
            return Err(Error::Gpu(format!("waiting for the device: {e}")));
        }
        #[cfg(target_arch = "wasm32")]
        let _ = index;
        match rx.await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                self.check()?;
                return Err(Error::Gpu(format!("mapping a readback buffer: {e}")));
            }
            None => {
                return Err(Error::Gpu(
                    "the readback was dropped before the buffer mapped".into(),
                ))
            }
        }
        // Unmap before any early return so the staging buffer goes back to
        // the pool usable.
        let out = dst
            .get_mapped_range(0..bytes)
            .map(|view| view.to_vec())
            .map_err(|e| Error::Gpu(format!("reading a mapped buffer: {e}")));
        dst.unmap();
        self.check()?;
        out
    }
}

#[cfg(not(target_arch = "wasm32"))]
impl GpuContext {
    /// Blocking [`GpuContext::new_async`].
    pub fn new(options: GpuOptions) -> Result<GpuContext> {
        pollster::block_on(Self::new_async(options))
    }

    /// Blocking [`GpuContext::adapters_async`].
    pub fn adapters(backends: Option<wgpu::Backends>) -> Vec<AdapterReport> {
        pollster::block_on(Self::adapters_async(backends))
    }

    /// Waits until all submitted work has finished.
    pub fn wait_idle(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for the device: {e}")))?;
        self.check()
    }
}
