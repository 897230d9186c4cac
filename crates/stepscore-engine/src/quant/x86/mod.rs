//! AVX2 versions of the three dot shapes in `portable.rs`, with their bits:
//! the same float operations in the same order (no FMA).
//!
//! int8 x int8 products go through `maddubs` (u8 x i8 -> pairwise i16): the
//! weight's magnitude is the unsigned operand and its sign is moved onto the
//! activation with `sign_epi8` (a no-op for formats whose unpacked weights
//! are never negative). No saturation is possible: |w| <= 128 and |a| <= 127
//! (ggml's quantizers never emit -128), so a pair is at most 2*128*127.
//!
//! Safety: callers check `is_x86_feature_detected!("avx2")` and `"fma"`
//! before calling, and pass rows whose slice lengths agree (`q` is 32
//! (or 256) times the block count, every token slice has that block count),
//! which the matmul driver guarantees by construction.

pub(crate) mod attention;
pub(super) mod avx512;
pub(super) mod ktile;
pub(super) mod rowdot;
pub(super) mod tile32;
pub(crate) mod values;

use std::arch::x86_64::*;
use std::mem::MaybeUninit;

use self::ktile::{KRows, ROWS, TOKENS};
use self::tile32::Rows32;
use crate::ggml::GgmlType;
use crate::quant::act::{BlockQ8, BlockQ8K};
use crate::quant::portable::{Row32, RowK};

#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The exact sum of eight i32 lanes (no overflow: lanes are block sums).
#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// i8 x i8 -> 16 pairwise i16 sums; `aw` is |w| (or w when `SIGNED` is false).
#[inline(always)]
unsafe fn mul_pairs<const SIGNED: bool>(aw: __m256i, w: __m256i, a: __m256i) -> __m256i {
    let sa = if SIGNED { _mm256_sign_epi8(a, w) } else { a };
    _mm256_maddubs_epi16(aw, sa)
}

#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot32<const T: usize, const MIN: bool, const SIGNED: bool>(
    w: &Row32,
    acts: &[&[BlockQ8]; T],
) -> [f32; T] {
    let nb = w.d.len();
    debug_assert!(w.q.len() == nb * 32 && w.m.len() == nb && acts.iter().all(|a| a.len() == nb));
    let ones = _mm256_set1_epi16(1);
    let mut acc = [_mm256_setzero_ps(); T];
    let mut accm = [0.0f32; T];
    let qp = w.q.as_ptr();
    for b in 0..nb {
        let wv = _mm256_loadu_si256(qp.add(32 * b) as *const __m256i);
        let aw = if SIGNED { _mm256_sign_epi8(wv, wv) } else { wv };
        let d = *w.d.get_unchecked(b);
        for t in 0..T {
            let blk = acts[t].get_unchecked(b);
            let a = _mm256_loadu_si256(blk.qs.as_ptr() as *const __m256i);
            let p = _mm256_madd_epi16(mul_pairs::<SIGNED>(aw, wv, a), ones);
            // Rounded product, then the sum: the portable kernel's bits (no FMA).
            let dd = _mm256_set1_ps(d * blk.d);
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(dd, _mm256_cvtepi32_ps(p)));
            if MIN {
                accm[t] += *w.m.get_unchecked(b) * blk.s;
            }
        }
    }
    let mut out = [0.0f32; T];
    for t in 0..T {
        out[t] = hsum(acc[t]) + accm[t];
    }
    out
}

