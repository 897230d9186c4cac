//! The 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) x Q8_0/Q8_1
//! activations on NEON: weight rows unpacked once into groups of `ROWS`
//! rows of int8 quants, then multiplied one token at a time (`groups.rs`,
//! the loop every tile path shares).
//!
//! The shared float order (`portable::dot32`) keeps eight f32 lanes per row
//! and token, lane l taking the block's elements 4l..4l+3: exactly what
//! `quad_sums` leaves in its lanes (one `sdot` per 16 elements, or
//! `smull` and two pairwise adds), so a block is two `quad_sums` per row.
//!
//! Results equal the portable kernels' bit for bit: integer sums are exact,
//! each lane's `acc += (d_w * d_a) * isum` is the portable one, the `m * s`
//! term has its own accumulator, and the final reduction is `lane_tree`.

use core::arch::aarch64::*;

use super::quad_sums;
use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8;
use crate::quant::portable::lane_tree;

/// Rows per group.
const ROWS: usize = 4;

/// One 32-element block of `ROWS` weight rows (`groups::Rows32`).
type Rows32 = crate::quant::groups::Rows32<i8, ROWS>;

/// `out[0][r]` = row r of the group . the token, over all blocks.
///
/// # Safety
/// Every slice holds the same number of blocks (`groups::run` and `worker`
/// slice them so); with `DOT`, as `quad_sums`.
#[inline(always)]
unsafe fn tile<const MIN: bool, const DOT: bool>(
    g: &[Rows32],
    acts: &[&[BlockQ8]; 1],
) -> [[f32; ROWS]; 1] {
    debug_assert!(acts[0].len() == g.len());
    let mut lo = [vdupq_n_f32(0.0); ROWS];
    let mut hi = [vdupq_n_f32(0.0); ROWS];
    let mut accm = [0.0f32; ROWS];
    for (rows, blk) in g.iter().zip(acts[0]) {
        let (a0, a1) = (vld1q_s8(blk.qs.as_ptr()), vld1q_s8(blk.qs.as_ptr().add(16)));
        for r in 0..ROWS {
            let wp = rows.q[r].as_ptr();
            let s0 = vcvtq_f32_s32(quad_sums::<DOT>(vld1q_s8(wp), a0));
            let s1 = vcvtq_f32_s32(quad_sums::<DOT>(vld1q_s8(wp.add(16)), a1));
            let dd = vdupq_n_f32(rows.d[r] * blk.d);
            lo[r] = vaddq_f32(lo[r], vmulq_f32(dd, s0));
            hi[r] = vaddq_f32(hi[r], vmulq_f32(dd, s1));
            if MIN {
                accm[r] += rows.m[r] * blk.s;
            }
        }
    }
    let mut out = [[0.0f32; ROWS]; 1];
    for r in 0..ROWS {
        let mut lanes = [0.0f32; 8];
        vst1q_f32(lanes.as_mut_ptr(), lo[r]);
        vst1q_f32(lanes.as_mut_ptr().add(4), hi[r]);
        out[0][r] = lane_tree(&lanes) + accm[r];
    }
    out
}

/// [`tile`] with `sdot`.
///
/// # Safety
/// As [`tile`]; the CPU has the dot-product extension.
#[target_feature(enable = "dotprod")]
unsafe fn tile_dot<const MIN: bool>(g: &[Rows32], acts: &[&[BlockQ8]; 1]) -> [[f32; ROWS]; 1] {
    tile::<MIN, true>(g, acts)
}

/// The matmul driver's worker for this path: selection indices `lo..hi`
/// (`row_of` maps them to matrix rows), `outs[t][i - lo]` receives token t.
/// `dot`: the CPU has the dot-product extension.
#[allow(clippy::too_many_arguments)]
pub(crate) fn worker(
    ty: GgmlType,
    data: &[u8],
    cols: usize,
    min: bool,
    dot: bool,
    row_of: impl Fn(usize) -> usize,
    lo: usize,
    hi: usize,
    acts: &[BlockQ8],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
) {
    let nb = cols / 32;
    let row_bytes = nb * ty.block_bytes();
    let fill =
        |rows: &[usize], group: &mut [Rows32]| Rows32::fill(ty, data, row_bytes, rows, group);
    // SAFETY (all four): `groups::run` hands the kernel `nb` blocks of rows
    // and of the token; `tile_dot` runs only when `dot` (as in ktile.rs).
    macro_rules! run {
        ($min:literal) => {
            if dot {
                crate::quant::groups::run(
                    Rows32::zero(),
                    nb,
                    &row_of,
                    lo,
                    hi,
                    acts,
                    n_tokens,
                    outs,
                    fill,
                    |g: &[Rows32], a: &[&[BlockQ8]; 1]| unsafe { tile_dot::<$min>(g, a) },
                )
            } else {
                crate::quant::groups::run(
                    Rows32::zero(),
                    nb,
                    &row_of,
                    lo,
                    hi,
                    acts,
                    n_tokens,
                    outs,
                    fill,
                    |g: &[Rows32], a: &[&[BlockQ8]; 1]| unsafe { tile::<$min, false>(g, a) },
                )
            }
        };
    }
    if min {
        run!(true)
    } else {
        run!(false)
    }
}
