//! Unpacking of one ggml block into integer quants plus scales.
//!
//! Every weight format reduces to one of two shapes, which is what lets the
//! dot-product kernels stay format-agnostic:
//! - 32-element blocks: `value = q * d + m` with `q: i8` (m = 0 for the
//!   symmetric formats Q4_0, Q5_0, Q8_0);
//! - 256-element super-blocks (K-quants): for 16-element group g,
//!   `value = (d * sc[g]) * q - (dmin * mn[g])` with `q: i8`, `sc, mn: i16`.
//!
//! Callers pass block slices of exactly `block_bytes()`; all indexing below
//! is within those fixed sizes.

use super::fp::le_f16;
use crate::ggml::GgmlType;

/// Unpacked 32-element block: integer quants and the two float factors.
#[inline(always)]
pub(crate) fn unpack32(ty: GgmlType, b: &[u8], q: &mut [i8; 32]) -> (f32, f32) {
    match ty {
        GgmlType::Q4_0 => {
            nibbles(&b[2..18], q, -8);
            (le_f16(b, 0), 0.0)
        }
        GgmlType::Q4_1 => {
            nibbles(&b[4..20], q, 0);
            (le_f16(b, 0), le_f16(b, 2))
        }
        GgmlType::Q5_0 => {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            nibbles(&b[6..22], q, 0);
            fifth_bit(qh, q, -16);
            (le_f16(b, 0), 0.0)
        }
        GgmlType::Q5_1 => {
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            nibbles(&b[8..24], q, 0);
            fifth_bit(qh, q, 0);
            (le_f16(b, 0), le_f16(b, 2))
        }
        // Q8_0 and Q8_1 share `d @0`; Q8_1 has its sum at 2 and quants at 4.
        GgmlType::Q8_1 => {
            for (d, &s) in q.iter_mut().zip(&b[4..36]) {
                *d = s as i8;
            }
            (le_f16(b, 0), 0.0)
        }
        _ => {
            // Q8_0 (the only other 32-element format)
            for (d, &s) in q.iter_mut().zip(&b[2..34]) {
                *d = s as i8;
            }
            (le_f16(b, 0), 0.0)
        }
    }
}

/// Element j < 16 is the low nibble of byte j, element j + 16 its high nibble.
#[inline(always)]
fn nibbles(qs: &[u8], q: &mut [i8; 32], offset: i8) {
    let (lo, hi) = q.split_at_mut(16);
    for ((l, h), &s) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
        *l = (s & 0x0F) as i8 + offset;
        *h = (s >> 4) as i8 + offset;
    }
}

/// Adds bit j of `qh` as the 5th bit (16) of element j, then the offset.
#[inline(always)]
fn fifth_bit(qh: u32, q: &mut [i8; 32], offset: i8) {
    for (j, v) in q.iter_mut().enumerate() {
        *v += (((qh >> j) & 1) << 4) as i8 + offset;
    }
}

/// Unpacked K-quant super-block.
pub(crate) struct KBlock {
    pub q: [i8; 256],
    /// Scale of each 16-element group.
    pub sc: [i16; 16],
    /// Min of each 16-element group (all 0 for Q3_K and Q6_K).
    pub mn: [i16; 16],
    pub d: f32,
    pub dmin: f32,
}

impl KBlock {
    pub fn new() -> Self {
        KBlock {
            q: [0; 256],
            sc: [0; 16],
            mn: [0; 16],
            d: 0.0,
            dmin: 0.0,
        }
    }
}

/// Q4_K/Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes:
/// bytes 0..4 hold scales 0..4 (low 6 bits), bytes 4..8 mins 0..4, and
/// bytes 8..12 the low/high nibbles of scales/mins 4..8 whose top two bits
/// sit in the spare top bits of bytes 0..8.
#[inline(always)]
pub(crate) fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

