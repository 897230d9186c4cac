//! WebAssembly SIMD128: the portable f32 dot (`portable::dot_f32`, which
//! attention's query . key also uses, `cpu/attention.rs`) with its bits, and
//! the tests of every wasm32 product path. The quantized rows have their own
//! tiles: `ktile.rs` (K-quants) and `tile32.rs` (32-element
//! formats), whose integer sums are exact and whose float steps are the
//! portable kernels' (wasm has no fused multiply-add, and none is used), so
//! results equal the portable kernels bit for bit; `tests` (run on wasm32,
//! see docs/ARCHITECTURE.md) compare them.
//!
//! Compiled only with `target_feature = "simd128"`, which wasm validates
//! when the module loads (there is no runtime detection).
//!
//! Relaxed SIMD (`i16x8_relaxed_dot_i8x16_i7x16`, 16 int8 products with one
//! operand in 0..127, which unsigned K-quant weights fit) is not used: a
//! module that contains one relaxed instruction fails validation in a
//! browser without relaxed SIMD, so it would need a second module per build,
//! chosen in JS before instantiation: twice the package's wasm builds (one
//! per threading mode) and twice what a page downloads and caches. For the
//! K-quants it would buy little: their tiles (`ktile.rs`) already take
//! 8 products per `i32x4_dot_i16x8` (x86 `pmaddwd`) on weights stored as
//! i16 times their scale, i.e. 4 instructions per 16 products with the
//! adds; the relaxed dot is `pmaddubsw` on x86 without AVX-VNNI, and the
//! group scale still needs a `pmaddwd`, so 3 per 16: at most 4/3 of the
//! kernel. Its result is also defined only for operands in range, which the
//! signed formats' quants (Q4_0, Q5_0, Q8_0, Q6_K) are not without an offset.
//! Where the CPU has AVX-VNNI, V8 emits one `vpdpbusd` for it instead; a
//! relaxed K-quant tile built on that (unsigned quants, offsets taken off
//! through the activations' group sums) was measured in Chromium on such an
//! Intel CPU at 5-8% faster end to end than these tiles (docs/BENCHMARKS.md,
//! "Relaxed SIMD, measured"): not worth a third module.

pub(super) mod ktile;
pub(super) mod tile32;
pub(crate) mod values;

use core::arch::wasm32::*;

/// Eight f32 lanes as two vectors: `lanes[l] += w[l] * a[l]` over whole
/// runs of 8, returned as the portable kernels' `[f32; 8]`.
///
/// # Safety
/// `a.len() >= w.len()`.
#[inline(always)]
unsafe fn lanes8(w: &[f32], a: &[f32]) -> [f32; 8] {
    let n8 = w.len() / 8 * 8;
    let (wp, ap) = (w.as_ptr(), a.as_ptr());
    let (mut lo, mut hi) = (f32x4_splat(0.0), f32x4_splat(0.0));
    let mut i = 0;
    while i < n8 {
        let (w0, w1) = (
            v128_load(wp.add(i) as *const v128),
            v128_load(wp.add(i + 4) as *const v128),
        );
        let (a0, a1) = (
            v128_load(ap.add(i) as *const v128),
            v128_load(ap.add(i + 4) as *const v128),
        );
        lo = f32x4_add(lo, f32x4_mul(w0, a0));
        hi = f32x4_add(hi, f32x4_mul(w1, a1));
        i += 8;
    }
    let mut out = [0.0f32; 8];
    v128_store(out.as_mut_ptr() as *mut v128, lo);
    v128_store(out.as_mut_ptr().add(4) as *mut v128, hi);
    out
}

/// Float rows, the portable `dot_f32`'s sums: eight lanes, summed in lane
/// order, plus the tail's own sum. Also attention's query . key (`T = 1`).
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

