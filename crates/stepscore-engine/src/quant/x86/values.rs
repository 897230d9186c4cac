//! Attention's weighted sum of values in AVX-512 and AVX2 registers
//! (`cpu/attention.rs` dispatches to them from its AVX2 / AVX-512 variants):
//! each element gets exactly the portable loop's operations
//! (`portable::weigh_values`), so its bits.

use crate::quant::portable::weigh_values;

/// `oh[i] += Σ_j (scores[j] / sum) * v_j[i]` over keys `first..` in order,
/// with `oh` held in up to 8 zmm registers per 128 values instead of being
/// loaded and stored for every key. No fused multiply-add: each element
/// gets exactly the portable loop's operations.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn weigh_values_avx512(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    use std::arch::x86_64::*;
    let hd = oh.len();
    if (first + scores.len()) * kvd > values.len() || off + hd > kvd {
        // not a cache this pass built; the portable loop checks every index
        return weigh_values(scores, sum, values, kvd, off, first, oh);
    }
    let mut c0 = 0;
    while c0 + 16 <= hd {
        let n = ((hd - c0) / 16).min(8);
        let mut acc = [_mm512_setzero_ps(); 8];
        for (i, a) in acc.iter_mut().enumerate().take(n) {
            *a = _mm512_loadu_ps(oh.as_ptr().add(c0 + 16 * i));
        }
        for (k, &sc) in scores.iter().enumerate() {
            let p = _mm512_set1_ps(sc / sum);
            let v = values.as_ptr().add((first + k) * kvd + off + c0);
            for (i, a) in acc.iter_mut().enumerate().take(n) {
                *a = _mm512_add_ps(*a, _mm512_mul_ps(p, _mm512_loadu_ps(v.add(16 * i))));
            }
        }
        for (i, a) in acc.iter().enumerate().take(n) {
            _mm512_storeu_ps(oh.as_mut_ptr().add(c0 + 16 * i), *a);
        }
        c0 += 16 * n;
    }
    weigh_values(scores, sum, values, kvd, off + c0, first, &mut oh[c0..]);
}

/// [`weigh_values_avx512`] in AVX2 registers: up to 8 ymm per 64 values
/// (a 64-value head in one pass), each element with the portable loop's
/// operations.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn weigh_values_avx2(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    use std::arch::x86_64::*;
    let hd = oh.len();
    if (first + scores.len()) * kvd > values.len() || off + hd > kvd {
        // not a cache this pass built; the portable loop checks every index
        return weigh_values(scores, sum, values, kvd, off, first, oh);
    }
    let mut c0 = 0;
    while c0 + 8 <= hd {
        let n = ((hd - c0) / 8).min(8);
        let mut acc = [_mm256_setzero_ps(); 8];
        for (i, a) in acc.iter_mut().enumerate().take(n) {
            *a = _mm256_loadu_ps(oh.as_ptr().add(c0 + 8 * i));
        }
        for (k, &sc) in scores.iter().enumerate() {
            let p = _mm256_set1_ps(sc / sum);
            let v = values.as_ptr().add((first + k) * kvd + off + c0);
            for (i, a) in acc.iter_mut().enumerate().take(n) {
                *a = _mm256_add_ps(*a, _mm256_mul_ps(p, _mm256_loadu_ps(v.add(8 * i))));
            }
        }
        for (i, a) in acc.iter().enumerate().take(n) {
            _mm256_storeu_ps(oh.as_mut_ptr().add(c0 + 8 * i), *a);
        }
        c0 += 8 * n;
    }
    weigh_values(scores, sum, values, kvd, off + c0, first, &mut oh[c0..]);
}