#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_k<const T: usize, const MIN: bool, const SIGNED: bool>(
    w: &RowK,
    acts: &[&[BlockQ8K]; T],
) -> [f32; T] {
    let nb = w.d.len();
    debug_assert!(
        w.q.len() == nb * 256 && w.sc.len() == nb * 16 && acts.iter().all(|a| a.len() == nb)
    );
    let mut acc = [0.0f32; T];
    let qp = w.q.as_ptr();
    for b in 0..nb {
        // Per 32-value chunk: the weights, their magnitudes, and a scale
        // vector whose low half is group 2c's scale and high half group 2c+1's
        // (maddubs lanes 0..8 cover values 0..16 of the chunk).
        let mut wv = [_mm256_setzero_si256(); 8];
        let mut aw = [_mm256_setzero_si256(); 8];
        let mut sv = [_mm256_setzero_si256(); 8];
        let sc = w.sc.as_ptr().add(16 * b);
        for c in 0..8 {
            wv[c] = _mm256_loadu_si256(qp.add(256 * b + 32 * c) as *const __m256i);
            aw[c] = if SIGNED {
                _mm256_sign_epi8(wv[c], wv[c])
            } else {
                wv[c]
            };
            sv[c] = _mm256_set_m128i(
                _mm_set1_epi16(*sc.add(2 * c + 1)),
                _mm_set1_epi16(*sc.add(2 * c)),
            );
        }
        let mnv = if MIN {
            _mm256_loadu_si256(w.mn.as_ptr().add(16 * b) as *const __m256i)
        } else {
            _mm256_setzero_si256()
        };
        let (d, dmin) = (*w.d.get_unchecked(b), *w.dmin.get_unchecked(b));
        // Chunks outer, tokens inner: one chunk's weights and the T integer
        // sums fit in the 16 ymm registers (tokens outer spilled the
        // accumulators to the stack on every chunk). Integer sums are
        // exact, so the order changes nothing in the result.
        let mut isum = [_mm256_setzero_si256(); T];
        for c in 0..8 {
            for t in 0..T {
                let ap = acts[t].get_unchecked(b).qs.as_ptr();
                let a = _mm256_loadu_si256(ap.add(32 * c) as *const __m256i);
                let p = mul_pairs::<SIGNED>(aw[c], wv[c], a);
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sv[c]));
            }
        }
        for t in 0..T {
            let blk = acts[t].get_unchecked(b);
            // The portable kernel's float steps, per super-block: integer
            // sums are exact in any order, the scaling is done once.
            acc[t] += (d * blk.d) * hsum_i32(isum[t]) as f32;
            if MIN {
                let bs = _mm256_loadu_si256(blk.bsums.as_ptr() as *const __m256i);
                acc[t] -= (dmin * blk.d) * hsum_i32(_mm256_madd_epi16(bs, mnv)) as f32;
            }
        }
    }
    acc
}

#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn dot_f32<const T: usize>(w: &[f32], acts: &[&[f32]; T]) -> [f32; T] {
    let n = w.len();
    debug_assert!(acts.iter().all(|a| a.len() == n));
    let n8 = n / 8 * 8;
    let mut acc = [_mm256_setzero_ps(); T];
    let mut i = 0;
    while i < n8 {
        let wv = _mm256_loadu_ps(w.as_ptr().add(i));
        for t in 0..T {
            let p = _mm256_mul_ps(wv, _mm256_loadu_ps(acts[t].as_ptr().add(i)));
            acc[t] = _mm256_add_ps(acc[t], p);
        }
        i += 8;
    }
    let mut out = [0.0f32; T];
    for t in 0..T {
        // The lanes summed in order, plus the tail's sum: the portable kernel's bits.
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[t]);
        let mut tail = 0.0f32;
        for j in n8..n {
            tail += w.get_unchecked(j) * acts[t].get_unchecked(j);
        }
        out[t] = lanes.iter().sum::<f32>() + tail;
    }
    out
}

