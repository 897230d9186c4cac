//! Which engine runs a scorer: the CPU engine, or the WGSL engine on a GPU
//! (feature `gpu`: Vulkan/Metal/DX12 natively, WebGPU in browsers). The
//! engine calls are async; natively they complete inside one poll, and the
//! blocking API wraps them; in a browser the GPU's are awaited through the
//! `*_async` methods.
//!
//! `Backend::Auto` picks a GPU only when it is hardware: if the best adapter
//! wgpu finds is a software rasterizer (Mesa llvmpipe, SwiftShader, WARP),
//! the CPU engine is faster than running the kernels on that same CPU, so
//! Auto stays on the CPU and says so. Naming an adapter (the
//! `STEPSCORE_ADAPTER` variable) or asking for `Backend::Gpu` overrides
//! that. When there is no adapter, or device creation or the upload fails,
//! Auto falls back to the CPU with the reason; `Backend::Gpu` fails instead.
//!
//! The library default is `Cpu` (explicit opt-in: results of the CPU
//! engine's quantized path differ from the GPU's f32-activation path by up
//! to ~1e-2 on quantized checkpoints); the CLI defaults to `auto`.

use std::fmt;
use std::future::Future;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::head::HeadOutput;
use super::scorer::Scorer;
use super::template::Encoded;
use crate::error::{Error, Result};
use crate::model::{Hidden, KvCache, Taps, Transformer};

/// The engine a scorer runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// A hardware GPU when there is one, else the CPU engine.
    Auto,
    /// The WGSL engine on the chosen adapter (software adapters included).
    Gpu,
    /// The CPU engine.
    #[default]
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Auto => "auto",
            Backend::Gpu => "gpu",
            Backend::Cpu => "cpu",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "gpu" => Ok(Backend::Gpu),
            "cpu" => Ok(Backend::Cpu),
            _ => Err(Error::InvalidArgument(format!(
                "unknown backend `{s}` (expected auto, gpu or cpu)"
            ))),
        }
    }
}

/// What a scorer runs on and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendReport {
    pub requested: Backend,
    /// `Gpu` or `Cpu`.
    pub chosen: Backend,
    /// The adapter, when the GPU was chosen or considered.
    pub adapter: Option<String>,
    pub reason: String,
}

impl fmt::Display for BackendReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (requested {})", self.chosen, self.requested)?;
        if let Some(a) = &self.adapter {
            write!(f, " on {a}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

#[cfg(feature = "gpu")]
use super::gpu_runtime::{GpuRuntime, GpuState};

/// The engine behind a scorer.
pub(crate) struct Engine {
    report: BackendReport,
    #[cfg(feature = "gpu")]
    gpu: Option<GpuRuntime>,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("report", &self.report)
            .finish()
    }
}

/// A session's KV cache on whichever engine the scorer runs.
#[derive(Debug, Clone)]
pub(crate) enum EngineCache {
    Cpu(KvCache),
    /// Made on first use, and again after the device was recreated.
    #[cfg(feature = "gpu")]
    Gpu(Option<crate::gpu::GpuKvCache>),
}

impl EngineCache {
    pub fn truncate(&mut self, n: usize) {
        match self {
            EngineCache::Cpu(c) => c.truncate(n),
            #[cfg(feature = "gpu")]
            EngineCache::Gpu(c) => {
                if let Some(c) = c {
                    c.truncate(n)
                }
            }
        }
    }
}

fn cpu(requested: Backend, adapter: Option<String>, reason: impl Into<String>) -> Engine {
    Engine {
        report: BackendReport {
            requested,
            chosen: Backend::Cpu,
            adapter,
            reason: reason.into(),
        },
        #[cfg(feature = "gpu")]
        gpu: None,
    }
}

/// Runs an engine future to completion on this thread. Natively every wait
/// of the GPU engine happens inside the future (`device.poll`), and the CPU
/// engine's futures are ready at once; in a browser a GPU readback needs
/// the event loop, so a future still pending after one poll is refused
/// (callers check [`Scorer::blocking_allowed`] first, so nothing is left
/// half-submitted).
pub(crate) fn block_on<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    {
        pollster::block_on(f)
    }
    #[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
    {
        use std::task::{Context, Poll, Waker};
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => Err(Error::InvalidArgument(ASYNC_ONLY.into())),
        }
    }
}

