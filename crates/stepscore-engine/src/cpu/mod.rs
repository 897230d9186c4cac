//! The CPU engine, the peer of the WGSL engine in `gpu/`: it runs a
//! [`Transformer`](crate::model::Transformer) in place, the weights staying
//! in host memory in their GGUF or load-time block formats.
//!
//! - `forward.rs`: the decoder pass (`Transformer::forward`,
//!   `forward_tapped`, `forward_rows`, `logits_for`) and the [`KvCache`];
//!   its matmuls are `model::Matrix`'s, which `crate::quant` runs;
//! - `attention.rs`: causal grouped-query attention, portable and compiled
//!   for AVX2 / AVX-512 (chosen by `quant::Simd`); its hand-written value
//!   sums sit with the other kernels, one folder per instruction set
//!   (`quant/x86/values.rs`, `quant/wasm/values.rs`);
//! - `kernels.rs`: the heads' kernel interface (`model::Kernels`).
//!
//! Every instruction-set variant gives the portable code's bits; the GPU
//! engine follows the same float order (tests/gpu_model.rs).

mod attention;
mod forward;
mod kernels;

pub use forward::KvCache;
