//! The prefill path of K-quant weights (Q4_K, Q5_K, Q6_K) x Q8_K
//! activations: weight rows unpacked once into groups of 16 rows whose
//! quants are interleaved 4 bytes per row, then multiplied by tiles of 8
//! tokens.
//!
//! Why this layout: with one row per 32-bit lane, a u8 x i8 dot of 4 bytes
//! (`dpbusd`) against 4 broadcast activation bytes adds into 16 rows' sums
//! at once, so no sum needs a horizontal reduction, and a scale is applied
//! once per row and group, lane-wise. The quants are unsigned (Q6_K's
//! offset of -32 moves into an integer correction over the bsums), and a
//! group of rows stays in L2 while every token tile passes over it.
//!
//! Results equal the portable kernels' bit for bit: every integer sum of a
//! super-block is exact, and each output's f32 accumulation is the portable
//! one, `acc += (d * d_a) * isum` then `acc -= (dmin * d_a) * summ`, per
//! super-block in order.

use super::act::BlockQ8K;
use super::blocks::scale_min_k4;
use super::fp::le_f16;
use crate::ggml::GgmlType;

/// Rows per group: one per 32-bit lane of a 512-bit register.
pub(crate) const ROWS: usize = 16;
/// Tokens per kernel call.
pub(crate) const TOKENS: usize = 8;

/// One super-block of 16 weight rows.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct KRows {
    /// `q[j][4 r + i]` = row r's quant 4 j + i, unsigned: Q4_K 0..=15,
    /// Q5_K 0..=31, Q6_K q + 32 in 0..=63.
    pub q: [[u8; 64]; 64],
    /// `sc[g][r]`: row r's scale of group g (16 quants for Q6_K, 32 for
    /// Q4_K/Q5_K, which use only the first 8 groups).
    pub sc: [[i32; 16]; 16],
    /// `mn[p][r]`: row r's mins of 16-quant groups 2p and 2p + 1 as an i16
    /// pair. Q4_K/Q5_K: a float term with `dmin`; Q6_K: 32 * scale, the
    /// integer correction for the offset.
    pub mn: [[i32; 16]; 8],
    pub d: [f32; 16],
    pub dmin: [f32; 16],
}

const ZERO_ROWS: KRows = KRows {
    q: [[0; 64]; 64],
    sc: [[0; 16]; 16],
    mn: [[0; 16]; 8],
    d: [0.0; 16],
    dmin: [0.0; 16],
};

/// Whether `ty` has this path (Q2_K/Q3_K keep the per-row kernels).
pub(crate) fn has_tiles(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K)
}

/// `out[t][r]` = row r of the group . token t, over all super-blocks.
pub(crate) type TileKernel =
    unsafe fn(GgmlType, &[KRows], &[&[BlockQ8K]; TOKENS]) -> [[f32; ROWS]; TOKENS];

/// Unpacks `rows` (at most 16; missing rows are zero and give 0) into `nb`
/// super-blocks. Quants are built 4 at a time as little-endian words from
/// the packed bytes (the same values `blocks::unpack_k` gives, Q6_K's
/// without the -32).
fn fill(ty: GgmlType, data: &[u8], row_bytes: usize, rows: &[usize], out: &mut [KRows]) {
    let bb = ty.block_bytes();
    if rows.len() < ROWS {
        out.fill(ZERO_ROWS);
    }
    let word = |b: &[u8], i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    const NIB: u32 = 0x0F0F_0F0F;
    for (r, &row) in rows.iter().enumerate() {
        let src = &data[row * row_bytes..(row + 1) * row_bytes];
        for (g, b) in out.iter_mut().zip(src.chunks_exact(bb)) {
            let mut put = |e: usize, w: u32| {
                g.q[e / 4][4 * r..4 * r + 4].copy_from_slice(&w.to_le_bytes());
            };
            match ty {
                GgmlType::Q6K => {
                    // ql low/high nibbles and 2 bits of qh per value (see unpack_k).
                    let (ql, qh) = (&b[0..128], &b[128..192]);
                    for n in 0..2 {
                        for m in (0..32).step_by(4) {
                            let l0 = word(ql, 64 * n + m);
                            let l1 = word(ql, 64 * n + 32 + m);
                            let h = word(qh, 32 * n + m);
                            let e = 128 * n + m;
                            put(e, (l0 & NIB) | ((h & 0x0303_0303) << 4));
                            put(e + 32, (l1 & NIB) | (((h >> 2) & 0x0303_0303) << 4));
                            put(e + 64, ((l0 >> 4) & NIB) | (((h >> 4) & 0x0303_0303) << 4));
                            put(e + 96, ((l1 >> 4) & NIB) | (((h >> 6) & 0x0303_0303) << 4));
                        }
                    }
                    let sc = |k: usize| b[192 + k] as i8 as i32;
                    for p in 0..8 {
                        g.sc[2 * p][r] = sc(2 * p);
                        g.sc[2 * p + 1][r] = sc(2 * p + 1);
                        g.mn[p][r] = ((32 * sc(2 * p)) & 0xFFFF) | ((32 * sc(2 * p + 1)) << 16);
                    }
                    g.d[r] = le_f16(b, 208);
                    g.dmin[r] = 0.0;
                }
                _ => {
                    // Q4_K / Q5_K: 64-value chunk c holds low nibbles of qs[32c..]
                    // then high nibbles; Q5_K's fifth bits are bits 2c, 2c+1 of qh.
                    let q5 = ty == GgmlType::Q5K;
                    let qs = if q5 { &b[48..176] } else { &b[16..144] };
                    for c in 0..4 {
                        for m in (0..32).step_by(4) {
                            let w = word(qs, 32 * c + m);
                            let (mut lo, mut hi) = (w & NIB, (w >> 4) & NIB);
                            if q5 {
                                let h = word(&b[16..48], m);
                                lo |= ((h >> (2 * c)) & 0x0101_0101) << 4;
                                hi |= ((h >> (2 * c + 1)) & 0x0101_0101) << 4;
                            }
                            put(64 * c + m, lo);
                            put(64 * c + 32 + m, hi);
                        }
                    }
                    for j in 0..8 {
                        let (sc, mn) = scale_min_k4(j, &b[4..16]);
                        g.sc[j][r] = sc as i32;
                        let mn = mn as i32;
                        g.mn[j][r] = mn | (mn << 16);
                    }
                    g.d[r] = le_f16(b, 0);
                    g.dmin[r] = le_f16(b, 2);
                }
            }
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
    let mut group = vec![ZERO_ROWS; nb];
    let mut rows = Vec::with_capacity(ROWS);
    let mut r0 = lo;
    while r0 < hi {
        let r1 = (r0 + ROWS).min(hi);
        rows.clear();
        rows.extend((r0..r1).map(&row_of));
        fill(ty, data, row_bytes, &rows, &mut group);
        let mut t0 = 0;
        while t0 < n_tokens {
            // A short last tile repeats its last token; those lanes are dropped.
            let a: [&[BlockQ8K]; TOKENS] = std::array::from_fn(|k| {
                let t = (t0 + k).min(n_tokens - 1);
                &acts[t * nb..(t + 1) * nb]
            });
            // SAFETY: the caller chose `kernel` for features this CPU has;
            // every slice holds exactly `nb` super-blocks.
            let res = unsafe { kernel(ty, &group, &a) };
            for (t, row) in res.iter().enumerate().take(n_tokens - t0) {
                outs[t0 + t][r0 - lo..r1 - lo].copy_from_slice(&row[..r1 - r0]);
            }
            t0 += TOKENS;
        }
        r0 = r1;
    }
}
