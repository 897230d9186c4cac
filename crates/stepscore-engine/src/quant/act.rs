//! Activation quantizers, bit-exact with llama.cpp's `quantize_row_q8_0_ref`,
//! `quantize_row_q8_1_ref` and `quantize_row_q8_K_ref`, and the per-matmul
//! quantized activation buffer.
//!
//! ggml multiplies a weight matrix by activations converted to the weight
//! type's "vec_dot_type" (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K
//! for K-quants, f16/bf16/f32 for float weights); doing the same keeps our
//! logits within rounding of llama.cpp's.

use super::fp::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// A Q8_0 or Q8_1 activation block with its f16 factors widened to f32
/// (the values the dot product uses; `s` is 0 for Q8_0).
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct BlockQ8 {
    pub qs: [i8; 32],
    pub d: f32,
    pub s: f32,
}

/// A Q8_K activation block: f32 scale, quants, and sums of each 16 quants.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct BlockQ8K {
    pub qs: [i8; 256],
    pub bsums: [i16; 16],
    pub d: f32,
}

/// ggml's `MAX(a, b)` macro: `a > b ? a : b`.
#[inline(always)]
fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// Scale (as f32, before f16 rounding) and quants of one Q8_0/Q8_1 block.
#[inline]
fn q8_32(x: &[f32], qs: &mut [i8; 32]) -> f32 {
    // Eight running maxima so the loop vectorizes; the maximum of a set does
    // not depend on the order it is taken in (NaN inputs aside).
    let mut lanes = [0.0f32; 8];
    for c in x.chunks_exact(8) {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = c_max(*m, v.abs());
        }
    }
    let amax = lanes.iter().fold(0.0f32, |m, &v| c_max(m, v));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_half_away(v * id) as i8;
    }
    d
}

/// C's `roundf` (ties away from zero) for |v| < 2^23 without a libm call
/// (f32::round is one on baseline x86_64, and this loop is per activation):
/// v - trunc(v) is exact in that range, so the tie test is exact too.
#[inline(always)]
fn round_half_away(v: f32) -> i32 {
    let t = v as i32;
    let frac = v - t as f32;
    t + (frac >= 0.5) as i32 - (frac <= -0.5) as i32
}

/// Q8_0 block: (f16 bits of d, quants).
#[inline]
pub(crate) fn q8_0_block(x: &[f32]) -> (u16, [i8; 32]) {
    let mut qs = [0i8; 32];
    let d = q8_32(x, &mut qs);
    (f32_to_f16(d), qs)
}

/// Q8_1 block: (f16 bits of d, f16 bits of d * sum(qs), quants).
#[inline]
pub(crate) fn q8_1_block(x: &[f32]) -> (u16, u16, [i8; 32]) {
    let mut qs = [0i8; 32];
    let d = q8_32(x, &mut qs);
    let sum: i32 = qs.iter().map(|&q| q as i32).sum();
    (f32_to_f16(d), f32_to_f16(sum as f32 * d), qs)
}

/// ggml's `nearest_int`: round to nearest, ties to even, via the 1.5*2^23
/// magic number (valid for |x| <= 2^22, which the scaled quants are).
#[inline(always)]
fn nearest_int(x: f32) -> i32 {
    let v = x + 12_582_912.0;
    (v.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// Q8_K block of 256 values.
pub(crate) fn q8_k_block(x: &[f32], out: &mut BlockQ8K) {
    // The scale keys on the signed value of largest magnitude (first one on
    // ties; NaNs never win): the maximum in eight lanes so the loop
    // vectorizes, then the first value that reaches it.
    let mut lanes = [0.0f32; 8];
    for c in x.chunks_exact(8) {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = c_max(v.abs(), *m);
        }
    }
    let amax = lanes.iter().fold(0.0f32, |m, &v| c_max(v, m));
    let max = x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0);
    if amax == 0.0 {
        out.d = 0.0;
        out.qs = [0; 256];
        out.bsums = [0; 16];
        return;
    }
    let iscale = -127.0 / max;
    for (q, &v) in out.qs.iter_mut().zip(x) {
        *q = nearest_int(iscale * v).min(127) as i8;
    }
    for (s, q) in out.bsums.iter_mut().zip(out.qs.chunks_exact(16)) {
        *s = q.iter().map(|&v| v as i16).sum();
    }
    out.d = 1.0 / iscale;
}

