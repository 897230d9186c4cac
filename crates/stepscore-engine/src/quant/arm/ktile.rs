//! The K-quant path (Q2_K..Q6_K x Q8_K activations) on NEON: weight rows
//! unpacked once into groups of 4 rows (int8 quants, their 16-element
//! groups' scales and mins beside them), then multiplied by tiles of `T`
//! tokens (`groups.rs`, the loop the x86 and wasm tiles share).
//!
//! Per 16-element group, row and token: `quad_sums` (one `sdot`, or two
//! `smull` and pairwise adds) gives four partial sums, and one
//! multiply-accumulate by the group's scale adds them to the row's i32 sum:
//! a super-block's `sum_g sc[g] * isum_g`, exact in i32 (|q| <= 32,
//! |a| <= 127 and |sc| <= 128 bound it by 256 x 32 x 127 x 128 < 2^31).
//! A tile of 4 rows x `T` tokens keeps 4 weight vectors,
//! `T` activation vectors and `4 T` sums in registers.
//!
//! Results equal the portable kernels' bit for bit: the integer sums are
//! the same integers, and each output's float steps are the portable ones,
//! `acc += (d * d_a) * isum` then `acc -= (dmin * d_a) * summ`, per
//! super-block in order, run lane-wise over the 4 rows.

use core::arch::aarch64::*;

use super::{quad_sums, row_sums};
use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8K;
use crate::quant::blocks::{unpack_k, KBlock};

/// Rows per group: one per i32 lane of a sum vector.
const ROWS: usize = 4;

/// One super-block of 4 weight rows.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Rows16 {
    q: [[i8; 256]; ROWS],
    /// `sc[r][g]`: row r's scale of group g.
    sc: [[i32; 16]; ROWS],
    /// `mn[r][g]`: row r's min of group g (zero for Q3_K, Q6_K).
    mn: [[i16; 16]; ROWS],
    d: [f32; ROWS],
    dmin: [f32; ROWS],
}

const ZERO_ROWS: Rows16 = Rows16 {
    q: [[0; 256]; ROWS],
    sc: [[0; 16]; ROWS],
    mn: [[0; 16]; ROWS],
    d: [0.0; ROWS],
    dmin: [0.0; ROWS],
};

/// Unpacks `rows` (at most 4; missing rows are zero and give 0) into `nb`
/// super-blocks.
fn fill(ty: GgmlType, data: &[u8], row_bytes: usize, rows: &[usize], out: &mut [Rows16]) {
    let bb = ty.block_bytes();
    if rows.len() < ROWS {
        out.fill(ZERO_ROWS);
    }
    let mut kb = KBlock::new();
    for (r, &row) in rows.iter().enumerate() {
        let src = &data[row * row_bytes..(row + 1) * row_bytes];
        for (g, b) in out.iter_mut().zip(src.chunks_exact(bb)) {
            unpack_k(ty, b, &mut kb);
            g.q[r] = kb.q;
            g.sc[r] = kb.sc.map(i32::from);
            g.mn[r] = kb.mn;
            g.d[r] = kb.d;
            g.dmin[r] = kb.dmin;
        }
    }
}

