//! How the engine of a scorer is chosen: the CPU engine, or the WGSL engine
//! on a GPU (feature `gpu`: Vulkan/Metal/DX12 natively, WebGPU in browsers).
//! The engines themselves are in `engine/`; this module is the choice.
//!
//! `Backend::Auto` picks a GPU only when it is hardware: if the best adapter
//! wgpu finds is a software rasterizer (Mesa llvmpipe, SwiftShader, WARP),
//! the CPU engine is faster than running the kernels on that same CPU, so
//! Auto stays on the CPU and says so. Naming an adapter (the
//! `STEPSCORE_ADAPTER` variable) or asking for `Backend::Gpu` overrides
//! that. When there is no adapter, or device creation or the upload fails,
//! Auto falls back to the CPU with the reason; `Backend::Gpu` fails instead.
//!
//! The default is `Auto` in every front end (the core's `ScorerOptions`,
//! the CLI, Python, npm): the engines give the same bits, so the choice is
//! one of speed only.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[cfg(not(target_arch = "wasm32"))]
use super::blocking::block_on;
use crate::{Error, Result};

/// The engine a scorer runs on: the one vocabulary of every front end (the
/// CLI's `--backend`, the wasm `withBackend`, the npm package's `backend`,
/// Python's `backend=`). `webgpu` names the GPU engine too: it is the same
/// WGSL engine, on WebGPU in a browser.
///
/// ```
/// use stepscore::prm::Backend;
///
/// assert_eq!("webgpu".parse::<Backend>().unwrap(), Backend::Gpu);
/// assert_eq!("Auto".parse::<Backend>().unwrap(), Backend::Auto);
/// assert_eq!(Backend::Gpu.name(), "gpu");
/// assert!("cuda".parse::<Backend>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Backend {
    /// A hardware GPU when there is one, else the CPU engine.
    #[default]
    Auto,
    /// The WGSL engine on the chosen adapter (software adapters included).
    Gpu,
    /// The CPU engine.
    Cpu,
}

impl Backend {
    /// Every name [`Backend::from_str`] accepts, canonical names first.
    pub const NAMES: [&'static str; 4] = ["auto", "gpu", "cpu", "webgpu"];

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

impl TryFrom<String> for Backend {
    type Error = String;

    /// serde reads it by name; the message names the bad value, serde the option.
    fn try_from(s: String) -> std::result::Result<Backend, String> {
        s.parse().map_err(|e: Error| e.detail())
    }
}

impl FromStr for Backend {
    type Err = Error;

    fn from_str(s: &str) -> Result<Backend> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Backend::Auto),
            "gpu" | "webgpu" => Ok(Backend::Gpu),
            "cpu" => Ok(Backend::Cpu),
            _ => Err(Error::InvalidArgument(format!(
                "unknown backend `{s}` (expected auto, gpu (also webgpu) or cpu)"
            ))),
        }
    }
}

/// Words in an adapter's description that mark a software rasterizer
/// (Mesa llvmpipe and lavapipe, SwiftShader, Microsoft WARP).
const SOFTWARE_ADAPTER_WORDS: [&str; 5] =
    ["swiftshader", "llvmpipe", "lavapipe", "warp", "software"];

/// Whether an adapter runs the kernels on the CPU: its API says so
/// (`reported_software`: wgpu's device type `Cpu`, WebGPU's
/// `isFallbackAdapter`) or its description (name, vendor, architecture)
/// names a software rasterizer. [`Backend::Auto`] never picks one: the CPU
/// engine is faster than the kernels on that same CPU. The one policy of
/// every front end: the native choice below and the npm package's (through
/// the wasm `isSoftwareAdapter`).
///
/// ```
/// use stepscore::prm::is_software_adapter;
///
/// assert!(is_software_adapter("Google SwiftShader", false));
/// assert!(is_software_adapter("llvmpipe (LLVM 15.0.6, 256 bits)", false));
/// assert!(is_software_adapter("unnamed adapter", true));
/// assert!(!is_software_adapter("NVIDIA GeForce RTX 4090", false));
/// ```
pub fn is_software_adapter(description: &str, reported_software: bool) -> bool {
    let description = description.to_ascii_lowercase();
    reported_software
        || SOFTWARE_ADAPTER_WORDS
            .iter()
            .any(|w| description.contains(w))
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
#[cfg(any(feature = "gpu", not(target_arch = "wasm32")))]
pub(crate) async fn auto_preference_async() -> BackendReport {
    #[cfg(feature = "gpu")]
    {
        use crate::engine::{DeviceKind, GpuContext, ADAPTER_ENV};
        let report = |chosen, adapter, reason: String| BackendReport {
            requested: Backend::Auto,
            chosen,
            adapter,
            reason,
        };
        let adapters = GpuContext::adapters_async(None).await;
        let filter = std::env::var(ADAPTER_ENV).ok().filter(|v| !v.is_empty());
        match crate::engine::choose_adapter(&adapters, filter.as_deref()) {
            Err(e) => report(Backend::Cpu, None, format!("{e}")),
            Ok((i, why)) => {
                let Some(a) = adapters.get(i) else {
                    return report(Backend::Cpu, None, "no adapter".into());
                };
                if is_software_adapter(&a.name, a.device_type == DeviceKind::Cpu)
                    && filter.is_none()
                {
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
        assert_eq!(Backend::default(), Backend::Auto);
        for b in [Backend::Auto, Backend::Gpu, Backend::Cpu] {
            assert_eq!(b.name().parse::<Backend>().unwrap(), b);
        }
        for name in Backend::NAMES {
            assert!(name.parse::<Backend>().is_ok(), "{name}");
        }
        assert_eq!("WebGPU".parse::<Backend>().unwrap(), Backend::Gpu);
    }
}
