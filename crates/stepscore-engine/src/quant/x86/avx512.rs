//! AVX-512 (F + VNNI) kernels of the prefill tiles: [`tile`] for the K-quant
//! groups of `ktile.rs` (16 weight rows, one per 32-bit lane, x 8 tokens) and
//! [`tile32`] for the 32-element formats' groups of `tile32.rs` (8 rows, two
//! per register, x 4 tokens; its float steps are described there).
//!
//! K-quant tiles:
//! Per 4 quants of every row: one `dpbusd` (u8 x i8, 4 products added into
//! each i32 lane) against the token's 4 activation bytes broadcast to all
//! lanes. A scale group's sum is then multiplied by the rows' scales
//! lane-wise, and the mins term is a `dpwssd` of the rows' i16 mins pairs
//! with the token's bsums pairs. Every integer is exact (Q6_K's largest
//! super-block sum is 16 * 16 * 63 * 127 * 128 < 2^31), and the f32 steps are
//! the portable kernel's, lane by lane, so results match it bit for bit.
//!
//! Safety: callers check [`crate::quant::Simd::Avx512`] is available and pass
//! group and token slices of the same length.

use std::arch::x86_64::*;

use super::ktile::{KRows, ROWS, TOKENS};
use super::tile32::{self, Rows32};
use crate::ggml::GgmlType;
use crate::quant::act::{BlockQ8, BlockQ8K};
use crate::quant::portable::lane_tree;

/// Dispatches on the scale group size (Q6_K: 16 quants, Q4_K/Q5_K: 32).
#[target_feature(enable = "avx512f,avx512vnni")]
pub(crate) unsafe fn tile(
    ty: GgmlType,
    g: &[KRows],
    a: &[&[BlockQ8K]; TOKENS],
) -> [[f32; ROWS]; TOKENS] {
    if ty == GgmlType::Q6K {
        tile_body::<4, true>(g, a)
    } else {
        tile_body::<8, false>(g, a)
    }
}

/// `STEPS`: 4-quant steps per scale group; `INT_MIN`: subtract the mins sum
/// from the integer sum (Q6_K's offset) instead of as a `dmin` term.
#[inline(always)]
unsafe fn tile_body<const STEPS: usize, const INT_MIN: bool>(
    g: &[KRows],
    a: &[&[BlockQ8K]; TOKENS],
) -> [[f32; ROWS]; TOKENS] {
    debug_assert!(a.iter().all(|t| t.len() == g.len()));
    let mut acc = [_mm512_setzero_ps(); TOKENS];
    for (b, kr) in g.iter().enumerate() {
        let blk: [&BlockQ8K; TOKENS] = std::array::from_fn(|t| a[t].get_unchecked(b));
        let mut isum = [_mm512_setzero_si512(); TOKENS];
        for grp in 0..64 / STEPS {
            let mut part = [_mm512_setzero_si512(); TOKENS];
            for s in 0..STEPS {
                let j = grp * STEPS + s;
                let w = _mm512_load_si512(kr.q[j].as_ptr() as *const _);
                for t in 0..TOKENS {
                    let x = (blk[t].qs.as_ptr().add(4 * j) as *const i32).read_unaligned();
                    part[t] = _mm512_dpbusd_epi32(part[t], w, _mm512_set1_epi32(x));
                }
            }
            let sc = _mm512_load_si512(kr.sc[grp].as_ptr() as *const _);
            for t in 0..TOKENS {
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(part[t], sc));
            }
        }
        let mut msum = [_mm512_setzero_si512(); TOKENS];
        for p in 0..8 {
            let mn = _mm512_load_si512(kr.mn[p].as_ptr() as *const _);
            for t in 0..TOKENS {
                let bs = (blk[t].bsums.as_ptr().add(2 * p) as *const i32).read_unaligned();
                msum[t] = _mm512_dpwssd_epi32(msum[t], mn, _mm512_set1_epi32(bs));
            }
        }
        let d = _mm512_load_ps(kr.d.as_ptr());
        let dmin = _mm512_load_ps(kr.dmin.as_ptr());
        for t in 0..TOKENS {
            let da = _mm512_set1_ps(blk[t].d);
            let i = if INT_MIN {
                _mm512_sub_epi32(isum[t], msum[t])
            } else {
                isum[t]
            };
            acc[t] = _mm512_add_ps(
                acc[t],
                _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(i)),
            );
            if !INT_MIN {
                let m = _mm512_cvtepi32_ps(msum[t]);
                acc[t] = _mm512_sub_ps(acc[t], _mm512_mul_ps(_mm512_mul_ps(dmin, da), m));
            }
        }
    }
    let mut out = [[0.0f32; ROWS]; TOKENS];
    for (o, v) in out.iter_mut().zip(acc) {
        _mm512_storeu_ps(o.as_mut_ptr(), v);
    }
    out
}

