//! Attention's weighted sum of values as WebAssembly SIMD128 intrinsics
//! (`cpu/attention.rs` dispatches to it; `portable::weigh_values` is the
//! loop it equals bit for bit, and attention.rs's tests compare them on
//! wasm32).

use core::arch::wasm32::*;

/// Attention's weighted sum of values, added to `oh`: `oh[i] += sum_k
/// (scores[k] / sum) * v_{first+k}[off + i]`, one key after another, with up
/// to 16 vectors of `oh` held in registers across the keys. The per-element operations (a product,
/// then an add) are the portable loop's, so the bits are too. Returns false,
/// writing nothing, when the rows are not in `values`.
pub(crate) fn weigh_values(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) -> bool {
    let hd = oh.len();
    let end = (first + scores.len())
        .checked_mul(kvd)
        .filter(|&e| e <= values.len());
    if end.is_none() || off + hd > kvd {
        return false;
    }
    const BLOCK: usize = 16;
    let mut c0 = 0;
    while c0 < hd {
        let n = ((hd - c0) / 4).min(BLOCK);
        if n == 0 {
            break;
        }
        let mut acc = [f32x4_splat(0.0); BLOCK];
        for (i, a) in acc.iter_mut().enumerate().take(n) {
            // SAFETY: c0 + 4i + 4 <= hd.
            *a = unsafe { v128_load(oh.as_ptr().add(c0 + 4 * i) as *const v128) };
        }
        for (k, &sc) in scores.iter().enumerate() {
            let p = f32x4_splat(sc / sum);
            // SAFETY: (first + k) * kvd + off + c0 + 4n <= (first + k + 1) * kvd
            // <= values.len(), checked above.
            unsafe {
                let v = values.as_ptr().add((first + k) * kvd + off + c0);
                for (i, a) in acc.iter_mut().enumerate().take(n) {
                    *a = f32x4_add(*a, f32x4_mul(p, v128_load(v.add(4 * i) as *const v128)));
                }
            }
        }
        for (i, a) in acc.iter().enumerate().take(n) {
            // SAFETY: c0 + 4i + 4 <= hd.
            unsafe { v128_store(oh.as_mut_ptr().add(c0 + 4 * i) as *mut v128, *a) };
        }
        c0 += 4 * n;
    }
    // The tail (head sizes that are not a multiple of 4), as the portable loop.
    for i in c0..hd {
        let mut o = oh[i];
        for (k, &sc) in scores.iter().enumerate() {
            o += (sc / sum) * values[(first + k) * kvd + off + i];
        }
        oh[i] = o;
    }
    true
}
