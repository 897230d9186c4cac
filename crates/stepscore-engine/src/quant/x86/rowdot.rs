//! The decode path on x86_64 (AVX2): a weight row times one token's
//! activations, read straight from the packed ggml blocks.
//!
//! Why: with one token (generation) the prefill paths spend more time
//! unpacking weights than multiplying them: `matmul.rs` unpacks each row
//! into int8 for its token tiles, `ktile.rs` interleaves 16 rows for 8-token
//! tiles (7 of them repeats of the one token). Here each block is expanded
//! in registers and multiplied at once, as ggml's `vec_dot` kernels do.
//!
//! Results equal the portable kernels' bit for bit (`portable.rs`): integer
//! sums are exact in any order, and the float steps are theirs. K-quants:
//! per super-block in order, `acc += (d * d_a) * isum` then, with a min,
//! `acc -= (dmin * d_a) * summ`. 32-element formats: eight f32 lanes, lane l
//! taking `(d * d_a) * (sum of products 4l..4l+3)` per block, the min term
//! `m * s_a` in its own accumulator, then the fixed lane sum of `x86::hsum`
//! (the order `portable::lane_tree` spells out) plus that accumulator.
//!
//! Safety: callers check AVX2 and FMA are available (the matmul driver's
//! `Simd::Avx2`/`Avx512`), and F16C ([`has_row_kernel`]), and pass a row of exactly as many blocks as the
//! token's activations.

use std::arch::x86_64::*;

use crate::ggml::GgmlType;
use crate::quant::act::{BlockQ8, BlockQ8K};
use crate::quant::fp::le_f16;

/// Bytes ahead of the block being multiplied that are hinted into the cache:
/// the weights stream from memory once per token, and a loop this busy does
/// not run far enough ahead on its own for them to arrive in time. Rows are
/// contiguous, so the hints run on into the next rows.
const PF_DIST: usize = 1024;

/// Hints `len` bytes from `dist` past `p` into L1 (a hint never faults, so
/// it may point past the matrix).
#[inline(always)]
unsafe fn prefetch(p: *const u8, dist: usize, len: usize) {
    let mut off = 0;
    while off < len {
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(dist + off) as *const i8);
        off += 64;
    }
}

/// Whether `ty` has a row kernel here for its activation type, on this CPU
/// (the callers have checked AVX2 and FMA; the K-quants also take F16C).
pub(crate) fn has_row_kernel(ty: GgmlType) -> bool {
    std::is_x86_feature_detected!("f16c")
        && matches!(
            ty,
            GgmlType::Q4K
                | GgmlType::Q5K
                | GgmlType::Q6K
                | GgmlType::Q4_0
                | GgmlType::Q4_1
                | GgmlType::Q5_0
                | GgmlType::Q5_1
                | GgmlType::Q8_0
        )
}

/// The exact sum of eight i32 lanes.
#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// `x86::hsum`'s reduction of eight f32 lanes (the shared lane order).
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Scale vector for a 32-value run covering two 16-value groups: the low
/// 128 bits (maddubs pairs of values 0..16) get `lo`, the high bits `hi`.
#[inline(always)]
unsafe fn scales2(lo: i16, hi: i16) -> __m256i {
    _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo))
}

/// Row `row` (whole blocks of `ty`) . one token, for every type
/// [`has_row_kernel`] accepts whose activations are Q8_K.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_k(ty: GgmlType, row: &[u8], a: &[BlockQ8K]) -> f32 {
    match ty {
        GgmlType::Q6K => q6k(row, a),
        GgmlType::Q5K => q45k::<true>(row, a),
        _ => q45k::<false>(row, a),
    }
}

