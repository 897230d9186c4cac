//! Quantized tensors on the CPU: ggml block formats.
//!
//! - [`dequantize_row`]: blocks -> f32, bit-exact with llama.cpp;
//! - [`quantize_row_q8_0`], [`quantize_row_q8_1`], [`quantize_row_q8_k`]:
//!   llama.cpp's reference activation quantizers, bit-exact;
//! - [`matmul`] and friends: weight matrix x activations, computed the way
//!   ggml's CPU backend does (activations in the weight's vec_dot_type,
//!   integer block sums), multi-threaded, with AVX2/AVX-512 kernels on
//!   x86_64, NEON kernels on aarch64 and SIMD128 kernels on wasm32.
//!
//! Exactness is checked against fixtures generated from llama.cpp's own C
//! code (scripts/reference/quant/, tests/fixtures/quant/).
//!
//! Which file runs a product (`matmul.rs` chooses by [`Simd`] and the token
//! count): `portable.rs`, the portable kernels, whose float steps every other
//! path and the WGSL engine follow; then one folder per instruction set.
//! `x86/`: `mod.rs`, AVX2; `rowdot.rs`, 1 to 3 tokens (generation's decode
//! steps) on AVX2 straight from the packed blocks; the prefill tiles, weight
//! rows unpacked a group at a time (`groups.rs`, the loop): `ktile.rs`,
//! K-quants, with `avx512::tile` (VNNI) or `x86::tile_k` (AVX2) /
//! `x86::tile_k_vnni` (AVX-VNNI), and `tile32.rs`, the 32-element formats,
//! with `avx512::tile32` (VNNI) or `x86::tile32` (AVX2), `values.rs`,
//! attention's weighted sum of values in AVX2 / AVX-512 registers, and
//! `attention.rs`, a prefill attention tile on AVX-512 with sixteen rows in
//! the lanes (a decode step's heads: sixteen keys) (the `cpu` engine's attention calls both). `wasm/`: SIMD128
//! through the same group loop, `ktile.rs` (K-quants), `tile32.rs`
//! (32-element formats), `mod.rs` (f32 rows) and `values.rs` (attention's
//! weighted values). `arm/`: NEON (`Neon`, int8
//! `smull`) and its dot-product extension (`NeonDot`, `sdot`) through the
//! same group loop, `ktile.rs`, `tile32.rs` and `mod.rs` (f32 rows and the
//! shared integer sums). All give the portable kernels' bits
//! (tests/quant_matmul.rs `every_instruction_set_gives_the_portable_bits`,
//! `decode_shapes_give_the_portable_bits`).

mod act;
/// aarch64 kernels: NEON and the dot-product extension (one folder per instruction set).
#[cfg(target_arch = "aarch64")]
mod arm;
mod blocks;
/// Which CPU this is, for `stepscore doctor` and benchmark figures.
mod cpu;
mod dequant;
/// e^x from correctly rounded steps, the same bits on every engine.
pub mod exp;
mod fp;
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
mod groups;
mod matmul;
mod portable;
/// WebAssembly SIMD128 kernels (one folder per instruction set).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) mod wasm;
mod weights;
/// x86-64 kernels: AVX2, AVX-VNNI and AVX-512 VNNI (one folder per instruction set).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

pub use act::{vec_dot_type, QuantizedActs};
// Kernels one by one, for tests and benchmarks (lib.rs, `testing`).
#[cfg(any(test, feature = "testing"))]
pub use act::{quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_k, BlockQ8, BlockQ8K};
pub use cpu::CpuModel;
pub use dequant::dequantize_row;
#[cfg(any(test, feature = "testing"))]
pub use fp::{bf16_to_f32, f16_to_f32};
pub use fp::{f32_to_bf16, f32_to_f16};
pub use matmul::{matmul, matmul_quantized, QMatrix, Simd, SIMD_ENV};
#[cfg(any(test, feature = "testing"))]
pub use matmul::{matmul_rows, matmul_with};
pub(crate) use portable::{dot, dot_f32, weigh_values, TileShape};
pub use weights::quantize_weights;
#[cfg(any(test, feature = "testing"))]
pub use weights::LOAD_TIME_TYPES;
