//! e^x for the decoder's softmax and SiLU, written with only correctly
//! rounded +, -, * and exact bit operations, each rounded on its own, so
//! the WGSL engine (shaders/exp.wgsl, the same steps) computes the same
//! bits: `f32::exp` (glibc, or Rust's libm on wasm) and WGSL's `exp`
//! (whatever the driver does) are not the same function, and one ulp in an
//! activation moves later 8-bit roundings (see quant/portable.rs).
//!
//! Steps: n = round_even(x log2 e); r = (x - n ln2_hi) - n ln2_lo (Cody and
//! Waite: n ln2_hi is exact for |n| < 256); e^r by its Taylor polynomial of
//! degree 7 in Horner form (|r| <= 0.35: truncation < 1e-8 relative); times
//! 2^n built from its bits. The AVX-512 attention (`x86/attention.rs`) takes
//! the same steps sixteen lanes at a time. Within 2 ulp of e^x (tests). Outside
//! [-85, 88] the result is 0 or `f32::MAX` (WGSL has no infinity constant) (e^-85 = 1.2e-37: nothing the
//! decoder adds it to notices it; subnormal results are avoided because
//! GPUs may flush them), NaN stays NaN.

pub(crate) const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split: 0.693145751953125 (15 significant bits) + 1.4286068e-6, as
/// bits (the same bits exp.wgsl names).
pub(crate) const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
pub(crate) const LN2_LO: f32 = f32::from_bits(0x35bf_be8e);
/// 1/k! for k = 7 down to 2.
pub(crate) const C: [f32; 6] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// 1.5 x 2^23, see [`round_even`].
pub(crate) const MAGIC: f32 = 12_582_912.0;

/// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 x 2^23 leaves
/// no fraction bits, so the sum is rounded by the FPU's (default) mode, and
/// the subtraction is exact. The same value as `f32::round_ties_even`, which
/// on baseline x86_64 (no SSE4.1) is a call to libm's `rintf` per element
/// and stops SiLU and softmax loops from vectorizing.
#[inline(always)]
fn round_even(v: f32) -> f32 {
    (v + MAGIC) - MAGIC
}

/// e^x (see the module comment).
#[inline]
pub fn exp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > 88.0 {
        return f32::MAX;
    }
    if x < -85.0 {
        return 0.0;
    }
    let n = round_even(x * LOG2_E);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = C[0];
    for c in &C[1..] {
        p = p * r + c;
    }
    p = p * r + 1.0;
    p = p * r + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::exp;

    fn ulps(a: f32, b: f64) -> f64 {
        let b32 = b as f32;
        let ulp = (f32::from_bits(b32.to_bits() + 1) - b32) as f64;
        (a as f64 - b).abs() / ulp
    }

    #[test]
    fn within_two_ulp_of_exp_over_its_range() {
        let mut worst = 0f64;
        let mut x = -85.0f32;
        while x <= 88.0 {
            let want = (x as f64).exp();
            let e = ulps(exp(x), want);
            assert!(e <= 2.0, "exp({x}) = {} vs {want}: {e} ulp", exp(x));
            worst = worst.max(e);
            x += 0.000_731;
        }
        eprintln!("worst {worst:.2} ulp");
    }

    /// Halves (the ties), their neighbours one ulp away, and a stride over
    /// every bit pattern below 2^22 in magnitude.
    #[test]
    fn round_even_is_round_ties_even() {
        let check = |v: f32| {
            assert_eq!(super::round_even(v), v.round_ties_even(), "{v:e}");
        };
        for k in -1000i32..=1000 {
            let h = k as f32 / 2.0;
            check(h);
            check(f32::from_bits(h.to_bits() + 1));
            if h != 0.0 {
                check(f32::from_bits(h.to_bits() - 1));
            }
        }
        let limit = (4_194_304.0f32).to_bits();
        for bits in (0..limit).step_by(97) {
            check(f32::from_bits(bits));
            check(-f32::from_bits(bits));
        }
    }

    #[test]
    fn edges_are_zero_inf_nan_and_one() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(-85.5), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(88.5), f32::MAX);
        assert_eq!(exp(f32::INFINITY), f32::MAX);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(-85.0) > 0.0 && exp(-85.0).is_normal());
        assert!(exp(88.0).is_finite());
    }
}