/// Q4_K / Q5_K: per 64-value chunk c, 32 bytes of quants whose low nibbles
/// are values 64c..64c+32 (scale 2c) and high nibbles the next 32 (scale
/// 2c+1); Q5_K's fifth bits are bits 2c and 2c+1 of its 32 qh bytes.
#[inline(always)]
unsafe fn q45k<const Q5: bool>(row: &[u8], a: &[BlockQ8K]) -> f32 {
    let bb = if Q5 { 176 } else { 144 };
    debug_assert_eq!(row.len(), a.len() * bb);
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    let dist = PF_DIST;
    let mut acc = 0.0f32;
    for (b, blk) in a.iter().enumerate() {
        let x = &row[b * bb..(b + 1) * bb];
        prefetch(x.as_ptr(), dist, bb);
        let (sc, mn) = scales_mins_k4(&x[4..16]);
        // sum_j mn[j] * (bsums[2j] + bsums[2j+1]): the pair sums fit i16.
        let bs = _mm256_loadu_si256(blk.bsums.as_ptr() as *const __m256i);
        let pairs = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        let mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
        let summ = hsum_i32_128(_mm_madd_epi16(pairs, mins));
        // The scales as 16-bit words in each 128-bit lane: run c's low
        // nibbles take scale 2c in every word, its high nibbles 2c + 1.
        let sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(sc as i64)));
        let qs = x.as_ptr().add(if Q5 { 48 } else { 16 });
        let qh = if Q5 {
            _mm256_loadu_si256(x.as_ptr().add(16) as *const __m256i)
        } else {
            _mm256_setzero_si256()
        };
        let mut isum = _mm256_setzero_si256();
        for c in 0..4 {
            let q = _mm256_loadu_si256(qs.add(32 * c) as *const __m256i);
            let mut lo = _mm256_and_si256(q, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            if Q5 {
                // Bit 2c (2c+1) of each qh byte, moved to bit 4: shifts
                // within 16-bit words keep each byte's own bits (k < 8).
                let h_lo =
                    _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c as i32)), one);
                let h_hi = _mm256_and_si256(
                    _mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c as i32 + 1)),
                    one,
                );
                lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(h_lo));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h_hi));
            }
            let ap = blk.qs.as_ptr().add(64 * c);
            let a_lo = _mm256_loadu_si256(ap as *const __m256i);
            let a_hi = _mm256_loadu_si256(ap.add(32) as *const __m256i);
            // u8 (<= 31) x i8 (|a| <= 127) pairs cannot saturate i16.
            let p_lo = _mm256_maddubs_epi16(lo, a_lo);
            let p_hi = _mm256_maddubs_epi16(hi, a_hi);
            let s_lo = _mm256_shuffle_epi8(sc16, word_splat(2 * c));
            let s_hi = _mm256_shuffle_epi8(sc16, word_splat(2 * c + 1));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, s_lo));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, s_hi));
        }
        let (d, dmin) = f16_pair(x);
        acc += (d * blk.d) * hsum_i32(isum) as f32;
        acc -= (dmin * blk.d) * summ as f32;
    }
    acc
}

/// A shuffle that copies 16-bit word `k` (< 8) of each 128-bit lane to
/// every word of it.
#[inline(always)]
unsafe fn word_splat(k: usize) -> __m256i {
    let lo = (2 * k) as i8;
    let pair = (lo as u8 as i16) | (((lo + 1) as u8 as i16) << 8);
    _mm256_set1_epi16(pair)
}

/// The exact sum of four i32 lanes.
#[inline(always)]
unsafe fn hsum_i32_128(s: __m128i) -> i32 {
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// Q4_K/Q5_K's eight 6-bit scales and eight 6-bit mins from their 12 bytes
/// (the layout `blocks::scale_min_k4` reads one at a time), as the bytes of
/// two little-endian u64s.
#[inline(always)]
fn scales_mins_k4(s: &[u8]) -> (u64, u64) {
    const M6: u32 = 0x3F3F_3F3F;
    const M4: u32 = 0x0F0F_0F0F;
    const M2: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (w0, w1, w2) = (w(0), w(1), w(2));
    let sc = (w0 & M6) as u64 | (((w2 & M4) | (((w0 >> 6) & M2) << 4)) as u64) << 32;
    let mn = (w1 & M6) as u64 | ((((w2 >> 4) & M4) | (((w1 >> 6) & M2) << 4)) as u64) << 32;
    (sc, mn)
}

/// The two f16s at the start of a block (`d`, `dmin`) as f32, exactly as
/// `fp::le_f16` converts them: by F16C when both are finite (the
/// conversion is exact), by `le_f16` otherwise (NaN payloads).
#[inline(always)]
unsafe fn f16_pair(x: &[u8]) -> (f32, f32) {
    let bits = u32::from_le_bytes([x[0], x[1], x[2], x[3]]);
    if bits & 0x7C00 == 0x7C00 || bits & 0x7C00_0000 == 0x7C00_0000 {
        return (le_f16(x, 0), le_f16(x, 2));
    }
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(bits as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

/// Q6_K: quants taken unsigned (q + 32, 0..=63) and the offset subtracted
/// as `32 * sum_g sc[g] * bsums[g]`, which is the same integer.
#[inline(always)]
unsafe fn q6k(row: &[u8], a: &[BlockQ8K]) -> f32 {
    const BB: usize = 210;
    debug_assert_eq!(row.len(), a.len() * BB);
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let dist = PF_DIST;
    let mut acc = 0.0f32;
    for (b, blk) in a.iter().enumerate() {
        let x = &row[b * BB..(b + 1) * BB];
        prefetch(x.as_ptr(), dist, BB);
        let sc = |g: usize| x[192 + g] as i8 as i16;
        let mut off = 0i32;
        for g in 0..16 {
            off += sc(g) as i32 * blk.bsums[g] as i32;
        }
        let mut isum = _mm256_setzero_si256();
        for n in 0..2 {
            let ql0 = _mm256_loadu_si256(x.as_ptr().add(64 * n) as *const __m256i);
            let ql1 = _mm256_loadu_si256(x.as_ptr().add(64 * n + 32) as *const __m256i);
            let qh = _mm256_loadu_si256(x.as_ptr().add(128 + 32 * n) as *const __m256i);
            // Values 128n + 32k + l for k = 0..4 (see blocks::unpack_k).
            let q = [
                _mm256_or_si256(
                    _mm256_and_si256(ql0, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), m2)),
                ),
            ];
            for (k, qk) in q.into_iter().enumerate() {
                let g = 8 * n + 2 * k;
                let av =
                    _mm256_loadu_si256(blk.qs.as_ptr().add(128 * n + 32 * k) as *const __m256i);
                // u8 (<= 63) x i8 (|a| <= 127) pairs cannot saturate i16.
                let p = _mm256_maddubs_epi16(qk, av);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scales2(sc(g), sc(g + 1))));
            }
        }
        let d = le_f16(x, 208);
        acc += (d * blk.d) * (hsum_i32(isum) - 32 * off) as f32;
    }
    acc
}