/// The K-quant tiles of `ktile.rs` (16 rows x 8 tokens) on AVX2: each half
/// of the group (8 rows, one per 32-bit lane) against 4 tokens at a time.
/// Per 4 quants of every row: `maddubs` of the rows' unsigned quants with the
/// token's 4 activation bytes broadcast, then `madd` with the rows' scales
/// as i16 pairs, so a lane gains scale x (its 4-product sum) in two
/// instructions, with no horizontal sums. Integers are exact (a `maddubs`
/// pair is at most 2 x 63 x 127), and the f32 steps are the portable
/// kernel's, lane by lane: the same bits as `avx512::tile`.
///
/// Safety: the CPU has AVX2 and FMA; group and token slices have the same length.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile_k(
    ty: GgmlType,
    g: &[KRows],
    a: &[&[BlockQ8K]; TOKENS],
) -> [[f32; ROWS]; TOKENS] {
    let mut out = [[0.0f32; ROWS]; TOKENS];
    for h in 0..2 {
        for quad in 0..TOKENS / 4 {
            let toks: [&[BlockQ8K]; 4] = std::array::from_fn(|k| a[4 * quad + k]);
            let acc = if ty == GgmlType::Q6K {
                tile_k_half::<4, true>(g, &toks, h)
            } else {
                tile_k_half::<8, false>(g, &toks, h)
            };
            for (k, v) in acc.iter().enumerate() {
                _mm256_storeu_ps(out[4 * quad + k].as_mut_ptr().add(8 * h), *v);
            }
        }
    }
    out
}

/// Rows 8h..8h + 8 of the group x 4 tokens. `STEPS`: 4-quant steps per scale
/// group; `INT_MIN`: the mins sum is an integer correction (Q6_K).
#[inline(always)]
unsafe fn tile_k_half<const STEPS: usize, const INT_MIN: bool>(
    g: &[KRows],
    a: &[&[BlockQ8K]; 4],
    h: usize,
) -> [__m256; 4] {
    let lo16 = _mm256_set1_epi32(0xFFFF);
    let mut acc = [_mm256_setzero_ps(); 4];
    for (b, kr) in g.iter().enumerate() {
        let blk: [&BlockQ8K; 4] = std::array::from_fn(|t| a[t].get_unchecked(b));
        let mut isum = [_mm256_setzero_si256(); 4];
        for grp in 0..64 / STEPS {
            let sc = _mm256_loadu_si256(kr.sc[grp].as_ptr().add(8 * h) as *const __m256i);
            // Each lane's scale in both i16 halves: madd then multiplies both products' pairs by it.
            let sc2 = _mm256_or_si256(_mm256_and_si256(sc, lo16), _mm256_slli_epi32::<16>(sc));
            for s in 0..STEPS {
                let j = grp * STEPS + s;
                let w = _mm256_loadu_si256(kr.q[j].as_ptr().add(32 * h) as *const __m256i);
                for t in 0..4 {
                    let x = (blk[t].qs.as_ptr().add(4 * j) as *const i32).read_unaligned();
                    let p = _mm256_maddubs_epi16(w, _mm256_set1_epi32(x));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, sc2));
                }
            }
        }
        end_block::<INT_MIN>(kr, &blk, h, &isum, &mut acc);
    }
    acc
}

/// [`tile_k`] on AVX-VNNI: the AVX-512 tile's steps (`avx512.rs`) on 8
/// rows a register. Per 4 quants of the 8 rows, one `vpdpbusd` against the
/// token's 4 activation bytes broadcast (where `tile_k` needs `maddubs` +
/// `madd`); a scale group's sum is then multiplied by the rows' scales, the
/// mins term is a `madd` of the rows' i16 mins pairs with the bsums pairs.
/// The integers are `tile_k`'s, exact, and the f32 steps are the portable
/// kernel's lane by lane: the same bits.
///
/// Safety: the CPU has AVX2, FMA and AVX-VNNI; group and token slices have the same length.
#[target_feature(enable = "avx2,fma,avxvnni")]
pub(crate) unsafe fn tile_k_vnni(
    ty: GgmlType,
    g: &[KRows],
    a: &[&[BlockQ8K]; TOKENS],
) -> [[f32; ROWS]; TOKENS] {
    let mut out = [[0.0f32; ROWS]; TOKENS];
    for h in 0..2 {
        for quad in 0..TOKENS / 4 {
            let toks: [&[BlockQ8K]; 4] = std::array::from_fn(|k| a[4 * quad + k]);
            let acc = if ty == GgmlType::Q6K {
                tile_k_vnni_half::<4, true>(g, &toks, h)
            } else {
                tile_k_vnni_half::<8, false>(g, &toks, h)
            };
            for (k, v) in acc.iter().enumerate() {
                _mm256_storeu_ps(out[4 * quad + k].as_mut_ptr().add(8 * h), *v);
            }
        }
    }
    out
}

