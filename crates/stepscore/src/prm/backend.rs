//! Which engine runs a scorer: the CPU engine, or the WGSL engine on a GPU
//! (feature `gpu`, native builds; the browser drives the same kernels
//! through the wasm bindings' async path).
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
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::head::HeadOutput;
use super::scorer::Scorer;
use super::template::Encoded;
use crate::error::{Error, Result};
use crate::model::{Hidden, KvCache, Transformer};

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

#[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
type Runtime = crate::gpu::runtime::GpuRuntime;

/// The engine behind a scorer.
pub(crate) struct Engine {
    report: BackendReport,
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    gpu: Option<Runtime>,
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
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    Gpu(Option<crate::gpu::GpuKvCache>),
}

impl EngineCache {
    pub fn truncate(&mut self, n: usize) {
        match self {
            EngineCache::Cpu(c) => c.truncate(n),
            #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
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
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        gpu: None,
    }
}

impl Engine {
    /// Chooses and sets up the engine for `model` and its head.
    pub fn new(
        requested: Backend,
        model: &Transformer,
        head: Option<&super::head::Head>,
    ) -> Result<Engine> {
        if requested == Backend::Cpu {
            return Ok(cpu(requested, None, "requested"));
        }
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        {
            use crate::gpu::runtime::GpuRuntime;
            if requested == Backend::Auto {
                let pref = auto_preference();
                if pref.chosen == Backend::Cpu {
                    return Ok(cpu(requested, pref.adapter, pref.reason));
                }
            }
            match GpuRuntime::new(model, head) {
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
        #[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
        {
            let _ = (model, head);
            let why = if cfg!(target_arch = "wasm32") {
                "the blocking GPU path is native-only; in browsers the WebGPU engine is driven asynchronously"
            } else {
                "built without the `gpu` feature"
            };
            match requested {
                Backend::Gpu => Err(Error::Gpu(format!("backend gpu: {why}"))),
                _ => Ok(cpu(requested, None, why)),
            }
        }
    }

    pub fn report(&self) -> &BackendReport {
        &self.report
    }

    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    pub fn gpu(&self) -> Option<&Runtime> {
        self.gpu.as_ref()
    }
}

/// What `Backend::Auto` would choose on this machine before trying to
/// create a device: the GPU (with the adapter it would use and why) or
/// the CPU engine (and why). `stepscore doctor` prints it.
pub fn auto_preference() -> BackendReport {
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    {
        use crate::gpu::{DeviceKind, GpuContext, ADAPTER_ENV};
        let report = |chosen, adapter, reason: String| BackendReport {
            requested: Backend::Auto,
            chosen,
            adapter,
            reason,
        };
        let adapters = GpuContext::adapters(None);
        let filter = std::env::var(ADAPTER_ENV).ok().filter(|v| !v.is_empty());
        match crate::gpu::choose_adapter(&adapters, filter.as_deref()) {
            Err(e) => report(Backend::Cpu, None, format!("{e}")),
            Ok((i, why)) => {
                let Some(a) = adapters.get(i) else {
                    return report(Backend::Cpu, None, "no adapter".into());
                };
                if a.device_type == DeviceKind::Cpu && filter.is_none() {
                    report(
                        Backend::Cpu,
                        Some(a.name.clone()),
                        format!(
                            "the only adapters are software rasterizers ({}); the CPU engine is faster than running the kernels on the same CPU (use --backend gpu or {ADAPTER_ENV} to force it)",
                            a.name
                        ),
                    )
                } else {
                    report(Backend::Gpu, Some(a.name.clone()), why)
                }
            }
        }
    }
    #[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
    {
        BackendReport {
            requested: Backend::Auto,
            chosen: Backend::Cpu,
            adapter: None,
            reason: if cfg!(target_arch = "wasm32") {
                "the blocking GPU path is native-only".into()
            } else {
                "built without the `gpu` feature".into()
            },
        }
    }
}

impl Scorer {
    /// Which engine this scorer runs on, and why.
    pub fn backend_report(&self) -> &BackendReport {
        self.engine().report()
    }

    /// Device buffers of the GPU engine (None on the CPU engine, or before
    /// a device exists): the leak tests' counter.
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    pub fn gpu_pool_stats(&self) -> Option<crate::gpu::PoolStats> {
        self.engine().gpu().and_then(|g| g.pool_stats())
    }

    /// Destroys the GPU device as a driver reset would (tests of recovery):
    /// the next call fails with [`Error::Gpu`], the one after recreates the
    /// device and re-uploads the model.
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    pub fn simulate_device_loss(&self) {
        if let Some(g) = self.engine().gpu() {
            g.destroy_device();
        }
    }

    /// Hidden states of `tokens` from position 0 on this scorer's engine.
    pub(super) fn engine_forward(&self, tokens: &[u32]) -> Result<Hidden> {
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        if let Some(g) = self.engine().gpu() {
            return g.run(self.model(), self.head_opt(), |st| {
                let h = st.model.forward_gpu(tokens, None)?;
                h.to_hidden(&st.ctx)
            });
        }
        self.model().forward(tokens, None)
    }

    /// Forward pass and head over a whole encoded prompt.
    pub(super) fn engine_score(&self, enc: &Encoded) -> Result<HeadOutput> {
        let head = self.head()?;
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        if let Some(g) = self.engine().gpu() {
            return g.run(self.model(), self.head_opt(), |st| {
                let h = st.model.forward_gpu(&enc.tokens, None)?;
                st.head()?.apply(&st.model, &h, enc)
            });
        }
        let hidden = self.model().forward(&enc.tokens, None)?;
        head.apply(self.model(), &hidden, enc)
    }

    /// An empty session cache for this scorer's engine.
    pub(super) fn engine_cache(&self) -> EngineCache {
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        if self.engine().gpu().is_some() {
            return EngineCache::Gpu(None);
        }
        EngineCache::Cpu(self.model().new_cache())
    }

    /// Makes `cache` usable on the current engine state and returns how
    /// many positions it still holds (0 when the device was recreated since
    /// it was filled).
    pub(super) fn engine_cache_ready(&self, cache: &mut EngineCache) -> Result<usize> {
        match cache {
            EngineCache::Cpu(c) => Ok(c.len()),
            #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
            EngineCache::Gpu(c) => {
                let g = self.engine().gpu().ok_or_else(|| {
                    Error::InvalidArgument("a GPU session on a CPU scorer".into())
                })?;
                g.run(self.model(), self.head_opt(), |st| {
                    let valid = c.as_ref().is_some_and(|c| c.belongs_to(&st.model));
                    if !valid {
                        *c = Some(st.model.new_cache());
                    }
                    Ok(c.as_ref().map_or(0, |c| c.len()))
                })
            }
        }
    }

    /// Runs `tokens` after what `cache` holds and appends their keys and
    /// values; with `enc` (positions relative to `tokens`) also applies the
    /// head to them.
    pub(super) fn engine_extend(
        &self,
        tokens: &[u32],
        cache: &mut EngineCache,
        enc: Option<&Encoded>,
    ) -> Result<Option<HeadOutput>> {
        match cache {
            EngineCache::Cpu(c) => {
                let hidden = self.model().forward(tokens, Some(c))?;
                enc.map(|e| self.head()?.apply(self.model(), &hidden, e))
                    .transpose()
            }
            #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
            EngineCache::Gpu(c) => {
                let g = self.engine().gpu().ok_or_else(|| {
                    Error::InvalidArgument("a GPU session on a CPU scorer".into())
                })?;
                g.run(self.model(), self.head_opt(), |st| {
                    let cache =
                        match c {
                            Some(c) if c.belongs_to(&st.model) => c,
                            _ => return Err(Error::Gpu(
                                "the session's GPU cache belongs to a device that was recreated"
                                    .into(),
                            )),
                        };
                    let h = st.model.forward_gpu(tokens, Some(cache))?;
                    enc.map(|e| st.head()?.apply(&st.model, &h, e)).transpose()
                })
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
