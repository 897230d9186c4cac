//! aarch64 Advanced SIMD (NEON): the portable f32 dot (`portable::dot_f32`)
//! with its bits, the integer sums both tile paths share, and the tests of
//! every aarch64 product path. The quantized rows have their own tiles:
//! `ktile.rs` (K-quants) and `tile32.rs` (32-element formats), whose
//! integer sums are exact and whose float steps are the portable kernels'
//! (a multiply, then an add: no fused multiply-add, which the portable,
//! x86, wasm and WGSL kernels do not use either), so results equal the
//! portable kernels bit for bit.
//!
//! Two levels, chosen at run time (`Simd::detect`): `Neon`, ARMv8.0, which
//! every aarch64 CPU has, multiplies int8 with the widening `smull`; and
//! `NeonDot`, with the dot-product extension (ARMv8.2+), sums four int8
//! products per lane with one `sdot`. `sdot` is written as inline assembly
//! because its Rust intrinsic is not stable yet (`stdarch_neon_dotprod`);
//! it runs only inside functions compiled with the `dotprod` feature.
//! The i8mm extension (`smmla`, 2x2 tiles of 8-element products) is not
//! used: it needs the activations interleaved by token pairs, another
//! quantizer layout.

pub(super) mod ktile;
pub(super) mod tile32;

use core::arch::aarch64::*;

/// Lane l = the exact sum of the products of elements 4l..4l+3 of `w` and
/// `a` (16 int8 each). With `DOT`, one `sdot`; without, two widening
/// multiplies (each product fits i16: |w| <= 128, |a| <= 127) and
/// widening pairwise adds.
///
/// # Safety
/// With `DOT`, the CPU has the dot-product extension and the caller is
/// compiled with `target_feature = "dotprod"`.
#[inline(always)]
pub(super) unsafe fn quad_sums<const DOT: bool>(w: int8x16_t, a: int8x16_t) -> int32x4_t {
    if DOT {
        let mut acc = vdupq_n_s32(0);
        core::arch::asm!(
            "sdot {acc:v}.4s, {w:v}.16b, {a:v}.16b",
            acc = inout(vreg) acc,
            w = in(vreg) w,
            a = in(vreg) a,
            options(pure, nomem, nostack, preserves_flags)
        );
        acc
    } else {
        let lo = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(a)));
        let hi = vpaddlq_s16(vmull_high_s8(w, a));
        vpaddq_s32(lo, hi)
    }
}

/// Lane r = the sum of `s[r]`'s four lanes (exact integers).
#[inline(always)]
pub(super) unsafe fn row_sums(s: &[int32x4_t; 4]) -> int32x4_t {
    vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]))
}

/// Eight f32 lanes as two vectors: `lanes[l] += w[l] * a[l]` over whole
/// runs of 8, returned as the portable kernels' `[f32; 8]`.
///
/// # Safety
/// `a.len() >= w.len()`.
#[inline(always)]
unsafe fn lanes8(w: &[f32], a: &[f32]) -> [f32; 8] {
    let n8 = w.len() / 8 * 8;
    let (wp, ap) = (w.as_ptr(), a.as_ptr());
    let (mut lo, mut hi) = (vdupq_n_f32(0.0), vdupq_n_f32(0.0));
    let mut i = 0;
    while i < n8 {
        lo = vaddq_f32(lo, vmulq_f32(vld1q_f32(wp.add(i)), vld1q_f32(ap.add(i))));
        hi = vaddq_f32(
            hi,
            vmulq_f32(vld1q_f32(wp.add(i + 4)), vld1q_f32(ap.add(i + 4))),
        );
        i += 8;
    }
    let mut out = [0.0f32; 8];
    vst1q_f32(out.as_mut_ptr(), lo);
    vst1q_f32(out.as_mut_ptr().add(4), hi);
    out
}

/// Float rows, the portable `dot_f32`'s sums: eight lanes, summed in lane
/// order, plus the tail's own sum.
///
/// # Safety
/// Every token slice is as long as `w`.
#[inline(always)]
pub(crate) unsafe fn dot_f32<const T: usize>(w: &[f32], acts: &[&[f32]; T]) -> [f32; T] {
    let n8 = w.len() / 8 * 8;
    let mut out = [0.0f32; T];
    for t in 0..T {
        let a = acts[t];
        debug_assert!(a.len() == w.len());
        let mut tail = 0.0f32;
        for j in n8..w.len() {
            tail += w.get_unchecked(j) * a.get_unchecked(j);
        }
        out[t] = lanes8(w, a).iter().sum::<f32>() + tail;
    }
    out
}
