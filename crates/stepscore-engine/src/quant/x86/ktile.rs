//! The prefill path of K-quant weights (Q4_K, Q5_K, Q6_K) x Q8_K
//! activations: weight rows unpacked once into groups of 16 rows whose
//! quants are interleaved 4 bytes per row, then multiplied by tiles of 8
//! tokens (`avx512::tile` with VNNI, `x86::tile_k_vnni` with AVX-VNNI, `x86::tile_k` on AVX2).
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

use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8K;
use crate::quant::blocks::scale_min_k4;
use crate::quant::fp::le_f16;

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

/// Little-endian words of `b` from byte `off` (`N` of them).
#[inline(always)]
fn words<const N: usize>(b: &[u8], off: usize) -> [u32; N] {
    let mut w = [0u32; N];
    for (x, c) in w.iter_mut().zip(b[off..off + 4 * N].chunks_exact(4)) {
        *x = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

const NIB: u32 = 0x0F0F_0F0F;

/// A super-block's quants as 64 words, word j = quants 4j..4j+4 (the values
/// `blocks::unpack_k` gives, Q6_K's without the -32), built from the packed
/// bytes in plain word loops that vectorize.
#[inline(always)]
fn quant_words(ty: GgmlType, b: &[u8]) -> [u32; 64] {
    let mut w = [0u32; 64];
    match ty {
        GgmlType::Q6K => {
            // ql low/high nibbles and 2 bits of qh per value (see unpack_k).
            let ql: [u32; 32] = words(b, 0);
            let qh: [u32; 16] = words(b, 128);
            for n in 0..2 {
                for m in 0..8 {
                    let (l0, l1, h) = (ql[16 * n + m], ql[16 * n + 8 + m], qh[8 * n + m]);
                    let e = 32 * n + m;
                    w[e] = (l0 & NIB) | ((h & 0x0303_0303) << 4);
                    w[e + 8] = (l1 & NIB) | (((h >> 2) & 0x0303_0303) << 4);
                    w[e + 16] = ((l0 >> 4) & NIB) | (((h >> 4) & 0x0303_0303) << 4);
                    w[e + 24] = ((l1 >> 4) & NIB) | (((h >> 6) & 0x0303_0303) << 4);
                }
            }
        }
        _ => {
            // Q4_K / Q5_K: 64-value chunk c holds the low nibbles of its 32
            // bytes, then the high ones; Q5_K's fifth bits are bits 2c, 2c+1 of qh.
            let q5 = ty == GgmlType::Q5K;
            let qs: [u32; 32] = words(b, if q5 { 48 } else { 16 });
            let qh: [u32; 8] = if q5 { words(b, 16) } else { [0; 8] };
            for c in 0..4 {
                for m in 0..8 {
                    let x = qs[8 * c + m];
                    let h = qh[m];
                    w[16 * c + m] = (x & NIB) | (((h >> (2 * c)) & 0x0101_0101) << 4);
                    w[16 * c + 8 + m] =
                        ((x >> 4) & NIB) | (((h >> (2 * c + 1)) & 0x0101_0101) << 4);
                }
            }
        }
    }
    w
}

/// [`fill`] compiled for the CPUs this path runs on (the crate's baseline
/// target has SSE2 only).
///
/// Safety: the CPU has AVX2 and AVX-512 F/BW.
#[target_feature(enable = "avx2,avx512f,avx512bw")]
unsafe fn fill_wide(
    ty: GgmlType,
    data: &[u8],
    row_bytes: usize,
    rows: &[usize],
    out: &mut [KRows],
) {
    fill(ty, data, row_bytes, rows, out)
}

/// [`fill`] for AVX2 CPUs. Safety: the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn fill_avx2(
    ty: GgmlType,
    data: &[u8],
    row_bytes: usize,
    rows: &[usize],
    out: &mut [KRows],
) {
    fill(ty, data, row_bytes, rows, out)
}

/// Row r's words into its lane of `q`: one 16-word scatter per 16 words on
/// AVX-512 (word-by-word stores of a vector just built stall on store
/// forwarding), plain stores elsewhere.
#[inline(always)]
fn put_words(q: &mut [[u8; 64]; 64], r: usize, w: &[u32; 64]) {
    #[cfg(target_arch = "x86_64")]
    if cfg!(target_feature = "avx512f") || is_x86_feature_detected!("avx512f") {
        use std::arch::x86_64::*;
        // Byte offsets of words j..j+16 within a column of q: 64 j.
        let idx = unsafe {
            _mm512_setr_epi32(
                0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960,
            )
        };
        for k in 0..4 {
            // SAFETY: AVX-512F is present; the 16 addresses are
            // q[16k + i][4r..4r + 4] for i < 16, all inside `q` (r < 16).
            unsafe {
                let v = _mm512_loadu_si512(w.as_ptr().add(16 * k) as *const _);
                let base = q.as_mut_ptr().add(16 * k) as *mut u8;
                _mm512_i32scatter_epi32::<1>(base.add(4 * r) as *mut _, idx, v);
            }
        }
        return;
    }
    for (dst, x) in q.iter_mut().zip(w) {
        dst[4 * r..4 * r + 4].copy_from_slice(&x.to_le_bytes());
    }
}

/// Unpacks `rows` (at most 16; missing rows are zero and give 0) into `nb`
/// super-blocks.
#[inline(always)]
fn fill(ty: GgmlType, data: &[u8], row_bytes: usize, rows: &[usize], out: &mut [KRows]) {
    let bb = ty.block_bytes();
    if rows.len() < ROWS {
        out.fill(ZERO_ROWS);
    }
    for (r, &row) in rows.iter().enumerate() {
        let src = &data[row * row_bytes..(row + 1) * row_bytes];
        for (g, b) in out.iter_mut().zip(src.chunks_exact(bb)) {
            put_words(&mut g.q, r, &quant_words(ty, b));
            if ty == GgmlType::Q6K {
                let sc = |k: usize| b[192 + k] as i8 as i32;
                for p in 0..8 {
                    g.sc[2 * p][r] = sc(2 * p);
                    g.sc[2 * p + 1][r] = sc(2 * p + 1);
                    g.mn[p][r] = ((32 * sc(2 * p)) & 0xFFFF) | ((32 * sc(2 * p + 1)) << 16);
                }
                g.d[r] = le_f16(b, 208);
                g.dmin[r] = 0.0;
            } else {
                for j in 0..8 {
                    let (sc, mn) = scale_min_k4(j, &b[4..16]);
                    g.sc[j][r] = sc as i32;
                    g.mn[j][r] = mn as i32 | ((mn as i32) << 16);
                }
                g.d[r] = le_f16(b, 0);
                g.dmin[r] = le_f16(b, 2);
            }
        }
    }
}

/// The matmul driver's worker for this path: selection indices `lo..hi`
/// (`row_of` maps them to matrix rows), `outs[t][i - lo]` receives token t.
/// Only for CPUs with AVX2 and FMA (`kernel` is `x86::tile_k`, `x86::tile_k_vnni` with AVX-VNNI, or
/// `avx512::tile` where AVX-512 F/BW/VNNI are there too).
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
    let wide = is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw");
    let fill = |rows: &[usize], group: &mut [KRows]| {
        // SAFETY: every kernel of this path needs AVX2 + FMA, which `fill_avx2`
        // needs; `fill_wide` runs only where AVX-512 F/BW are detected.
        unsafe {
            if wide {
                fill_wide(ty, data, row_bytes, rows, group)
            } else {
                fill_avx2(ty, data, row_bytes, rows, group)
            }
        }
    };
    // SAFETY: the caller chose `kernel` for features this CPU has; every
    // slice holds exactly `nb` super-blocks.
    let tile = |g: &[KRows], a: &[&[BlockQ8K]; TOKENS]| unsafe { kernel(ty, g, a) };
    crate::quant::groups::run(
        ZERO_ROWS, nb, row_of, lo, hi, acts, n_tokens, outs, fill, tile,
    );
}