/// Rows 8h..8h + 8 of the group x 4 tokens; `STEPS` and `INT_MIN` as in
/// [`tile_k_half`].
#[inline(always)]
unsafe fn tile_k_vnni_half<const STEPS: usize, const INT_MIN: bool>(
    g: &[KRows],
    a: &[&[BlockQ8K]; 4],
    h: usize,
) -> [__m256; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    for (b, kr) in g.iter().enumerate() {
        let blk: [&BlockQ8K; 4] = std::array::from_fn(|t| a[t].get_unchecked(b));
        let mut isum = [_mm256_setzero_si256(); 4];
        for grp in 0..64 / STEPS {
            let mut part = [_mm256_setzero_si256(); 4];
            for s in 0..STEPS {
                let j = grp * STEPS + s;
                let w = _mm256_loadu_si256(kr.q[j].as_ptr().add(32 * h) as *const __m256i);
                for t in 0..4 {
                    let x = (blk[t].qs.as_ptr().add(4 * j) as *const i32).read_unaligned();
                    part[t] = _mm256_dpbusd_avx_epi32(part[t], w, _mm256_set1_epi32(x));
                }
            }
            let sc = _mm256_loadu_si256(kr.sc[grp].as_ptr().add(8 * h) as *const __m256i);
            for t in 0..4 {
                isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(part[t], sc));
            }
        }
        end_block::<INT_MIN>(kr, &blk, h, &isum, &mut acc);
    }
    acc
}

/// One super-block's end for rows 8h..8h + 8 x 4 tokens, shared by
/// [`tile_k_half`] and [`tile_k_vnni_half`]: the mins term (`madd` of the
/// rows' i16 mins pairs with the tokens' bsums pairs), then the portable
/// kernel's f32 steps lane by lane. `INT_MIN`: the mins sum corrects `isum`
/// (Q6_K) instead of being a `dmin` term.
#[inline(always)]
unsafe fn end_block<const INT_MIN: bool>(
    kr: &KRows,
    blk: &[&BlockQ8K; 4],
    h: usize,
    isum: &[__m256i; 4],
    acc: &mut [__m256; 4],
) {
    let mut msum = [_mm256_setzero_si256(); 4];
    for p in 0..8 {
        let mn = _mm256_loadu_si256(kr.mn[p].as_ptr().add(8 * h) as *const __m256i);
        for t in 0..4 {
            let bs = (blk[t].bsums.as_ptr().add(2 * p) as *const i32).read_unaligned();
            msum[t] = _mm256_add_epi32(msum[t], _mm256_madd_epi16(mn, _mm256_set1_epi32(bs)));
        }
    }
    let d = _mm256_loadu_ps(kr.d.as_ptr().add(8 * h));
    let dmin = _mm256_loadu_ps(kr.dmin.as_ptr().add(8 * h));
    for t in 0..4 {
        let da = _mm256_set1_ps(blk[t].d);
        let i = if INT_MIN {
            _mm256_sub_epi32(isum[t], msum[t])
        } else {
            isum[t]
        };
        acc[t] = _mm256_add_ps(
            acc[t],
            _mm256_mul_ps(_mm256_mul_ps(d, da), _mm256_cvtepi32_ps(i)),
        );
        if !INT_MIN {
            let m = _mm256_cvtepi32_ps(msum[t]);
            acc[t] = _mm256_sub_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(dmin, da), m));
        }
    }
}

/// Blocks per pass of [`tile32`]: their `d_w * d_a` products (8 rows x 4
/// tokens each, 4 KiB) stay in L1 while the 8 lanes are run over them.
const PASS_BLOCKS: usize = 32;

