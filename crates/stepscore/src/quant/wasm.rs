//! WebAssembly SIMD128 versions of the 32-element dot shape in `portable.rs`
//! and of its f32 dot (which attention's query . key also uses,
//! `cpu/attention.rs`); the K-quants have their own tiles (`wasm_ktile.rs`).
//!
//! int8 x int8: `i16x8_extmul_{low,high}_i8x16` give 16 exact i16 products,
//! widened pairwise into i32 lanes (`i32x4_extadd_pairwise`) and added into
//! the portable kernel's 4-element lane sums. Integer sums are exact, so
//! their order is free.
//!
//! Every float step is the portable kernel's, in the portable order: one f32
//! accumulator per token and lane, scaled by the same products (wasm has no
//! fused multiply-add, and this code uses none), so results equal the
//! portable kernels bit for bit; `tests` (run on wasm32, see
//! docs/ARCHITECTURE.md) compare them.
//!
//! Safety: callers pass rows whose slice lengths agree (`q` is 32 times the
//! block count, every token slice has that block count), which the
//! matmul driver guarantees by construction; the loads below stay inside
//! those slices. Compiled only with `target_feature = "simd128"`, which wasm
//! validates when the module loads (there is no runtime detection).
//!
//! Relaxed SIMD (`i32x4_relaxed_dot_i8x16_i7x16_add`, a 4-way int8 dot with
//! one operand in 0..127, which the unsigned Q4_K/Q5_K/Q4_1/Q5_1 quants fit)
//! is not used: a module that contains one relaxed instruction fails
//! validation in a browser without relaxed SIMD, so it would need a second
//! module per build, chosen in JS before instantiation: twice the package's
//! wasm builds (one per threading mode) and twice what a page downloads and
//! caches, for a speed-up only some browsers would see. Its result is also
//! defined only for operands in range, which the signed formats' quants
//! (Q4_0, Q5_0, Q8_0, Q6_K) are not.

use core::arch::wasm32::*;

use super::act::BlockQ8;
use super::portable::Row32;

/// # Safety
/// `p` points at 16 readable bytes.
#[inline(always)]
unsafe fn load(p: *const i8) -> v128 {
    v128_load(p as *const v128)
}

/// Exact i32 sums of the four groups of four products of 16 quants:
/// lane l = q[4l..4l+4] . a[4l..4l+4] (the portable kernel's lanes).
#[inline(always)]
fn quad_sums(q: v128, a: v128) -> v128 {
    let lo = i32x4_extadd_pairwise_i16x8(i16x8_extmul_low_i8x16(q, a));
    let hi = i32x4_extadd_pairwise_i16x8(i16x8_extmul_high_i8x16(q, a));
    i32x4_add(
        i32x4_shuffle::<0, 2, 4, 6>(lo, hi),
        i32x4_shuffle::<1, 3, 5, 7>(lo, hi),
    )
}

/// The portable `dot32`'s sums: its eight lanes in two vectors (lanes 0..3
/// from the block's first 16 quants, 4..7 from the rest), products rounded
/// before the sums, the `MIN` term on its own, lanes reduced by `lane_tree`.
///
/// # Safety
/// See the module comment.
#[inline(always)]
pub(crate) unsafe fn dot32<const T: usize, const MIN: bool>(
    w: &Row32,
    acts: &[&[BlockQ8]; T],
) -> [f32; T] {
    let nb = w.d.len();
    debug_assert!(w.q.len() == nb * 32 && w.m.len() == nb && acts.iter().all(|a| a.len() == nb));
    let mut lo = [f32x4_splat(0.0); T];
    let mut hi = [f32x4_splat(0.0); T];
    let mut accm = [0.0f32; T];
    let qp = w.q.as_ptr();
    for b in 0..nb {
        let q0 = load(qp.add(32 * b));
        let q1 = load(qp.add(32 * b + 16));
        let d = *w.d.get_unchecked(b);
        for t in 0..T {
            let blk = acts[t].get_unchecked(b);
            let ap = blk.qs.as_ptr();
            let dd = f32x4_splat(d * blk.d);
            let s0 = f32x4_convert_i32x4(quad_sums(q0, load(ap)));
            let s1 = f32x4_convert_i32x4(quad_sums(q1, load(ap.add(16))));
            lo[t] = f32x4_add(lo[t], f32x4_mul(dd, s0));
            hi[t] = f32x4_add(hi[t], f32x4_mul(dd, s1));
            if MIN {
                accm[t] += *w.m.get_unchecked(b) * blk.s;
            }
        }
    }
    let mut out = [0.0f32; T];
    for t in 0..T {
        let mut lanes = [0.0f32; 8];
        v128_store(lanes.as_mut_ptr() as *mut v128, lo[t]);
        v128_store(lanes.as_mut_ptr().add(4) as *mut v128, hi[t]);
        out[t] = super::portable::lane_tree(&lanes) + accm[t];
    }
    out
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
    //! Run on wasm32 itself (`wasm-bindgen-test`, see scripts/test-wasm-kernels.sh):
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