#[cfg(test)]
mod tests {
    //! Run on wasm32 itself (`wasm-bindgen-test`, see scripts/test/test-wasm-kernels.sh):
    //! each kernel against the portable one, bit for bit.
    use crate::ggml::GgmlType;
    use crate::quant::{matmul_with, QMatrix, QuantizedActs, Simd};
    use wasm_bindgen_test::wasm_bindgen_test;

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn sym(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    /// Random blocks of `ty` whose f16 scales are finite and moderate.
    fn random_blocks(ty: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
        let n = rows * cols / ty.block_elems() * ty.block_bytes();
        let mut w: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        let f16_at: &[usize] = match ty {
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
            GgmlType::Q6K => &[208],
            GgmlType::Q2K => &[80, 82],
            GgmlType::Q3K => &[108],
            _ => &[],
        };
        for blk in w.chunks_exact_mut(ty.block_bytes()) {
            for &o in f16_at {
                let v = crate::quant::f32_to_f16(rng.sym() * 0.05);
                blk[o..o + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
        w
    }

    #[wasm_bindgen_test]
    fn simd128_matmul_equals_the_portable_kernels_bit_for_bit() {
        assert_eq!(Simd::detect(), Simd::Wasm128);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        // 9 tokens: whole tiles and a short one; 1 token: the decode shape.
        // 5 rows: a K-quant group of 4 and a short one.
        let rows = 5;
        for (ty, n_tokens) in [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
            GgmlType::Q4K,
            GgmlType::Q5K,
            GgmlType::Q6K,
            GgmlType::Q2K,
            GgmlType::Q3K,
            GgmlType::F32,
        ]
        .into_iter()
        .flat_map(|ty| [(ty, 9), (ty, 1)])
        {
            // F32: 107 columns, a tail after the runs of 8.
            let cols = match ty.block_elems() {
                256 => 512,
                32 => 96,
                _ => 107,
            };
            let w = if ty == GgmlType::F32 {
                (0..rows * cols)
                    .flat_map(|_| rng.sym().to_le_bytes())
                    .collect()
            } else {
                random_blocks(ty, rows, cols, &mut rng)
            };
            let m = QMatrix::new(ty, rows, cols, &w).unwrap();
            let x: Vec<f32> = (0..n_tokens * cols)
                .map(|i| rng.sym() * if i % 13 == 0 { 30.0 } else { 1.0 })
                .collect();
            let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
            let mut want = vec![f32::NAN; n_tokens * rows];
            let mut got = vec![f32::NAN; n_tokens * rows];
            matmul_with(&m, None, &acts, &mut want, 1, Simd::Portable).unwrap();
            matmul_with(&m, None, &acts, &mut got, 1, Simd::Wasm128).unwrap();
            assert!(want.iter().all(|v| v.is_finite()), "{ty:?}: {want:?}");
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits()),
                "{ty:?} x {n_tokens} tokens: {got:?} vs {want:?}"
            );
        }
    }

    /// Extreme integers: weights -128/127 (Q8_0) against activations of
    /// +-127 in every lane, where an i16 overflow would show.
    #[wasm_bindgen_test]
    fn simd128_int8_extremes_are_exact() {
        let mut w = vec![0u8; 2 * 34];
        for (r, blk) in w.chunks_exact_mut(34).enumerate() {
            blk[..2].copy_from_slice(&crate::quant::f32_to_f16(1.0).to_le_bytes());
            for b in &mut blk[2..] {
                *b = if r == 0 { 0x80 } else { 0x7f }; // -128, 127
            }
        }
        let m = QMatrix::new(GgmlType::Q8_0, 2, 32, &w).unwrap();
        // Token 0: +-1 alternating (quants +-127); token 1: all 1 (quants 127).
        let x: Vec<f32> = (0..64)
            .map(|i| if i < 32 && i % 2 == 0 { -1.0 } else { 1.0 })
            .collect();
        let acts = QuantizedActs::for_weight(GgmlType::Q8_0, &x, 2, 32).unwrap();
        let mut want = vec![0.0; 4];
        let mut got = vec![0.0; 4];
        matmul_with(&m, None, &acts, &mut want, 1, Simd::Portable).unwrap();
        matmul_with(&m, None, &acts, &mut got, 1, Simd::Wasm128).unwrap();
        assert_eq!(got, want);
        // out[t * 2 + r]: alternating signs sum to 0; all-127 to 32 * 127 * w
        // times the activation scale 1/127 (rounded through f16).
        let d = crate::quant::f16_to_f32(crate::quant::f32_to_f16(1.0 / 127.0));
        assert_eq!(want[..2], [0.0, 0.0]);
        assert_eq!(want[2], d * (32 * 127 * -128) as f32);
        assert_eq!(want[3], d * (32 * 127 * 127) as f32);
    }
}