const ASYNC_ONLY: &str = "this scorer runs on WebGPU, where results arrive asynchronously: use the async methods (score_async, append_async)";

impl Engine {
    /// Chooses and sets up the engine for `model` and its head, blocking.
    /// In a browser only the CPU engine can be set up this way (device
    /// creation is async there): `Auto` stays on the CPU with that reason
    /// and `Gpu` is refused; [`Scorer::set_backend_async`] does the rest.
    pub fn new(
        requested: Backend,
        model: &Transformer,
        head: Option<&super::head::Head>,
    ) -> Result<Engine> {
        if cfg!(target_arch = "wasm32") && requested != Backend::Cpu {
            let why = "in a browser the WebGPU engine is set up asynchronously (Scorer::set_backend_async)";
            return match requested {
                Backend::Gpu => Err(Error::Gpu(format!("backend gpu: {why}"))),
                _ => Ok(cpu(requested, None, why)),
            };
        }
        block_on(Self::new_async(requested, model, head))
    }

    /// Chooses and sets up the engine (see [`Backend`]).
    pub async fn new_async(
        requested: Backend,
        model: &Transformer,
        head: Option<&super::head::Head>,
    ) -> Result<Engine> {
        if requested == Backend::Cpu {
            return Ok(cpu(requested, None, "requested"));
        }
        #[cfg(feature = "gpu")]
        {
            if requested == Backend::Auto {
                let pref = auto_preference_async().await;
                if pref.chosen == Backend::Cpu {
                    return Ok(cpu(requested, pref.adapter, pref.reason));
                }
            }
            match GpuRuntime::new(model, head).await {
                Ok((rt, adapter)) => Ok(Engine {
                    report: BackendReport {
                        requested,
                        chosen: Backend::Gpu,
                        adapter: Some(adapter.name.clone()),
                        reason: adapter.reason.clone(),
                    },
                    gpu: Some(rt),
                }),
                Err(e) if requested == Backend::Auto => Ok(cpu(
                    requested,
                    None,
                    format!("GPU unavailable, using the CPU engine: {e}"),
                )),
                Err(e) => Err(e),
            }
        }
        #[cfg(not(feature = "gpu"))]
        {
            let _ = (model, head);
            let why = "built without the `gpu` feature";
            match requested {
                Backend::Gpu => Err(Error::Gpu(format!("backend gpu: {why}"))),
                _ => Ok(cpu(requested, None, why)),
            }
        }
    }

    pub fn report(&self) -> &BackendReport {
        &self.report
    }

    #[cfg(feature = "gpu")]
    pub fn gpu(&self) -> Option<&GpuRuntime> {
        self.gpu.as_ref()
    }

    /// Whether this engine's results can only be awaited (WebGPU in a browser).
    fn async_only(&self) -> bool {
        #[cfg(all(feature = "gpu", target_arch = "wasm32"))]
        return self.gpu.is_some();
        #[cfg(not(all(feature = "gpu", target_arch = "wasm32")))]
        false
    }
}

/// What `Backend::Auto` would choose on this machine before trying to
/// create a device: the GPU (with the adapter it would use and why) or
/// the CPU engine (and why). `stepscore doctor` prints it.
#[cfg(not(target_arch = "wasm32"))]
pub fn auto_preference() -> BackendReport {
    block_on(async { Ok(auto_preference_async().await) }).unwrap_or_else(|e| BackendReport {
        requested: Backend::Auto,
        chosen: Backend::Cpu,
        adapter: None,
        reason: e.to_string(),
    })
}