fn check_quant_args(name: &str, ty: GgmlType, x: &[f32], dst: &[u8]) -> Result<()> {
    let be = ty.block_elems();
    if x.len() % be != 0 {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} values is not a multiple of the block size {be}",
            x.len()
        )));
    }
    let need = x.len() / be * ty.block_bytes();
    if dst.len() != need {
        return Err(Error::InvalidArgument(format!(
            "{name}: {} values need {need} output bytes, got {}",
            x.len(),
            dst.len()
        )));
    }
    Ok(())
}

/// `quantize_row_q8_0_ref`: writes ggml Q8_0 blocks (34 bytes each).
pub fn quantize_row_q8_0(x: &[f32], dst: &mut [u8]) -> Result<()> {
    check_quant_args("quantize_row_q8_0", GgmlType::Q8_0, x, dst)?;
    for (xb, ob) in x.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let (d, qs) = q8_0_block(xb);
        ob[0..2].copy_from_slice(&d.to_le_bytes());
        for (o, q) in ob[2..].iter_mut().zip(qs) {
            *o = q as u8;
        }
    }
    Ok(())
}

/// `quantize_row_q8_1_ref`: writes ggml Q8_1 blocks (36 bytes each).
#[cfg(any(test, feature = "testing"))]
pub fn quantize_row_q8_1(x: &[f32], dst: &mut [u8]) -> Result<()> {
    check_quant_args("quantize_row_q8_1", GgmlType::Q8_1, x, dst)?;
    for (xb, ob) in x.chunks_exact(32).zip(dst.chunks_exact_mut(36)) {
        let (d, s, qs) = q8_1_block(xb);
        ob[0..2].copy_from_slice(&d.to_le_bytes());
        ob[2..4].copy_from_slice(&s.to_le_bytes());
        for (o, q) in ob[4..].iter_mut().zip(qs) {
            *o = q as u8;
        }
    }
    Ok(())
}

/// `quantize_row_q8_K_ref`: writes ggml Q8_K blocks (292 bytes each).
#[cfg(any(test, feature = "testing"))]
pub fn quantize_row_q8_k(x: &[f32], dst: &mut [u8]) -> Result<()> {
    check_quant_args("quantize_row_q8_k", GgmlType::Q8K, x, dst)?;
    let mut blk = BlockQ8K {
        qs: [0; 256],
        bsums: [0; 16],
        d: 0.0,
    };
    for (xb, ob) in x.chunks_exact(256).zip(dst.chunks_exact_mut(292)) {
        q8_k_block(xb, &mut blk);
        ob[0..4].copy_from_slice(&blk.d.to_le_bytes());
        for (o, q) in ob[4..260].iter_mut().zip(blk.qs) {
            *o = q as u8;
        }
        for (o, s) in ob[260..292].chunks_exact_mut(2).zip(blk.bsums) {
            o.copy_from_slice(&s.to_le_bytes());
        }
    }
    Ok(())
}

/// The activation type ggml's CPU backend multiplies a `weight` matrix with,
/// or `None` when ggml has no CPU dot product for that weight type
/// (Q8_1 and Q8_K are activation-only formats).
pub fn vec_dot_type(weight: GgmlType) -> Option<GgmlType> {
    Some(match weight {
        GgmlType::F32 => GgmlType::F32,
        GgmlType::F16 => GgmlType::F16,
        GgmlType::BF16 => GgmlType::BF16,
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => GgmlType::Q8_0,
        GgmlType::Q4_1 | GgmlType::Q5_1 => GgmlType::Q8_1,
        GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => {
            GgmlType::Q8K
        }
        GgmlType::Q8_1 | GgmlType::Q8K => return None,
    })
}

/// Blocks per thread below which another thread costs more than it saves.
const BLOCKS_PER_THREAD: usize = 1024;

/// `f` over matching ranges of `x` and `out` (`per` inputs per output) on up
/// to `threads` threads.
fn split<T: Send>(
    x: &[f32],
    out: &mut [T],
    per: usize,
    threads: usize,
    f: impl Fn(&[f32], &mut [T]) + Sync,
) {
    let n = out.len();
    let nt = crate::par::usable(threads)
        .min(n.max(1))
        .min(n / BLOCKS_PER_THREAD + 1);
    if nt <= 1 {
        f(x, out);
        return;
    }
    let chunk = n.div_ceil(nt);
    let parts: Vec<_> = x.chunks(chunk * per).zip(out.chunks_mut(chunk)).collect();
    crate::par::for_each(parts, |(xc, oc)| f(xc, oc));
}