#[inline(always)]
pub(crate) fn unpack_k(ty: GgmlType, b: &[u8], k: &mut KBlock) {
    match ty {
        GgmlType::Q2K => {
            // 2-bit quants: byte l of each 32-byte half holds elements at
            // shifts 0,2,4,6 of four consecutive 32-element runs.
            let qs = &b[16..80];
            for n in 0..2 {
                for j in 0..4 {
                    let base = 128 * n + 32 * j;
                    for l in 0..32 {
                        k.q[base + l] = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
                    }
                }
            }
            for ((sc, mn), &byte) in k.sc.iter_mut().zip(k.mn.iter_mut()).zip(&b[0..16]) {
                *sc = (byte & 0xF) as i16;
                *mn = (byte >> 4) as i16;
            }
            k.d = le_f16(b, 80);
            k.dmin = le_f16(b, 82);
        }
        GgmlType::Q3K => {
            // 2 low bits like Q2_K; bit (4n + j) of hmask[l] set means "no -4".
            let hm = &b[0..32];
            let qs = &b[32..96];
            for n in 0..2 {
                for j in 0..4 {
                    let base = 128 * n + 32 * j;
                    let bit = 4 * n + j;
                    for l in 0..32 {
                        let lo = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
                        let high_clear = ((hm[l] >> bit) & 1) ^ 1;
                        k.q[base + l] = lo - 4 * high_clear as i8;
                    }
                }
            }
            // 16 6-bit scales: low nibbles in bytes 0..8 (scales 0..8 low
            // halves, 8..16 high halves), top two bits in bytes 8..12.
            let s = &b[96..108];
            for g in 0..16 {
                let low4 = if g < 8 { s[g] & 0xF } else { s[g - 8] >> 4 };
                let hi2 = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
                k.sc[g] = (low4 | (hi2 << 4)) as i16 - 32;
                k.mn[g] = 0;
            }
            k.d = le_f16(b, 108);
            k.dmin = 0.0;
        }
        GgmlType::Q4K | GgmlType::Q5K => {
            let s = &b[4..16];
            let (qs, qh) = if ty == GgmlType::Q4K {
                (&b[16..144], None)
            } else {
                (&b[48..176], Some(&b[16..48]))
            };
            for c in 0..4 {
                for l in 0..32 {
                    let byte = qs[32 * c + l];
                    let (mut lo, mut hi) = (byte & 0xF, byte >> 4);
                    if let Some(qh) = qh {
                        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                    }
                    k.q[64 * c + l] = lo as i8;
                    k.q[64 * c + 32 + l] = hi as i8;
                }
            }
            for j in 0..8 {
                let (sc, mn) = scale_min_k4(j, s);
                k.sc[2 * j] = sc as i16;
                k.sc[2 * j + 1] = sc as i16;
                k.mn[2 * j] = mn as i16;
                k.mn[2 * j + 1] = mn as i16;
            }
            k.d = le_f16(b, 0);
            k.dmin = le_f16(b, 2);
        }
        GgmlType::Q6K => {
            // Low nibbles in ql, 2 high bits in qh; each 128-element half uses
            // 64 ql bytes and 32 qh bytes for four 32-element runs.
            let ql = &b[0..128];
            let qh = &b[128..192];
            for n in 0..2 {
                for l in 0..32 {
                    let h = qh[32 * n + l];
                    let l0 = ql[64 * n + l];
                    let l1 = ql[64 * n + 32 + l];
                    let base = 128 * n + l;
                    k.q[base] = ((l0 & 0xF) | ((h & 3) << 4)) as i8 - 32;
                    k.q[base + 32] = ((l1 & 0xF) | (((h >> 2) & 3) << 4)) as i8 - 32;
                    k.q[base + 64] = ((l0 >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                    k.q[base + 96] = ((l1 >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
                }
            }
            for g in 0..16 {
                k.sc[g] = b[192 + g] as i8 as i16;
                k.mn[g] = 0;
            }
            k.d = le_f16(b, 208);
            k.dmin = 0.0;
        }
        _ => {
            // Q8_K: f32 scale, plain int8 quants (the bsums are derived data).
            for (d, &s) in k.q.iter_mut().zip(&b[4..260]) {
                *d = s as i8;
            }
            k.sc = [1; 16];
            k.mn = [0; 16];
            k.d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            k.dmin = 0.0;
        }
    }
}

/// Whether `ty` is a K-quant (256-element super-blocks).
pub(crate) fn is_k(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Q8K
    )
}
