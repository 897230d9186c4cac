//! The WGSL engine's runtime: a wgpu device with pooled buffers, cached
//! pipelines and async readback, and the matmul kernels over f32 and ggml
//! block weights (shaders/ at the repository root).
//!
//! Everything that waits on the device has an async core (the same code runs
//! in browsers) and, natively, a blocking wrapper. Nothing here panics on a
//! missing adapter or a lost device: those surface as [`Error::Gpu`].
//!
//! [`Error::Gpu`]: crate::error::Error::Gpu

// wgpu's browser types are !Send/!Sync on wasm32; the shared handles stay
// `Arc`s so native builds can share them across threads.
#![cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]

mod act;
mod act_layout;
mod adapter;
mod batch;
mod context;
mod kernels;
mod matmul;
pub mod ops;
mod pipeline;
mod pool;
mod readback;
mod repack;
mod shaders;
mod tensor;
mod transformer;

pub use adapter::{
    choose as choose_adapter, AdapterReport, DeviceKind, FeatureReport, LimitsReport, ADAPTER_ENV,
};
pub use context::{Float16Path, GpuContext, GpuOptions};
#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
pub use matmul::round_acts16;
pub use matmul::GpuMatrix;
pub use pool::PoolStats;
// Repacking and bare tensors, for tests and benchmarks (lib.rs, `testing`).
#[cfg(any(test, feature = "testing"))]
pub use repack::{float16_groups, float16_rows, gpu_weight_layout, repack_blocks, GpuWeightLayout};
#[cfg(any(test, feature = "testing"))]
pub use tensor::GpuTensor;
pub use transformer::{GpuHidden, GpuKvCache, GpuTransformer};
