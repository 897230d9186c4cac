//! The 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) x Q8_0/Q8_1
//! activations on wasm SIMD128: weight rows unpacked once into groups of
//! `ROWS` rows of i16 quants, then multiplied one token at a time
//! (`groups.rs`, the loop every tile path shares).
//!
//! Why this layout: the shared float order (`portable::dot32`) keeps eight
//! f32 lanes per row and token, lane l taking the block's elements
//! 4l..4l+3. With the quants already i16 and each token's 8 activation
//! bytes sign-extended by one `load8x8`, `i32x4_dot_i16x8` (x86 `pmaddwd`)
//! gives the pair sums of 8 elements, and two `i32x4` shuffles plus an add
//! turn the pair sums of 16 elements into their four 4-element sums: the
//! lanes' integer sums with no int8 multiply, which SIMD128 has no single
//! instruction for. A token's 4 activation vectors stay in registers
//! across the group's rows.
//!
//! Results equal the portable kernels' bit for bit: integer sums are exact,
//! each lane's `acc += (d_w * d_a) * isum` is the portable one, the `m * s`
//! term has its own accumulator, and the final reduction is `lane_tree`.

use core::arch::wasm32::*;

use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8;
use crate::quant::portable::lane_tree;

/// Rows per group.
const ROWS: usize = 2;

/// One 32-element block of `ROWS` weight rows (`groups::Rows32`).
type Rows32 = crate::quant::groups::Rows32<i16, ROWS>;

/// Lane l = p0's lanes 2l and 2l + 1 added (l < 2), then p1's: the
/// 4-element sums of 16 elements from their 2-element sums.
#[inline(always)]
fn quads(p0: v128, p1: v128) -> v128 {
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(p0, p1),
        i32x4_shuffle::<1, 3, 5, 7>(p0, p1),
    )
}

/// `out[0][r]` = row r of the group . the token, over all blocks.
///
/// # Safety
/// Every slice holds the same number of blocks (`groups::run` and `worker`
/// slice them so).
#[inline(always)]
unsafe fn tile<const MIN: bool>(g: &[Rows32], acts: &[&[BlockQ8]; 1]) -> [[f32; ROWS]; 1] {
    debug_assert!(acts[0].len() == g.len());
    let mut lo = [f32x4_splat(0.0); ROWS];
    let mut hi = [f32x4_splat(0.0); ROWS];
    let mut accm = [0.0f32; ROWS];
    for (rows, blk) in g.iter().zip(acts[0]) {
        let ap = blk.qs.as_ptr();
        let a: [v128; 4] = std::array::from_fn(|i| i16x8_load_extend_i8x8(ap.add(8 * i)));
        for r in 0..ROWS {
            let wp = rows.q[r].as_ptr() as *const v128;
            let p: [v128; 4] = std::array::from_fn(|i| i32x4_dot_i16x8(v128_load(wp.add(i)), a[i]));
            let dd = f32x4_splat(rows.d[r] * blk.d);
            let s0 = f32x4_convert_i32x4(quads(p[0], p[1]));
            let s1 = f32x4_convert_i32x4(quads(p[2], p[3]));
            lo[r] = f32x4_add(lo[r], f32x4_mul(dd, s0));
            hi[r] = f32x4_add(hi[r], f32x4_mul(dd, s1));
            if MIN {
                accm[r] += rows.m[r] * blk.s;
            }
        }
    }
    let mut out = [[0.0f32; ROWS]; 1];
    for r in 0..ROWS {
        let mut lanes = [0.0f32; 8];
        v128_store(lanes.as_mut_ptr() as *mut v128, lo[r]);
        v128_store(lanes.as_mut_ptr().add(4) as *mut v128, hi[r]);
        out[0][r] = lane_tree(&lanes) + accm[r];
    }
    out
}

/// The matmul driver's worker for this path: selection indices `lo..hi`
/// (`row_of` maps them to matrix rows), `outs[t][i - lo]` receives token t.
#[allow(clippy::too_many_arguments)]
pub(crate) fn worker(
    ty: GgmlType,
    data: &[u8],
    cols: usize,
    min: bool,
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
    // SAFETY (both): `groups::run` hands the kernel `nb` blocks of rows and
    // of the token.
    macro_rules! run {
        ($min:literal) => {
            crate::quant::groups::run(
                Rows32::zero(),
                nb,
                row_of,
                lo,
                hi,
                acts,
                n_tokens,
                outs,
                fill,
                |g: &[Rows32], a: &[&[BlockQ8]; 1]| unsafe { tile::<$min>(g, a) },
            )
        };
    }
    if min {
        run!(true)
    } else {
        run!(false)
    }
}
