//! stepscore-engine: runs decoder checkpoints on the CPU and through WGSL.
//!
//! Formats (GGUF, safetensors) and tokenizers in, hidden states and logits
//! out; quantized kernels, the decoder both engines share, the CPU and WGSL
//! engines, sampling and the thread pool. It knows nothing of traces, steps
//! or PRM families: the `stepscore` crate builds those on top of it, and the
//! compiler keeps this crate from reaching back (docs/ARCHITECTURE.md).

pub mod cpu;
pub mod error;
pub mod format;
pub mod ggml;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod model;
pub mod par;
pub mod quant;
pub mod sample;
pub mod tokenizer;

pub use error::{Error, LengthBound, Location, Result};
