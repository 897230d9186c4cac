//! The K-quant path (Q2_K..Q6_K x Q8_K activations) on wasm SIMD128: weight
//! rows unpacked once into groups of 4 rows whose quants are stored as i16
//! already multiplied by their group's scale, then multiplied by tiles of
//! `T` tokens (`groups.rs`, the loop the x86 tiles share).
//!
//! Why this layout: SIMD128's one widening multiply-add is
//! `i32x4.dot_i16x8_s` (x86 `pmaddwd`, 8 products per instruction); its
//! int8 multiplies (`extmul`) cost several instructions each in V8's code.
//! With `q * sc` stored (|q * sc| <= 32 * 128 for Q6_K) and each token's 8
//! activation bytes sign-extended by one `load8x8`, a super-block's whole
//! integer sum `sum_g sc[g] * isum_g` is one run of dot + add per 8 columns,
//! exact in i32 (|sum| <= 256 * 4096 * 128 < 2^31), with no per-group scale
//! step. A tile of 4 rows x `T` tokens keeps 4 weight vectors, `T`
//! activation vectors and `4 T` sums in registers.
//!
//! Results equal the portable kernels' bit for bit: the integer sums are the
//! same integers, and each output's float steps are the portable ones,
//! `acc += (d * d_a) * isum` then `acc -= (dmin * d_a) * summ`, per
//! super-block in order, run lane-wise over the 4 rows (wasm has no fused
//! multiply-add, so none is used).

use core::arch::wasm32::*;

use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8K;
use crate::quant::blocks::{unpack_k, KBlock};

/// Rows per group: one per i32 lane of a sum vector.
const ROWS: usize = 4;

/// One super-block of 4 weight rows.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Rows16 {
    /// `q[r][i]` = row r's quant i times its 16-element group's scale.
    q: [[i16; 256]; ROWS],
    /// `mn[r][g]`: row r's min of group g (zero for Q3_K, Q6_K).
    mn: [[i16; 16]; ROWS],
    d: [f32; ROWS],
    dmin: [f32; ROWS],
}

const ZERO_ROWS: Rows16 = Rows16 {
    q: [[0; 256]; ROWS],
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
            for ((dst, q), &sc) in g.q[r]
                .chunks_exact_mut(16)
                .zip(kb.q.chunks_exact(16))
                .zip(&kb.sc)
            {
                for (d, &v) in dst.iter_mut().zip(q) {
                    *d = v as i16 * sc;
                }
            }
            g.mn[r] = kb.mn;
            g.d[r] = kb.d;
            g.dmin[r] = kb.dmin;
        }
    }
}

/// Lane r = the sum of `s[r]`'s four lanes.
#[inline(always)]
fn row_sums(s: &[v128; ROWS]) -> v128 {
    let v01 = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(s[0], s[1]),
        i32x4_shuffle::<2, 6, 3, 7>(s[0], s[1]),
    );
    let v23 = i32x4_add(
        i32x4_shuffle::<0, 4, 1, 5>(s[2], s[3]),
        i32x4_shuffle::<2, 6, 3, 7>(s[2], s[3]),
    );
    i32x4_add(
        i32x4_shuffle::<0, 1, 4, 5>(v01, v23),
        i32x4_shuffle::<2, 3, 6, 7>(v01, v23),
    )
}

/// `out[t][r]` = row r of the group . token t, over all super-blocks.
///
/// # Safety
/// Every slice holds the same number of super-blocks (`groups::run` and
/// `worker` slice them so).
#[inline(always)]
unsafe fn tile<const T: usize, const MIN: bool>(
    g: &[Rows16],
    acts: &[&[BlockQ8K]; T],
) -> [[f32; ROWS]; T] {
    debug_assert!(acts.iter().all(|a| a.len() == g.len()));
    let mut acc = [f32x4_splat(0.0); T];
    for (b, rows) in g.iter().enumerate() {
        let mut s = [[i32x4_splat(0); ROWS]; T];
        let wp: [*const i16; ROWS] = std::array::from_fn(|r| rows.q[r].as_ptr());
        let ap: [*const i8; T] = std::array::from_fn(|t| acts[t].get_unchecked(b).qs.as_ptr());
        for k in 0..32 {
            let w: [v128; ROWS] =
                std::array::from_fn(|r| v128_load(wp[r].add(8 * k) as *const v128));
            for t in 0..T {
                let a = i16x8_load_extend_i8x8(ap[t].add(8 * k));
                for r in 0..ROWS {
                    s[t][r] = i32x4_add(s[t][r], i32x4_dot_i16x8(w[r], a));
                }
            }
        }
        let d = v128_load(rows.d.as_ptr() as *const v128);
        let dmin = v128_load(rows.dmin.as_ptr() as *const v128);
        for t in 0..T {
            let blk = acts[t].get_unchecked(b);
            let da = f32x4_splat(blk.d);
            let isum = f32x4_convert_i32x4(row_sums(&s[t]));
            acc[t] = f32x4_add(acc[t], f32x4_mul(f32x4_mul(d, da), isum));
            if MIN {
                let bs = blk.bsums.as_ptr() as *const v128;
                let (b0, b1) = (v128_load(bs), v128_load(bs.add(1)));
                let m: [v128; ROWS] = std::array::from_fn(|r| {
                    let mp = rows.mn[r].as_ptr() as *const v128;
                    i32x4_add(
                        i32x4_dot_i16x8(v128_load(mp), b0),
                        i32x4_dot_i16x8(v128_load(mp.add(1)), b1),
                    )
                });
                let summ = f32x4_convert_i32x4(row_sums(&m));
                acc[t] = f32x4_sub(acc[t], f32x4_mul(f32x4_mul(dmin, da), summ));
            }
        }
    }
    let mut out = [[0.0f32; ROWS]; T];
    for t in 0..T {
        v128_store(out[t].as_mut_ptr() as *mut v128, acc[t]);
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
    acts: &[BlockQ8K],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
) {
    let nb = cols / 256;
    let row_bytes = nb * ty.block_bytes();
    let fill = |rows: &[usize], group: &mut [Rows16]| fill(ty, data, row_bytes, rows, group);
    // SAFETY (all four): `groups::run` hands the kernel `nb` super-blocks of
    // rows and of every token.
    macro_rules! run {
        ($t:literal, $min:literal) => {
            crate::quant::groups::run(
                ZERO_ROWS,
                nb,
                row_of,
                lo,
                hi,
                acts,
                n_tokens,
                outs,
                fill,
                |g: &[Rows16], a: &[&[BlockQ8K]; $t]| unsafe { tile::<$t, $min>(g, a) },
            )
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