/// The 32-element formats' tile of `tile32.rs` on AVX2 ([`tile32::Layout::Lanes`]:
/// one row per 32-bit lane) x 4 tokens. Per pass of blocks: first each
/// block's `d_w * d_a` (8 rows) and `m * s` term per token, then lane l of
/// all 8 rows for every block (`maddubs` + `madd` against the token's bytes
/// 4l..4l+3 broadcast), one lane at a time so the 4 tokens' accumulators
/// stay in registers. Each (row, token, lane) value gets the portable
/// float steps in block order; the lanes are summed by `lane_tree` lane-wise
/// across the 8 registers. `MIN`: the format has an `m * s` term; `SIGNED`:
/// quants can be negative (their sign goes onto the activation).
///
/// Safety: the CPU has AVX2 and FMA; group and token slices have the same length.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn tile32<const MIN: bool, const SIGNED: bool>(
    g: &[Rows32],
    a: &[&[BlockQ8]; tile32::TOKENS],
) -> [[f32; tile32::ROWS]; tile32::TOKENS] {
    const T: usize = tile32::TOKENS;
    debug_assert!(a.iter().all(|t| t.len() == g.len()));
    let ones = _mm256_set1_epi16(1);
    // Lane l's accumulators between passes (the first pass starts from zero).
    let mut acc = [const { MaybeUninit::<[__m256; T]>::uninit() }; 8];
    let mut accm = [_mm256_setzero_ps(); T];
    // Written before it is read, pass by pass (zeroing it on every call cost ~5% of prefill).
    let mut dd = [const { MaybeUninit::<[__m256; T]>::uninit() }; PASS_BLOCKS];
    let mut b0 = 0;
    // At least one pass, so that `acc` is written even with no blocks.
    loop {
        let n = (g.len() - b0).min(PASS_BLOCKS);
        for (j, ddj) in dd.iter_mut().enumerate().take(n) {
            let kr = g.get_unchecked(b0 + j);
            let dw = _mm256_load_ps(kr.d.as_ptr());
            let m = _mm256_load_ps(kr.m.as_ptr());
            let mut v = [_mm256_setzero_ps(); T];
            for t in 0..T {
                let blk = a[t].get_unchecked(b0 + j);
                v[t] = _mm256_mul_ps(dw, _mm256_set1_ps(blk.d));
                if MIN {
                    accm[t] = _mm256_add_ps(accm[t], _mm256_mul_ps(m, _mm256_set1_ps(blk.s)));
                }
            }
            ddj.write(v);
        }
        for (l, acc_l) in acc.iter_mut().enumerate() {
            let mut s = if b0 == 0 {
                [_mm256_setzero_ps(); T]
            } else {
                acc_l.assume_init()
            };
            for (j, ddj) in dd.iter().enumerate().take(n) {
                let ddj = ddj.assume_init_ref();
                let kr = g.get_unchecked(b0 + j);
                let w =
                    _mm256_load_si256((kr.q.as_ptr() as *const u8).add(32 * l) as *const __m256i);
                let aw = if SIGNED { _mm256_sign_epi8(w, w) } else { w };
                for t in 0..T {
                    let qs = a[t].get_unchecked(b0 + j).qs.as_ptr().add(4 * l);
                    let x = _mm256_set1_epi32((qs as *const i32).read_unaligned());
                    let p = _mm256_madd_epi16(mul_pairs::<SIGNED>(aw, w, x), ones);
                    // Rounded product, then the sum: the portable kernel's bits (no FMA).
                    s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(ddj[t], _mm256_cvtepi32_ps(p)));
                }
            }
            acc_l.write(s);
        }
        b0 += n;
        if b0 >= g.len() {
            break;
        }
    }
    let mut out = [[0.0f32; tile32::ROWS]; T];
    for t in 0..T {
        let v = |l: usize| acc[l].assume_init_ref()[t];
        // lane_tree, 8 rows at once: ((0+4)+(2+6)) + ((1+5)+(3+7)).
        let even = _mm256_add_ps(_mm256_add_ps(v(0), v(4)), _mm256_add_ps(v(2), v(6)));
        let odd = _mm256_add_ps(_mm256_add_ps(v(1), v(5)), _mm256_add_ps(v(3), v(7)));
        let r = _mm256_add_ps(_mm256_add_ps(even, odd), accm[t]);
        _mm256_storeu_ps(out[t].as_mut_ptr(), r);
    }
    out
}
