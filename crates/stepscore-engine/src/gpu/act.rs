//! 8-bit activations on the device: the CPU engine's activation path
//! (`quant::QuantizedActs`, llama.cpp's vec_dot_types) for the WGSL engine.
//!
//! A quantized weight matrix multiplies activations rounded to 8 bits per
//! block, exactly as the CPU rounds them: Q8_0/Q8_1 blocks of 32 for the
//! 32-element formats, Q8_K blocks of 256 for the K-quants
//! (`quant::vec_dot_type`). Q8_0 and Q8_1 have the same quants and scale (Q8_1
//! adds the scaled sum), so the device keeps one block form for both and the
//! matrices of one input share it whatever their 32-element format.
//!
//! (F16 and BF16 weights take activations rounded to their 16-bit type by
//! their own pass: matmul.rs `record_round16`.)
//!
//! The device layout of a block is `act_layout.rs`.

use super::act_layout::ActKind;
use super::batch::{u32_of, whole, Batch, WG};
use super::shaders;
use crate::error::{Error, Result};
#[cfg(any(test, feature = "testing"))]
use {
    super::act_layout::{Q8K_BSUMS, Q8K_D, Q8K_QS, Q8K_WORDS, Q8_D, Q8_QS, Q8_S, Q8_WORDS},
    crate::ggml::GgmlType,
};

/// Records the quantization of `n_tokens` rows of `cols` f32 values in `x`
/// into `out` (room for [`ActKind::bytes`]).
pub(crate) fn record_quantize(
    b: &mut Batch<'_>,
    kind: ActKind,
    x: wgpu::BindingResource<'_>,
    out: &wgpu::Buffer,
    n_tokens: usize,
    cols: usize,
) -> Result<()> {
    let be = kind.block_elems();
    if cols % be != 0 {
        return Err(Error::InvalidArgument(format!(
            "8-bit activations: {cols} columns is not a multiple of the block size {be}"
        )));
    }
    let shader = match kind {
        ActKind::Q8 => &shaders::QUANTIZE_Q8,
        ActKind::Q8K => &shaders::QUANTIZE_Q8_K,
    };
    let p = [u32_of(cols, "cols")?, u32_of(n_tokens, "tokens")?, 0, 0];
    let blocks = u32_of(cols / be, "blocks")?;
    b.dispatch(shader, &[x, whole(out)], &p, [blocks.div_ceil(WG), p[1], 1])
}

/// Device activations read back as the CPU engine's blocks (test support).
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Clone, PartialEq)]
pub enum ActBlocks {
    Q8(Vec<crate::quant::BlockQ8>),
    Q8K(Vec<crate::quant::BlockQ8K>),
}

/// Quantizes `n_tokens` rows of `cols` values of `x` on the device as the
/// matmuls of a `weight` matrix do, and reads the blocks back (test support,
/// feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub async fn quantize_activations_async(
    ctx: &super::GpuContext,
    x: &super::GpuTensor,
    n_tokens: usize,
    cols: usize,
    weight: GgmlType,
) -> Result<ActBlocks> {
    use crate::quant::{BlockQ8, BlockQ8K};
    let kind = ActKind::for_weight(weight).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{} weights do not multiply 8-bit activations",
            weight.name()
        ))
    })?;
    if n_tokens.checked_mul(cols) != Some(x.len()) {
        return Err(Error::InvalidArgument(format!(
            "8-bit activations: {n_tokens} x {cols} values, the tensor holds {}",
            x.len()
        )));
    }
    let bytes = kind.bytes(n_tokens, cols)?;
    let out = ctx
        .pool
        .acquire(super::pool::Usage::Storage, bytes.max(4))?;
    let mut b = Batch::new(ctx, "quantize activations");
    record_quantize(&mut b, kind, x.binding()?, out.buffer()?, n_tokens, cols)?;
    b.submit()?;
    let raw = ctx.read_range_async(out.buffer()?, 0, bytes).await?;
    let words: Vec<u32> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let byte = |w: &[u32], i: usize| (w[i / 4] >> (8 * (i % 4))) as u8 as i8;
    Ok(match kind {
        ActKind::Q8 => ActBlocks::Q8(
            words
                .chunks_exact(Q8_WORDS as usize)
                .map(|w| BlockQ8 {
                    qs: std::array::from_fn(|i| byte(&w[Q8_QS as usize..], i)),
                    d: f32::from_bits(w[Q8_D as usize]),
                    s: f32::from_bits(w[Q8_S as usize]),
                })
                .collect(),
        ),
        ActKind::Q8K => ActBlocks::Q8K(
            words
                .chunks_exact(Q8K_WORDS as usize)
                .map(|w| BlockQ8K {
                    qs: std::array::from_fn(|i| byte(&w[Q8K_QS as usize..], i)),
                    bsums: std::array::from_fn(|g| w[Q8K_BSUMS as usize + g] as i32 as i16),
                    d: f32::from_bits(w[Q8K_D as usize]),
                })
                .collect(),
        ),
    })
}

/// Blocking [`quantize_activations_async`].
#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
pub fn quantize_activations(
    ctx: &super::GpuContext,
    x: &super::GpuTensor,
    n_tokens: usize,
    cols: usize,
    weight: GgmlType,
) -> Result<ActBlocks> {
    pollster::block_on(quantize_activations_async(ctx, x, n_tokens, cols, weight))
}