/// Row `row` (whole 32-value blocks of `ty`) . one token, for the
/// 32-value formats [`has_row_kernel`] accepts (Q8_0 / Q8_1 activations).
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot32(ty: GgmlType, row: &[u8], a: &[BlockQ8]) -> f32 {
    match ty {
        GgmlType::Q4_0 => dot32_with::<false, true>(row, a, 18, |x| {
            let q = nibbles(x.add(2));
            (_mm256_sub_epi8(q, _mm256_set1_epi8(8)), 0.0)
        }),
        GgmlType::Q4_1 => {
            dot32_with::<true, false>(row, a, 20, |x| (nibbles(x.add(4)), f16_at(x, 2)))
        }
        GgmlType::Q5_0 => dot32_with::<false, true>(row, a, 22, |x| {
            let q = _mm256_or_si256(nibbles(x.add(6)), fifth_bits(x.add(2)));
            (_mm256_sub_epi8(q, _mm256_set1_epi8(16)), 0.0)
        }),
        GgmlType::Q5_1 => dot32_with::<true, false>(row, a, 24, |x| {
            (
                _mm256_or_si256(nibbles(x.add(8)), fifth_bits(x.add(4))),
                f16_at(x, 2),
            )
        }),
        _ => dot32_with::<false, true>(row, a, 34, |x| {
            (_mm256_loadu_si256(x.add(2) as *const __m256i), 0.0)
        }),
    }
}

/// The f16 at byte `off` of a block.
#[inline(always)]
unsafe fn f16_at(x: *const u8, off: usize) -> f32 {
    le_f16(std::slice::from_raw_parts(x, off + 2), off)
}

/// 16 bytes -> 32 values: low nibbles are values 0..16, high nibbles 16..32.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let b = _mm_loadu_si128(p as *const __m128i);
    let m4 = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(b, m4);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), m4);
    _mm256_set_m128i(hi, lo)
}

/// Bit j of the little-endian u32 at `p`, as 16 in byte j (0 elsewhere).
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> __m256i {
    let bits = (p as *const u32).read_unaligned();
    // Byte j gets the qh byte holding bit j, then tests that bit.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    _mm256_and_si256(set, _mm256_set1_epi8(16))
}

/// The 32-value block loop: `load(block)` gives the 32 quants (signed when
/// `SIGNED`) and the block's min factor; `d` is the f16 at byte 0.
#[inline(always)]
unsafe fn dot32_with<const MIN: bool, const SIGNED: bool>(
    row: &[u8],
    a: &[BlockQ8],
    bb: usize,
    load: impl Fn(*const u8) -> (__m256i, f32),
) -> f32 {
    debug_assert_eq!(row.len(), a.len() * bb);
    let ones = _mm256_set1_epi16(1);
    let mut acc = _mm256_setzero_ps();
    let mut accm = 0.0f32;
    let dist = PF_DIST;
    for (b, blk) in a.iter().enumerate() {
        let x = row.as_ptr().add(b * bb);
        prefetch(x, dist, bb);
        let (wv, m) = load(x);
        let d = f16_at(x, 0);
        let av = _mm256_loadu_si256(blk.qs.as_ptr() as *const __m256i);
        // |w| as the unsigned operand, its sign moved onto the activation.
        let p = if SIGNED {
            _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv))
        } else {
            _mm256_maddubs_epi16(wv, av)
        };
        let p = _mm256_madd_epi16(p, ones);
        acc = _mm256_add_ps(
            acc,
            _mm256_mul_ps(_mm256_set1_ps(d * blk.d), _mm256_cvtepi32_ps(p)),
        );
        if MIN {
            accm += m * blk.s;
        }
    }
    hsum(acc) + accm
}