/// `out[t][r]` = row r of the group . token t, over all super-blocks.
///
/// # Safety
/// Every slice holds the same number of super-blocks (`groups::run` and
/// `worker` slice them so); with `DOT`, as `quad_sums`.
#[inline(always)]
unsafe fn tile<const T: usize, const MIN: bool, const DOT: bool>(
    g: &[Rows16],
    acts: &[&[BlockQ8K]; T],
) -> [[f32; ROWS]; T] {
    debug_assert!(acts.iter().all(|a| a.len() == g.len()));
    let mut acc = [vdupq_n_f32(0.0); T];
    for (b, rows) in g.iter().enumerate() {
        let mut s = [[vdupq_n_s32(0); ROWS]; T];
        let ap: [*const i8; T] = std::array::from_fn(|t| acts[t].get_unchecked(b).qs.as_ptr());
        for k in 0..16 {
            let w: [int8x16_t; ROWS] =
                std::array::from_fn(|r| vld1q_s8(rows.q[r].as_ptr().add(16 * k)));
            for t in 0..T {
                let a = vld1q_s8(ap[t].add(16 * k));
                for r in 0..ROWS {
                    let p = quad_sums::<DOT>(w[r], a);
                    s[t][r] = vmlaq_n_s32(s[t][r], p, rows.sc[r][k]);
                }
            }
        }
        let d = vld1q_f32(rows.d.as_ptr());
        let dmin = vld1q_f32(rows.dmin.as_ptr());
        for t in 0..T {
            let blk = acts[t].get_unchecked(b);
            let da = vdupq_n_f32(blk.d);
            let isum = vcvtq_f32_s32(row_sums(&s[t]));
            acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_f32(d, da), isum));
            if MIN {
                let (b0, b1) = (
                    vld1q_s16(blk.bsums.as_ptr()),
                    vld1q_s16(blk.bsums.as_ptr().add(8)),
                );
                let m: [int32x4_t; ROWS] = std::array::from_fn(|r| {
                    let (m0, m1) = (
                        vld1q_s16(rows.mn[r].as_ptr()),
                        vld1q_s16(rows.mn[r].as_ptr().add(8)),
                    );
                    let lo = vmlal_s16(
                        vmull_s16(vget_low_s16(m0), vget_low_s16(b0)),
                        vget_low_s16(m1),
                        vget_low_s16(b1),
                    );
                    vmlal_high_s16(vmlal_high_s16(lo, m0, b0), m1, b1)
                });
                let summ = vcvtq_f32_s32(row_sums(&m));
                acc[t] = vsubq_f32(acc[t], vmulq_f32(vmulq_f32(dmin, da), summ));
            }
        }
    }
    let mut out = [[0.0f32; ROWS]; T];
    for t in 0..T {
        vst1q_f32(out[t].as_mut_ptr(), acc[t]);
    }
    out
}

/// [`tile`] with `sdot`.
///
/// # Safety
/// As [`tile`]; the CPU has the dot-product extension.
#[target_feature(enable = "dotprod")]
unsafe fn tile_dot<const T: usize, const MIN: bool>(
    g: &[Rows16],
    acts: &[&[BlockQ8K]; T],
) -> [[f32; ROWS]; T] {
    tile::<T, MIN, true>(g, acts)
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
    acts: &[BlockQ8K],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
) {
    let nb = cols / 256;
    let row_bytes = nb * ty.block_bytes();
    let fill = |rows: &[usize], group: &mut [Rows16]| fill(ty, data, row_bytes, rows, group);
    // SAFETY (all eight): `groups::run` hands the kernel `nb` super-blocks
    // of rows and of every token; `tile_dot` runs only when `dot` (the
    // driver's `Simd::NeonDot`, which detection grants only with the
    // extension).
    macro_rules! run {
        ($t:literal, $min:literal) => {
            if dot {
                crate::quant::groups::run(
                    ZERO_ROWS,
                    nb,
                    &row_of,
                    lo,
                    hi,
                    acts,
                    n_tokens,
                    outs,
                    fill,
                    |g: &[Rows16], a: &[&[BlockQ8K]; $t]| unsafe { tile_dot::<$t, $min>(g, a) },
                )
            } else {
                crate::quant::groups::run(
                    ZERO_ROWS,
                    nb,
                    &row_of,
                    lo,
                    hi,
                    acts,
                    n_tokens,
                    outs,
                    fill,
                    |g: &[Rows16], a: &[&[BlockQ8K]; $t]| unsafe { tile::<$t, $min, false>(g, a) },
                )
            }
        };
    }
    // One token (a decode step) gets tiles of one: a wider tile would repeat it.
    match (n_tokens == 1, min) {
        (true, true) => run!(1, true),
        (true, false) => run!(1, false),
        (false, true) => run!(2, true),
        (false, false) => run!(2, false),
    }
}