/// The 32-element formats' tile: rows 2p and 2p + 1 of the group in
/// register p (lanes 0..8 and 8..16), 4 tokens. `MIN`: the format has an
/// `m * s` term (Q4_1, Q5_1); `SIGNED`: its quants were stored plus 128.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn tile32<const MIN: bool, const SIGNED: bool>(
    g: &[Rows32],
    a: &[&[BlockQ8]; tile32::TOKENS],
) -> [[f32; tile32::ROWS]; tile32::TOKENS] {
    const T: usize = tile32::TOKENS;
    debug_assert!(a.iter().all(|t| t.len() == g.len()));
    let ones = _mm512_set1_epi8(1);
    // Register p's lanes take d of rows 2p (lanes 0..8) and 2p + 1 (8..16).
    let pick: [__m512i; 4] = std::array::from_fn(|p| {
        let (lo, hi) = (2 * p as i32, 2 * p as i32 + 1);
        _mm512_setr_epi32(
            lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi,
        )
    });
    let mut acc = [[_mm512_setzero_ps(); T]; 4];
    let mut accm = [_mm256_setzero_ps(); T];
    for (b, kr) in g.iter().enumerate() {
        let blk: [&BlockQ8; T] = std::array::from_fn(|t| a[t].get_unchecked(b));
        let av: [__m512i; T] = std::array::from_fn(|t| {
            _mm512_broadcast_i64x4(_mm256_loadu_si256(blk[t].qs.as_ptr() as *const __m256i))
        });
        // 128 x each 4-byte sum of the activations: what the +128 added.
        let corr: [__m512i; T] = std::array::from_fn(|t| {
            if SIGNED {
                _mm512_slli_epi32::<7>(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, av[t]))
            } else {
                _mm512_setzero_si512()
            }
        });
        let d8 = _mm512_castps256_ps512(_mm256_load_ps(kr.d.as_ptr()));
        for p in 0..4 {
            let w = _mm512_load_si512(kr.q[p].as_ptr() as *const _);
            let dv = _mm512_permutexvar_ps(pick[p], d8);
            for t in 0..T {
                let mut x = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, av[t]);
                if SIGNED {
                    x = _mm512_sub_epi32(x, corr[t]);
                }
                let dd = _mm512_mul_ps(dv, _mm512_set1_ps(blk[t].d));
                acc[p][t] = _mm512_add_ps(acc[p][t], _mm512_mul_ps(dd, _mm512_cvtepi32_ps(x)));
            }
        }
        if MIN {
            let m8 = _mm256_load_ps(kr.m.as_ptr());
            for t in 0..T {
                accm[t] = _mm256_add_ps(accm[t], _mm256_mul_ps(m8, _mm256_set1_ps(blk[t].s)));
            }
        }
    }
    let mut out = [[0.0f32; tile32::ROWS]; T];
    for t in 0..T {
        let mut m = [0.0f32; tile32::ROWS];
        _mm256_storeu_ps(m.as_mut_ptr(), accm[t]);
        for (p, pair) in acc.iter().enumerate() {
            let mut lanes = [0.0f32; 16];
            _mm512_storeu_ps(lanes.as_mut_ptr(), pair[t]);
            for h in 0..2 {
                let l: &[f32; 8] = lanes[8 * h..8 * h + 8].try_into().unwrap_unchecked();
                out[t][2 * p + h] = lane_tree(l) + m[2 * p + h];
            }
        }
    }
    out
}
