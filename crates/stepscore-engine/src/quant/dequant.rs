//! Dequantization of ggml blocks to f32, bit-exact with llama.cpp's
//! reference `dequantize_row_*` (same operations in the same order, no fused
//! multiply-add).
//!
//! Block layouts (byte offsets; f16 values little endian), from ggml-common.h:
//! - Q4_0 `d:f16 @0, qs[16] @2`; element j (j<16) is the low nibble of qs[j],
//!   element j+16 the high nibble; value (q-8)*d.
//! - Q4_1 `d @0, m @2, qs[16] @4`; value q*d + m.
//! - Q5_0 `d @0, qh:u32 @2, qs[16] @6`; bit j of qh is the 5th bit of element j.
//! - Q5_1 `d @0, m @2, qh @4, qs[16] @8`.
//! - Q8_0 `d @0, qs:i8[32] @2`.
//! - Q2_K `scales[16] @0, qs[64] @16, d @80, dmin @82`.
//! - Q3_K `hmask[32] @0, qs[64] @32, scales[12] @96, d @108`.
//! - Q4_K `d @0, dmin @2, scales[12] @4, qs[128] @16`.
//! - Q5_K `d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48`.
//! - Q6_K `ql[128] @0, qh[64] @128, scales:i8[16] @192, d @208`.
//! - Q8_K `d:f32 @0, qs:i8[256] @4, bsums:i16[16] @260`; value d*q.
//! - Q8_1 `d @0, s @2, qs:i8[32] @4` (an activation format; value q*d).

use super::blocks::{unpack32, unpack_k, KBlock};
use super::fp::{bf16_to_f32, f16_to_f32, le_u16};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// Checks that `src` holds exactly the blocks for `n` elements of `ty`.
pub(crate) fn check_row(ty: GgmlType, src_len: usize, n: usize, what: &str) -> Result<()> {
    let be = ty.block_elems();
    if n % be != 0 {
        return Err(Error::InvalidArgument(format!(
            "{what}: {n} elements is not a multiple of the {} block size {be}",
            ty.name()
        )));
    }
    let need = (n / be).checked_mul(ty.block_bytes());
    if need != Some(src_len) {
        return Err(Error::InvalidArgument(format!(
            "{what}: {n} {} elements take {} bytes, got {src_len}",
            ty.name(),
            need.map_or_else(|| "an overflowing number of".to_string(), |b| b.to_string())
        )));
    }
    Ok(())
}

/// Dequantizes a row of `dst.len()` elements of type `ty` from `src` (which
/// must hold exactly those blocks).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_row(ty, src.len(), dst.len(), "dequantize_row")?;
    let bb = ty.block_bytes();
    let be = ty.block_elems();
    let blocks = src.chunks_exact(bb).zip(dst.chunks_exact_mut(be));
    match ty {
        GgmlType::F32 => {
            blocks.for_each(|(s, d)| d[0] = f32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        }
        GgmlType::F16 => blocks.for_each(|(s, d)| d[0] = f16_to_f32(le_u16(s, 0))),
        GgmlType::BF16 => blocks.for_each(|(s, d)| d[0] = bf16_to_f32(le_u16(s, 0))),
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q8_1 => {
            let mut q = [0i8; 32];
            for (s, out) in blocks {
                let (d, _) = unpack32(ty, s, &mut q);
                // C: int * float, i.e. float(q) * d
                for (o, &v) in out.iter_mut().zip(&q) {
                    *o = v as f32 * d;
                }
            }
        }
        GgmlType::Q4_1 | GgmlType::Q5_1 => {
            let mut q = [0i8; 32];
            for (s, out) in blocks {
                let (d, m) = unpack32(ty, s, &mut q);
                for (o, &v) in out.iter_mut().zip(&q) {
                    *o = v as f32 * d + m;
                }
            }
        }
        GgmlType::Q2K | GgmlType::Q4K | GgmlType::Q5K => {
            let mut k = KBlock::new();
            for (s, out) in blocks {
                unpack_k(ty, s, &mut k);
                for ((o, q), g) in out
                    .chunks_exact_mut(16)
                    .zip(k.q.chunks_exact(16))
                    .zip(0..16)
                {
                    let dl = k.d * k.sc[g] as f32;
                    let ml = k.dmin * k.mn[g] as f32;
                    for (o, &v) in o.iter_mut().zip(q) {
                        *o = dl * v as f32 - ml;
                    }
                }
            }
        }
        GgmlType::Q3K | GgmlType::Q6K | GgmlType::Q8K => {
            let mut k = KBlock::new();
            for (s, out) in blocks {
                unpack_k(ty, s, &mut k);
                for ((o, q), g) in out
                    .chunks_exact_mut(16)
                    .zip(k.q.chunks_exact(16))
                    .zip(0..16)
                {
                    let dl = k.d * k.sc[g] as f32;
                    for (o, &v) in o.iter_mut().zip(q) {
                        *o = dl * v as f32;
                    }
                }
            }
        }
    }
    Ok(())
}