/// [`auto_preference`], awaited (the browser's adapter request is async).
/// A software adapter (llvmpipe, SwiftShader, WARP; in a browser, one it
/// reports as a fallback adapter) means the CPU engine.
pub async fn auto_preference_async() -> BackendReport {
    #[cfg(feature = "gpu")]
    {
        use crate::gpu::{DeviceKind, GpuContext, ADAPTER_ENV};
        let report = |chosen, adapter, reason: String| BackendReport {
            requested: Backend::Auto,
            chosen,
            adapter,
            reason,
        };
        let adapters = GpuContext::adapters_async(None).await;
        let filter = std::env::var(ADAPTER_ENV).ok().filter(|v| !v.is_empty());
        match crate::gpu::choose_adapter(&adapters, filter.as_deref()) {
            Err(e) => report(Backend::Cpu, None, format!("{e}")),
            Ok((i, why)) => {
                let Some(a) = adapters.get(i) else {
                    return report(Backend::Cpu, None, "no adapter".into());
                };
                if a.device_type == DeviceKind::Cpu && filter.is_none() {
                    let name = if a.name.is_empty() {
                        "unnamed"
                    } else {
                        &a.name
                    };
                    report(
                        Backend::Cpu,
                        Some(a.name.clone()),
                        format!(
                            "the only adapters are software rasterizers ({name}); the CPU engine is faster than running the kernels on the same CPU (ask for the GPU backend, or set {ADAPTER_ENV} natively, to force it)"
                        ),
                    )
                } else {
                    report(Backend::Gpu, Some(a.name.clone()), why)
                }
            }
        }
    }
    #[cfg(not(feature = "gpu"))]
    {
        BackendReport {
            requested: Backend::Auto,
            chosen: Backend::Cpu,
            adapter: None,
            reason: "built without the `gpu` feature".into(),
        }
    }
}

impl Scorer {
    /// Which engine this scorer runs on, and why.
    pub fn backend_report(&self) -> &BackendReport {
        self.engine().report()
    }

    /// Moves this scorer to `backend`, setting up the device and uploading
    /// the model when it is a GPU one: how a browser gets the WebGPU
    /// engine (natively, [`ScorerOptions::backend`] does the same at load).
    /// Sessions must be started after this.
    ///
    /// [`ScorerOptions::backend`]: super::ScorerOptions::backend
    pub async fn set_backend_async(&mut self, backend: Backend) -> Result<()> {
        let engine = Engine::new_async(backend, self.model(), self.head_opt()).await?;
        self.set_engine(engine);
        Ok(())
    }

    /// Fails when results can only be awaited (the WebGPU engine in a
    /// browser): the blocking methods call this before starting any work.
    pub(super) fn blocking_allowed(&self) -> Result<()> {
        if self.engine().async_only() {
            return Err(Error::InvalidArgument(ASYNC_ONLY.into()));
        }
        Ok(())
    }

    /// Device buffers of the GPU engine (None on the CPU engine, or before
    /// a device exists): the leak tests' counter.
    #[cfg(feature = "gpu")]
    pub fn gpu_pool_stats(&self) -> Option<crate::gpu::PoolStats> {
        self.engine().gpu().and_then(|g| g.pool_stats())
    }

    /// Destroys the GPU device as a driver reset would (tests of recovery):
    /// the next call fails with [`Error::Gpu`], the one after recreates the
    /// device and re-uploads the model.
    #[cfg(feature = "gpu")]
    pub fn simulate_device_loss(&self) {
        if let Some(g) = self.engine().gpu() {
            g.destroy_device();
        }
    }

    /// Hidden states of `tokens` from position 0 on this scorer's engine
    /// (and those of layer `tap`), on the host.
    pub(super) async fn engine_forward(
        &self,
        tokens: &[u32],
        tap: Option<usize>,
    ) -> Result<Taps<Hidden>> {
        #[cfg(feature = "gpu")]
        if let Some(g) = self.engine().gpu() {
            return g
                .run(self.model(), self.head_opt(), async |st: &GpuState| {
                    let h = st.model.forward_gpu_tapped(tokens, None, tap)?;
                    let last = h.last.to_hidden_async(&st.ctx).await?;
                    let layer = match &h.layer {
                        Some(l) => Some(l.to_hidden_async(&st.ctx).await?),
                        None => None,
                    };
                    Ok(Taps { last, layer })
                })
                .await;
        }
        self.model().forward_tapped(tokens, None, tap)
    }