pub(crate) enum ActData {
    /// f32 activations, already rounded through f16/bf16 when the weights are.
    F32(Vec<f32>),
    Q8(Vec<BlockQ8>),
    Q8K(Vec<BlockQ8K>),
}

/// Activations for `n_tokens` rows of `cols` values, converted once to a
/// vec_dot_type so several matrices sharing an input (q/k/v, gate/up) can
/// reuse them.
pub struct QuantizedActs {
    pub(crate) ty: GgmlType,
    pub(crate) n_tokens: usize,
    pub(crate) cols: usize,
    pub(crate) data: ActData,
}

impl QuantizedActs {
    /// Converts `x` (`n_tokens` x `cols`, row-major) to `ty`, which must be
    /// one of F32, F16, BF16, Q8_0, Q8_1, Q8_K (see [`vec_dot_type`]).
    pub fn new(ty: GgmlType, x: &[f32], n_tokens: usize, cols: usize) -> Result<Self> {
        Self::new_threaded(ty, x, n_tokens, cols, 1)
    }

    /// [`QuantizedActs::new`] on up to `threads` threads (blocks are
    /// independent, so the result is the same).
    pub(crate) fn new_threaded(
        ty: GgmlType,
        x: &[f32],
        n_tokens: usize,
        cols: usize,
        threads: usize,
    ) -> Result<Self> {
        if n_tokens.checked_mul(cols) != Some(x.len()) {
            return Err(Error::InvalidArgument(format!(
                "activations: {n_tokens} tokens x {cols} columns does not match {} values",
                x.len()
            )));
        }
        if cols % ty.block_elems() != 0 {
            return Err(Error::InvalidArgument(format!(
                "activations: {cols} columns is not a multiple of the {} block size {}",
                ty.name(),
                ty.block_elems()
            )));
        }
        let data = match ty {
            GgmlType::F32 => ActData::F32(x.to_vec()),
            GgmlType::F16 => ActData::F32(x.iter().map(|&v| f16_to_f32(f32_to_f16(v))).collect()),
            GgmlType::BF16 => ActData::F32(x.iter().map(|&v| bf16_to_f32(f32_to_bf16(v))).collect()),
            GgmlType::Q8_0 | GgmlType::Q8_1 => {
                let s_too = ty == GgmlType::Q8_1;
                let mut out = vec![BlockQ8 { qs: [0; 32], d: 0.0, s: 0.0 }; x.len() / 32];
                split(x, &mut out, 32, threads, |x, out| {
                    for (b, o) in x.chunks_exact(32).zip(out) {
                        *o = if s_too {
                            let (d, s, qs) = q8_1_block(b);
                            BlockQ8 { qs, d: f16_to_f32(d), s: f16_to_f32(s) }
                        } else {
                            let (d, qs) = q8_0_block(b);
                            BlockQ8 { qs, d: f16_to_f32(d), s: 0.0 }
                        };
                    }
                });
                ActData::Q8(out)
            }
            GgmlType::Q8K => {
                let mut out = vec![BlockQ8K { qs: [0; 256], bsums: [0; 16], d: 0.0 }; x.len() / 256];
                split(x, &mut out, 256, threads, |x, out| {
                    for (b, o) in x.chunks_exact(256).zip(out) {
                        q8_k_block(b, o);
                    }
                });
                ActData::Q8K(out)
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "activations: {} is not an activation type (use F32, F16, BF16, Q8_0, Q8_1 or Q8_K)",
                    other.name()
                )))
            }
        };
        Ok(QuantizedActs {
            ty,
            n_tokens,
            cols,
            data,
        })
    }

    /// Converts `x` to the vec_dot_type of `weight`.
    pub fn for_weight(weight: GgmlType, x: &[f32], n_tokens: usize, cols: usize) -> Result<Self> {
        Self::for_weight_threaded(weight, x, n_tokens, cols, 1)
    }

    /// [`QuantizedActs::for_weight`] on up to `threads` threads.
    pub(crate) fn for_weight_threaded(
        weight: GgmlType,
        x: &[f32],
        n_tokens: usize,
        cols: usize,
        threads: usize,
    ) -> Result<Self> {
        let ty = vec_dot_type(weight).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} is not a weight type with a CPU dot product",
                weight.name()
            ))
        })?;
        Self::new_threaded(ty, x, n_tokens, cols, threads)
    }

    pub fn ty(&self) -> GgmlType {
        self.ty
    }
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
}
