//! AVX-512 (F + VNNI) kernel of the K-quant tiles in `ktile.rs`: 16 weight
//! rows (one per 32-bit lane) x 8 tokens.
//!
//! Per 4 quants of every row: one `dpbusd` (u8 x i8, 4 products added into
//! each i32 lane) against the token's 4 activation bytes broadcast to all
//! lanes. A scale group's sum is then multiplied by the rows' scales
//! lane-wise, and the mins term is a `dpwssd` of the rows' i16 mins pairs
//! with the token's bsums pairs. Every integer is exact (Q6_K's largest
//! super-block sum is 16 * 16 * 63 * 127 * 128 < 2^31), and the f32 steps are
//! the portable kernel's, lane by lane, so results match it bit for bit.
//!
//! Safety: callers check [`super::Simd::Avx512`] is available and pass
//! group and token slices of the same length.

use std::arch::x86_64::*;

use super::act::BlockQ8K;
use super::ktile::{KRows, ROWS, TOKENS};
use crate::ggml::GgmlType;

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
