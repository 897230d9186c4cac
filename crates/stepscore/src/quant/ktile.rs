//! The prefill path of K-quant weights (Q4_K, Q5_K, Q6_K) x Q8_K
//! activations: weight rows unpacked once into groups of 4 rows, then
//! multiplied by tiles of 4 tokens, 16 outputs per kernel call.
//!
//! Why a separate layout: the per-row kernels re-read each row's scales
//! for every token and stream the whole activation matrix once per row
//! chunk (for ffn_down, once per row). Here a group's quants are unsigned
//! (Q6_K's offset of -32 moves into an integer correction), so the kernel
//! multiplies u8 x i8 without sign tricks, and a panel of rows stays in L2
//! while every token tile passes over it.
//!
//! Results equal the portable kernels' bit for bit: every integer sum of a
//! super-block is exact, and each output's f32 accumulation is the portable
//! one, `acc += (d * d_a) * isum` then `acc -= (dmin * d_a) * summ`, per
//! super-block in order.

use super::act::BlockQ8K;
use super::blocks::{unpack_k, KBlock};
use crate::ggml::GgmlType;

/// One super-block of 4 weight rows.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct KGroup {
    /// Unsigned quants: Q4_K 0..=15, Q5_K 0..=31, Q6_K q + 32 in 0..=63.
    pub q: [[u8; 256]; 4],
    /// Scale of each 16-value group.
    pub sc: [[i16; 16]; 4],
    /// Q4_K/Q5_K: the mins (a float term with `dmin`); Q6_K: 32 * sc, the
    /// integer correction for the offset (same factor `d` as the main sum).
    pub mn: [[i16; 16]; 4],
    pub d: [f32; 4],
    pub dmin: [f32; 4],
}

const ZERO_GROUP: KGroup = KGroup {
    q: [[0; 256]; 4],
    sc: [[0; 16]; 4],
    mn: [[0; 16]; 4],
    d: [0.0; 4],
    dmin: [0.0; 4],
};

/// Whether `ty` has this path (Q2_K/Q3_K keep the per-row kernels).
pub(crate) fn has_tiles(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K)
}

/// The 16 outputs `[r * 4 + t]` of 4 rows x 4 tokens over `nb` super-blocks.
pub(crate) type TileKernel = unsafe fn(&[KGroup], &[&[BlockQ8K]; 4], bool) -> [f32; 16];

/// Rows per panel: the unpacked panel (~1.3 bytes per weight) stays in L2
/// while every token tile passes over it.
const PANEL_ROWS: usize = 16;

/// Unpacks `rows` (at most 4; missing rows are zero and give 0) into `nb`
/// groups.
fn fill(ty: GgmlType, data: &[u8], row_bytes: usize, rows: &[usize], out: &mut [KGroup]) {
    let bb = ty.block_bytes();
    let mut kb = KBlock::new();
    out.fill(ZERO_GROUP);
    for (i, &r) in rows.iter().enumerate() {
        let row = &data[r * row_bytes..(r + 1) * row_bytes];
        for (g, blk) in out.iter_mut().zip(row.chunks_exact(bb)) {
            unpack_k(ty, blk, &mut kb);
            let off: i8 = if ty == GgmlType::Q6K { 32 } else { 0 };
            for (u, &q) in g.q[i].iter_mut().zip(&kb.q) {
                *u = q.wrapping_add(off) as u8;
            }
            g.sc[i] = kb.sc;
            g.mn[i] = if ty == GgmlType::Q6K {
                kb.sc.map(|s| 32 * s)
            } else {
                kb.mn
            };
            g.d[i] = kb.d;
            g.dmin[i] = kb.dmin;
        }
    }
}

/// The matmul driver's worker for this path: selection indices `lo..hi`
/// (`row_of` maps them to matrix rows), `outs[t][i - lo]` receives token t.
#[allow(clippy::too_many_arguments)]
pub(crate) fn worker(
    ty: GgmlType,
    data: &[u8],
    cols: usize,
    row_of: impl Fn(usize) -> usize,
    lo: usize,
    hi: usize,
    acts: &[BlockQ8K],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
    kernel: TileKernel,
) {
    let nb = cols / 256;
    let row_bytes = nb * ty.block_bytes();
    let int_min = ty == GgmlType::Q6K;
    let n_groups = PANEL_ROWS / 4;
    let mut panel = vec![ZERO_GROUP; n_groups * nb];
    let mut p0 = lo;
    while p0 < hi {
        let p1 = (p0 + PANEL_ROWS).min(hi);
        let groups = (p1 - p0).div_ceil(4);
        for (g, dst) in panel.chunks_exact_mut(nb).take(groups).enumerate() {
            let g0 = p0 + 4 * g;
            let rows: Vec<usize> = (g0..(g0 + 4).min(p1)).map(&row_of).collect();
            fill(ty, data, row_bytes, &rows, dst);
        }
        let mut t0 = 0;
        while t0 < n_tokens {
            // A short last tile repeats its last token; those lanes are dropped.
            let tok: [usize; 4] = std::array::from_fn(|k| (t0 + k).min(n_tokens - 1));
            let a: [&[BlockQ8K]; 4] = tok.map(|t| &acts[t * nb..(t + 1) * nb]);
            for g in 0..groups {
                let grp = &panel[g * nb..(g + 1) * nb];
                // SAFETY: the caller chose `kernel` for features this CPU has;
                // every slice holds exactly `nb` super-blocks.
                let res = unsafe { kernel(grp, &a, int_min) };
                let r0 = p0 + 4 * g;
                for r in 0..4.min(p1 - r0) {
                    for t in 0..4.min(n_tokens - t0) {
                        outs[t0 + t][r0 - lo + r] = res[r * 4 + t];
                    }
                }
            }
            t0 += 4;
        }
        p0 = p1;
    }
}
