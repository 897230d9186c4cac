//! AVX-512 (BW + VNNI) kernel of the K-quant tiles in `ktile.rs`: 4 weight
//! rows x 4 tokens, 16 integer accumulators in zmm registers.
//!
//! Per 64 quants: `maddubs` (u8 x i8 -> pairwise i16; no saturation, since
//! 2 * 63 * 128 < 2^15) then `dpwssd` with the 16-value group's scale
//! (i16 x i16 pairs added into i32). A super-block's 16 sums, and its 16
//! mins sums (`madd` of i16 mins and the activations' bsums), are reduced
//! exactly to one i32 per output by transposing adds; the f32 steps are
//! the portable kernel's, lane by lane, so results match it bit for bit.
//!
//! Safety: callers check [`super::Simd::Avx512`] is available and pass
//! group and token slices of the same length.

use std::arch::x86_64::*;

use super::act::BlockQ8K;
use super::ktile::KGroup;

/// i16 lane j of the scale vector of 64-quant chunk k: group 4k + j / 8.
static SCALE_IDX: [[i16; 32]; 4] = {
    let mut t = [[0i16; 32]; 4];
    let mut k = 0;
    while k < 4 {
        let mut j = 0;
        while j < 32 {
            t[k][j] = (4 * k + j / 8) as i16;
            j += 1;
        }
        k += 1;
    }
    t
};

/// Output lane r * 4 + t takes row r's factor: lane i -> i / 4.
static ROW_IDX: [i32; 16] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3];

/// [x0+x2, y0+y2, x1+x3, y1+y3] per 128-bit lane.
#[inline(always)]
unsafe fn pair32(x: __m512i, y: __m512i) -> __m512i {
    _mm512_add_epi32(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y))
}

/// Two `pair32` results (sources x,y and z,w) -> each 128-bit lane holds
/// the four sources' sums over that lane.
#[inline(always)]
unsafe fn pair64(x: __m512i, y: __m512i) -> __m512i {
    _mm512_add_epi32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y))
}

/// 128-bit lanes [x.0+x.1, x.2+x.3, y.0+y.1, y.2+y.3].
#[inline(always)]
unsafe fn pair128(x: __m512i, y: __m512i) -> __m512i {
    let a = _mm512_shuffle_i32x4::<0b10_00_10_00>(x, y);
    let b = _mm512_shuffle_i32x4::<0b11_01_11_01>(x, y);
    _mm512_add_epi32(a, b)
}

/// Lane i = the sum of all 16 lanes of v[i].
#[inline(always)]
unsafe fn reduce16(v: &[__m512i; 16]) -> __m512i {
    let l1: [__m512i; 8] = std::array::from_fn(|j| pair32(v[2 * j], v[2 * j + 1]));
    let l2: [__m512i; 4] = std::array::from_fn(|j| pair64(l1[2 * j], l1[2 * j + 1]));
    pair128(pair128(l2[0], l2[1]), pair128(l2[2], l2[3]))
}

/// Eight vectors of two 8-lane halves: lane 8j + 4h + k = the sum of half h
/// of v[4j + k].
#[inline(always)]
unsafe fn reduce8x2(v: &[__m512i; 8]) -> __m512i {
    let l1: [__m512i; 4] = std::array::from_fn(|j| pair32(v[2 * j], v[2 * j + 1]));
    pair128(pair64(l1[0], l1[1]), pair64(l1[2], l1[3]))
}

/// `out[r * 4 + t]` = row r of `g` . token t of `a`, over all super-blocks.
/// `int_min`: subtract the mins sum from the integer sum (Q6_K's offset)
/// instead of as a `dmin` term (Q4_K, Q5_K).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn tile_4x4(g: &[KGroup], a: &[&[BlockQ8K]; 4], int_min: bool) -> [f32; 16] {
    debug_assert!(a.iter().all(|t| t.len() == g.len()));
    let idx: [__m512i; 4] =
        std::array::from_fn(|k| _mm512_loadu_si512(SCALE_IDX[k].as_ptr() as *const _));
    let row_idx = _mm512_loadu_si512(ROW_IDX.as_ptr() as *const _);
    let mut acc = _mm512_setzero_ps();
    for (b, kg) in g.iter().enumerate() {
        let blk: [&BlockQ8K; 4] = std::array::from_fn(|t| a[t].get_unchecked(b));
        let mut sums = [_mm512_setzero_si512(); 16];
        for k in 0..4 {
            let w: [__m512i; 4] = std::array::from_fn(|r| {
                _mm512_loadu_si512(kg.q[r].as_ptr().add(64 * k) as *const _)
            });
            // Only the low 16 i16 lanes are indexed, so the upper half is free.
            let s: [__m512i; 4] = std::array::from_fn(|r| {
                let sc = _mm256_loadu_si256(kg.sc[r].as_ptr() as *const __m256i);
                _mm512_permutexvar_epi16(idx[k], _mm512_castsi256_si512(sc))
            });
            for t in 0..4 {
                let x = _mm512_loadu_si512(blk[t].qs.as_ptr().add(64 * k) as *const _);
                for r in 0..4 {
                    let p = _mm512_maddubs_epi16(w[r], x);
                    sums[r * 4 + t] = _mm512_dpwssd_epi32(sums[r * 4 + t], p, s[r]);
                }
            }
        }
        let isum = reduce16(&sums);
        // Mins: vector 4j + t pairs rows 2j (low half) and 2j + 1 (high half)
        // with token t, so `reduce8x2` lands (r, t) in lane r * 4 + t.
        let mn: [__m512i; 2] =
            std::array::from_fn(|j| _mm512_loadu_si512(kg.mn[2 * j].as_ptr() as *const _));
        let bs: [__m512i; 4] = std::array::from_fn(|t| {
            _mm512_broadcast_i64x4(_mm256_loadu_si256(blk[t].bsums.as_ptr() as *const __m256i))
        });
        let m: [__m512i; 8] = std::array::from_fn(|i| _mm512_madd_epi16(mn[i / 4], bs[i % 4]));
        let msum = reduce8x2(&m);
        let da = _mm512_broadcast_f32x4(_mm_setr_ps(blk[0].d, blk[1].d, blk[2].d, blk[3].d));
        let d = _mm512_permutexvar_ps(row_idx, _mm512_castps128_ps512(_mm_loadu_ps(kg.d.as_ptr())));
        if int_min {
            let isum = _mm512_sub_epi32(isum, msum);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum)));
        } else {
            acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum)));
            let dmin = _mm512_permutexvar_ps(
                row_idx,
                _mm512_castps128_ps512(_mm_loadu_ps(kg.dmin.as_ptr())),
            );
            acc = _mm512_sub_ps(acc, _mm512_mul_ps(_mm512_mul_ps(dmin, da), _mm512_cvtepi32_ps(msum)));
        }
    }
    let mut out = [0.0f32; 16];
    _mm512_storeu_ps(out.as_mut_ptr(), acc);
    out
}