    /// Forward pass and head over a whole encoded prompt.
    pub(super) async fn engine_score(&self, enc: &Encoded) -> Result<HeadOutput> {
        let head = self.head()?;
        let tap = self.tap();
        #[cfg(feature = "gpu")]
        if let Some(g) = self.engine().gpu() {
            return g
                .run(self.model(), self.head_opt(), async |st: &GpuState| {
                    let h = st.model.forward_gpu_tapped(&enc.tokens, None, tap)?;
                    st.head()?.apply(&st.model, &h, enc).await
                })
                .await;
        }
        let hidden = self.model().forward_tapped(&enc.tokens, None, tap)?;
        head.apply(self.model(), &hidden, enc).await
    }

    /// An empty session cache for this scorer's engine.
    pub(super) fn engine_cache(&self) -> EngineCache {
        #[cfg(feature = "gpu")]
        if self.engine().gpu().is_some() {
            return EngineCache::Gpu(None);
        }
        EngineCache::Cpu(self.model().new_cache())
    }

    /// Makes `cache` usable on the current engine state and returns how
    /// many positions it still holds (0 when the device was recreated since
    /// it was filled).
    pub(super) async fn engine_cache_ready(&self, cache: &mut EngineCache) -> Result<usize> {
        match cache {
            EngineCache::Cpu(c) => Ok(c.len()),
            #[cfg(feature = "gpu")]
            EngineCache::Gpu(c) => {
                let g = self.engine().gpu().ok_or_else(|| {
                    Error::InvalidArgument("a GPU session on a CPU scorer".into())
                })?;
                g.run(self.model(), self.head_opt(), async |st: &GpuState| {
                    let valid = c.as_ref().is_some_and(|c| c.belongs_to(&st.model));
                    if !valid {
                        *c = Some(st.model.new_cache());
                    }
                    Ok(c.as_ref().map_or(0, |c| c.len()))
                })
                .await
            }
        }
    }

    /// Runs `tokens` after what `cache` holds and appends their keys and
    /// values; with `enc` (positions relative to `tokens`) also applies the
    /// head to them.
    pub(super) async fn engine_extend(
        &self,
        tokens: &[u32],
        cache: &mut EngineCache,
        enc: Option<&Encoded>,
    ) -> Result<Option<HeadOutput>> {
        match cache {
            EngineCache::Cpu(c) => {
                let hidden = self.model().forward_tapped(tokens, Some(c), self.tap())?;
                match enc {
                    Some(e) => Ok(Some(self.head()?.apply(self.model(), &hidden, e).await?)),
                    None => Ok(None),
                }
            }
            #[cfg(feature = "gpu")]
            EngineCache::Gpu(c) => {
                let g = self.engine().gpu().ok_or_else(|| {
                    Error::InvalidArgument("a GPU session on a CPU scorer".into())
                })?;
                g.run(self.model(), self.head_opt(), async |st: &GpuState| {
                    let cache =
                        match c {
                            Some(c) if c.belongs_to(&st.model) => c,
                            _ => return Err(Error::Gpu(
                                "the session's GPU cache belongs to a device that was recreated"
                                    .into(),
                            )),
                        };
                    let h = st
                        .model
                        .forward_gpu_tapped(tokens, Some(cache), self.tap())?;
                    match enc {
                        Some(e) => Ok(Some(st.head()?.apply(&st.model, &h, e).await?)),
                        None => Ok(None),
                    }
                })
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_parse_case_insensitively_and_name_the_bad_value() {
        assert_eq!("auto".parse::<Backend>().unwrap(), Backend::Auto);
        assert_eq!("GPU".parse::<Backend>().unwrap(), Backend::Gpu);
        assert_eq!("cpu".parse::<Backend>().unwrap(), Backend::Cpu);
        let err = "cuda".parse::<Backend>().unwrap_err().to_string();
        assert!(err.contains("cuda") && err.contains("auto"), "{err}");
        assert_eq!(Backend::default(), Backend::Cpu);
        for b in [Backend::Auto, Backend::Gpu, Backend::Cpu] {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
        }
    }
}
