//! stepscore-engine: runs decoder checkpoints on the CPU and through WGSL.
//!
//! Formats (GGUF, safetensors) and tokenizers in, hidden states and logits
//! out; quantized kernels, the decoder both engines share, the CPU and WGSL
//! engines, sampling and the thread pool. It knows nothing of traces, steps
//! or PRM families: the `stepscore` crate builds those on top of it, and the
//! compiler keeps this crate from reaching back (docs/ARCHITECTURE.md).
//!
//! The modules are private; what other crates may name is re-exported below,
//! grouped by what it is for. Kernels, the GGUF writer and the GPU engine's
//! one-kernel ops are in [`testing`] (feature `testing`): they exist for
//! tests, fixtures and kernel benchmarks, not as API.

mod cpu;
mod error;
mod format;
mod ggml;
#[cfg(feature = "gpu")]
mod gpu;
mod model;
mod par;
mod quant;
mod sample;
mod tokenizer;

pub use error::{Error, LengthBound, Location, Result};

// Opening a model: its bytes, the formats, the checkpoint's description and
// the tokenizer.
pub use format::storage::{open_regular, read_regular, SIDE_FILE_LIMIT};
pub use format::{GgufArray, GgufFile, GgufValue, ModelBytes};
pub use ggml::GgmlType;
pub use model::hf::to_f32;
pub use model::{Activation, Arch, GgufModel, HfCheckpoint, ModelConfig, RopeScaling};
pub use tokenizer::{Encoding, Tokenizer};

// A forward pass (whole, or as a session over a key/value cache), its hidden
// states and logits, and the kernels a caller drives it with.
pub use cpu::KvCache;
pub use model::{
    Hidden, Kernels, Layer, Linear, LmHead, Matrix, RopeStyle, SharedBytes, States, Taps,
    TokenStat, Transformer,
};

// Sampling a next token.
pub use quant::exp::exp;
pub use sample::{Sampler, Sampling};

// Capabilities: the CPU's kernels and the threads a pass runs on.
pub use par::{available, thread_count, Reservation, ThreadBudget};
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use par::{build_pool, ThreadBuilder};
pub use quant::{CpuModel, QuantizedActs, Simd, SIMD_ENV};

// The WGSL engine (feature `gpu`): adapters, the device context, the model
// uploaded and its cache.
#[cfg(feature = "gpu")]
pub use gpu::{
    choose_adapter, AdapterReport, DeviceKind, FeatureReport, Float16Path, GpuContext, GpuHidden,
    GpuKvCache, GpuMatrix, GpuOptions, GpuTransformer, LimitsReport, PoolStats, ADAPTER_ENV,
};

/// `stepscore bench --synthetic`'s models: real dimensions, random weights.
pub use model::synthetic;

/// Internals for tests, fixtures and kernel benchmarks (feature `testing`):
/// the quantized kernels one by one, the GGUF writer, the GPU engine's
/// one-kernel ops and weight repacking. Not API.
#[cfg(feature = "testing")]
pub mod testing {
    pub use crate::format::gguf::{DEFAULT_ALIGNMENT, MAX_DIMS, MAX_TENSOR_ELEMENTS};
    pub use crate::format::{GgufValueType, GgufWriter, TensorInfo};
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    pub use crate::gpu::round_acts16;
    #[cfg(feature = "gpu")]
    pub use crate::gpu::{
        float16_groups, float16_rows, gpu_weight_layout, ops, repack_blocks, GpuTensor,
        GpuWeightLayout,
    };
    pub use crate::quant::{
        bf16_to_f32, dequantize_row, f16_to_f32, f32_to_bf16, f32_to_f16, matmul, matmul_quantized,
        matmul_rows, matmul_with, quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_k,
        quantize_weights, vec_dot_type, BlockQ8, BlockQ8K, QMatrix, LOAD_TIME_TYPES,
    };
    pub use crate::tokenizer::pretok::PreTokenizer;
}
