//! The GPU matmul kernels against the CPU engine, on whatever adapter wgpu
//! finds (Mesa's llvmpipe in CI). Without an adapter each test prints
//! `SKIPPED: no GPU adapter (...)` and passes, unless STEPSCORE_REQUIRE_GPU=1.
//!
//! Tolerance, every kernel: |gpu - ref| <= 1e-4 * (1 + |ref|), where ref is
//! the product accumulated in f64 of the (dequantized) f32 weights and what
//! they multiply: x itself for f32 weights; for quantized weights x
//! rounded to 8 bits per block by the CPU engine's quantizers (llama.cpp's
//! Q8_1 / Q8_K reference code, exact against its fixtures), dequantized.
//! The CPU engine's own product (`Matrix::matmul`: f32, or 8-bit activations
//! with integer block sums) must meet the same bound; measured maxima are
//! printed. For quantized weights the two engines take the same float steps
//! in the same order (quant/portable.rs), so on llvmpipe the GPU's outputs
//! must equal the CPU's bit for bit; f32 weights differ in summation order.
//! The device's 8-bit activations themselves equal the CPU's bit for bit.
//! Quantized kernels run twice: with WGSL's `dot4I8Packed` and with its
//! core-WGSL emulation (`GpuOptions::emulate_packed_dot`). F16 and BF16
//! weights have their own kernel, which rounds the activations to 16 bits
//! as the CPU engine does: tests/gpu_float16.rs.
#![cfg(feature = "gpu")]

use crate::gpu_support;

use gpu_support::{ctx, emulated_ctx, open, random_matrix, Rng};
use stepscore::engine::testing::ops::{quantize_activations, ActBlocks};
use stepscore::engine::testing::GpuTensor;
use stepscore::engine::testing::{
    bf16_to_f32, dequantize_row, f16_to_f32, f32_to_bf16, f32_to_f16, quantize_row_q8_1,
    quantize_row_q8_k,
};
use stepscore::engine::{GgmlType, GpuContext, GpuMatrix, GpuOptions, Matrix, SharedBytes};

/// What a `w` matrix multiplies for input `x`: x rounded to 8 bits per
/// block by the CPU's quantizers and dequantized for quantized weights
/// (Q8_1 has the quants and scale of Q8_0; the Q8_1 blocks' f16 sums `s`
/// come back too), x rounded through f16 / bf16 for f16 / bf16 weights
/// (ggml's vec_dot_types), x itself for f32 ones.
fn activations(w: &Matrix, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let cols = w.cols();
    let Some(act) = w.act_type() else {
        return (x.to_vec(), Vec::new());
    };
    if matches!(act, GgmlType::F16 | GgmlType::BF16) {
        let round = |v: f32| match act {
            GgmlType::F16 => f16_to_f32(f32_to_f16(v)),
            _ => bf16_to_f32(f32_to_bf16(v)),
        };
        return (x.iter().map(|&v| round(v)).collect(), Vec::new());
    }
    let act = if act == GgmlType::Q8K {
        act
    } else {
        GgmlType::Q8_1
    };
    let mut out = vec![0f32; x.len()];
    let mut sums = Vec::new();
    for (xr, or) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
        let mut q = vec![0u8; cols / act.block_elems() * act.block_bytes()];
        if act == GgmlType::Q8K {
            quantize_row_q8_k(xr, &mut q).unwrap();
        } else {
            quantize_row_q8_1(xr, &mut q).unwrap();
            sums.extend(
                q.chunks_exact(36)
                    .map(|b| f16_to_f32(u16::from_le_bytes([b[2], b[3]]))),
            );
        }
        dequantize_row(act, &q, or).unwrap();
    }
    (out, sums)
}

/// f64 product of the f32-expanded weights and what they multiply (the
/// reference of every kernel). For Q4_1 / Q5_1 (value q * d + m) ggml's
/// product takes the block's m times the activation block's f16 sum s, not
/// times the sum of its dequantized values: that term is swapped in.
fn reference(w: &Matrix, x: &[f32], n_tokens: usize) -> Vec<f64> {
    let (x, sums) = activations(w, x);
    let mins: Option<Vec<f32>> = match w {
        Matrix::Quant {
            ty: ty @ (GgmlType::Q4_1 | GgmlType::Q5_1),
            bytes,
            ..
        } => Some(
            bytes
                .as_slice()
                .chunks_exact(ty.block_bytes())
                .map(|b| f16_to_f32(u16::from_le_bytes([b[2], b[3]])))
                .collect(),
        ),
        _ => None,
    };
    let Matrix::F32 { rows, cols, data } = w.to_f32().unwrap() else {
        unreachable!()
    };
    let nb = cols / 32;
    let mut out = vec![0f64; n_tokens * rows];
    for t in 0..n_tokens {
        for r in 0..rows {
            let mut v: f64 = (0..cols)
                .map(|k| data[r * cols + k] as f64 * x[t * cols + k] as f64)
                .sum();
            if let Some(m) = &mins {
                for b in 0..nb {
                    let block_sum: f64 = x[t * cols + 32 * b..t * cols + 32 * b + 32]
                        .iter()
                        .map(|&a| a as f64)
                        .sum();
                    v += m[r * nb + b] as f64 * (sums[t * nb + b] as f64 - block_sum);
                }
            }
            out[t * rows + r] = v;
        }
    }
    out
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= 1e-4 * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w} (|Δ| = {err:e})"
        );
        worst = worst.max(err / (1.0 + w.abs()));
    }
    worst
}

/// Checks one kernel on one shape against the f64 reference and the CPU engine.
fn check(ctx: &GpuContext, rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize, n_tokens: usize) {
    let w = random_matrix(rng, ty, rows, cols);
    let x: Vec<f32> = (0..n_tokens * cols).map(|_| rng.f()).collect();
    let what = format!("{} {rows}x{cols}, {n_tokens} tokens", ty.name());

    let g = GpuMatrix::upload(ctx, &w).unwrap();
    let got = g.matmul_slice(ctx, &x, n_tokens).unwrap();
    let want = reference(&w, &x, n_tokens);
    let worst = assert_close(&what, &got, &want);

    let mut cpu = vec![0f32; n_tokens * rows];
    w.matmul(&x, n_tokens, &mut cpu, 1).unwrap();
    let cpu_worst = assert_close(&format!("{what} (CPU engine)"), &cpu, &want);
    let packed = match w.act_type() {
        Some(GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8K) if ctx.has_packed_dot() => {
            ", dot4I8Packed"
        }
        _ => "",
    };
    let differ = got
        .iter()
        .zip(&cpu)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    let llvmpipe = ctx.adapter().name.to_ascii_lowercase().contains("llvmpipe");
    if llvmpipe
        && w.act_type()
            .is_some_and(|a| !matches!(a, GgmlType::F16 | GgmlType::BF16))
    {
        assert_eq!(
            differ, 0,
            "{what}: outputs differ from the CPU engine's bits"
        );
    }
    eprintln!(
        "{what}{packed}: max relative error {worst:.2e} (CPU engine {cpu_worst:.2e}); \
         {differ} of {} outputs differ from the CPU engine's bits",
        got.len()
    );
}

const TOKENS: [usize; 3] = [1, 3, 17];

#[test]
fn f32_kernel_matches_the_cpu_engine_on_ragged_shapes() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (rows, cols) in [(67, 96), (1, 1), (64, 5), (130, 33), (3, 160)] {
        for t in TOKENS {
            check(ctx, &mut rng, GgmlType::F32, rows, cols, t);
        }
    }
}

/// Both integer dot paths: `dot4I8Packed` (where naga has it: always
/// natively) and its emulation.
fn check_quant(ty: GgmlType, shapes: &[(usize, usize)], seed: u64) {
    let Some(ctx) = ctx() else { return };
    let Some(emulated) = emulated_ctx() else {
        return;
    };
    assert!(!emulated.has_packed_dot());
    for c in [ctx, emulated] {
        let mut rng = Rng(seed);
        for &(rows, cols) in shapes {
            for t in TOKENS {
                check(c, &mut rng, ty, rows, cols, t);
            }
        }
    }
}

/// Rows of `cols` values that exercise the quantizers' edge cases: random
/// magnitudes over six decades, rounding ties (a block whose largest value
/// is 127 has d = 1, so x.5 values are ties), an all-zero block, tiny
/// values whose scale is an f16 subnormal, and repeated extremes of both
/// signs (the K-quant scale keys on the first).
fn quantizer_inputs(rng: &mut Rng, n_tokens: usize, cols: usize) -> Vec<f32> {
    let mut x: Vec<f32> = (0..n_tokens * cols)
        .map(|i| rng.f() * 10f32.powi((i % 7) as i32 - 3))
        .collect();
    for (t, row) in x.chunks_exact_mut(cols).enumerate() {
        match t % 4 {
            0 => {
                for (i, v) in row.iter_mut().enumerate() {
                    *v = if i % 32 == 0 {
                        127.0
                    } else {
                        (i % 9) as f32 - 4.5
                    };
                }
                row[5] = -127.0;
            }
            1 => {
                row[..32].fill(0.0);
                for v in &mut row[32..64] {
                    *v *= 1e-7;
                }
            }
            2 => {
                row[3] = -50.0;
                row[7] = 50.0;
            }
            _ => {}
        }
    }
    x
}

#[test]
fn activations_are_quantized_on_the_device_exactly_as_on_the_cpu() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(0xA11CE);
    let (n, cols) = (8, 512);
    let x = quantizer_inputs(&mut rng, n, cols);
    let xt = GpuTensor::from_slice(ctx, &x).unwrap();
    // Q4_1 weights multiply Q8_1 blocks: compare all three fields.
    let ActBlocks::Q8(got) = quantize_activations(ctx, &xt, n, cols, GgmlType::Q4_1).unwrap()
    else {
        panic!("Q4_1 takes 32-element blocks")
    };
    let mut want = vec![0u8; n * cols / 32 * 36];
    quantize_row_q8_1(&x, &mut want).unwrap();
    assert_eq!(got.len(), want.len() / 36);
    for (i, (g, w)) in got.iter().zip(want.chunks_exact(36)).enumerate() {
        let d = f16_to_f32(u16::from_le_bytes([w[0], w[1]]));
        let s = f16_to_f32(u16::from_le_bytes([w[2], w[3]]));
        let qs: Vec<i8> = w[4..].iter().map(|&b| b as i8).collect();
        assert_eq!(g.qs.to_vec(), qs, "Q8_1 block {i}: quants");
        assert_eq!(
            (g.d.to_bits(), g.s.to_bits()),
            (d.to_bits(), s.to_bits()),
            "Q8_1 block {i}: d {d} s {s}, got {} {}",
            g.d,
            g.s
        );
    }
    let ActBlocks::Q8K(got) = quantize_activations(ctx, &xt, n, cols, GgmlType::Q6K).unwrap()
    else {
        panic!("Q6_K takes 256-element blocks")
    };
    let mut want = vec![0u8; n * cols / 256 * 292];
    quantize_row_q8_k(&x, &mut want).unwrap();
    for (i, (g, w)) in got.iter().zip(want.chunks_exact(292)).enumerate() {
        let d = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let qs: Vec<i8> = w[4..260].iter().map(|&b| b as i8).collect();
        let bsums: Vec<i16> = w[260..]
            .chunks_exact(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(g.qs.to_vec(), qs, "Q8_K block {i}: quants");
        assert_eq!(g.bsums.to_vec(), bsums, "Q8_K block {i}: sums");
        assert_eq!(
            g.d.to_bits(),
            d.to_bits(),
            "Q8_K block {i}: d {d}, got {}",
            g.d
        );
    }
    // Float weights have no 8-bit form.
    assert!(quantize_activations(ctx, &xt, n, cols, GgmlType::F32).is_err());
}

const SHAPES_32: [(usize, usize); 3] = [(67, 96), (67, 160), (129, 32)];
const SHAPES_256: [(usize, usize); 2] = [(67, 256), (5, 512)];

#[test]
fn q8_0_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q8_0, &SHAPES_32, 1);
}

#[test]
fn q4_0_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q4_0, &SHAPES_32, 2);
}

#[test]
fn q4_1_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q4_1, &SHAPES_32, 3);
}

#[test]
fn q5_0_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q5_0, &SHAPES_32, 6);
}

#[test]
fn q5_1_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q5_1, &SHAPES_32, 7);
}

#[test]
fn q4_k_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q4K, &SHAPES_256, 4);
}

#[test]
fn q5_k_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q5K, &SHAPES_256, 8);
}

/// Every kernel on a device created without SHADER_F16 and SUBGROUP (what
/// Chromium's SwiftShader WebGPU adapter offers): the kernels compute in
/// f32 and read f16 scales with core WGSL's `unpack2x16float`, so they
/// must compile and match on such a device too.
#[test]
fn every_kernel_runs_on_a_device_without_shader_f16() {
    let Some(ctx) = open(GpuOptions {
        baseline_features: true,
        ..Default::default()
    }) else {
        return;
    };
    assert!(!ctx.has_shader_f16());
    let mut rng = Rng(9);
    for (ty, cols) in [
        (GgmlType::F32, 96),
        (GgmlType::Q8_0, 96),
        (GgmlType::Q4_0, 96),
        (GgmlType::Q4_1, 96),
        (GgmlType::Q5_0, 96),
        (GgmlType::Q5_1, 96),
        (GgmlType::Q4K, 256),
        (GgmlType::Q5K, 256),
        (GgmlType::Q6K, 256),
    ] {
        check(&ctx, &mut rng, ty, 67, cols, 3);
    }
}

#[test]
fn q6_k_kernel_matches_the_cpu_engine() {
    check_quant(GgmlType::Q6K, &SHAPES_256, 5);
}

#[test]
fn load_time_quantized_weights_match() {
    // The CPU engine's own Q8_0/Q4_0 quantizer output, as a model load makes it.
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(11);
    for ty in [GgmlType::Q8_0, GgmlType::Q4_0] {
        let f = random_matrix(&mut rng, GgmlType::F32, 67, 96);
        let w = f.quantized(ty).unwrap();
        let x: Vec<f32> = (0..3 * 96).map(|_| rng.f()).collect();
        let got = GpuMatrix::upload(ctx, &w)
            .unwrap()
            .matmul_slice(ctx, &x, 3)
            .unwrap();
        assert_close(ty.name(), &got, &reference(&w, &x, 3));
    }
}

#[test]
fn weights_over_the_binding_limit_are_split_by_rows() {
    // 67 Q4_1 rows of 96 columns take 3 blocks x 20 bytes = 60 bytes each; a
    // 610-byte limit holds 10 rows, so 7 chunks (the last of 7 rows).
    let Some(ctx) = open(GpuOptions {
        max_storage_binding_size: Some(610),
        ..Default::default()
    }) else {
        return;
    };
    let mut rng = Rng(21);
    let w = random_matrix(&mut rng, GgmlType::Q4_1, 67, 96);
    let g = GpuMatrix::upload(&ctx, &w).unwrap();
    assert_eq!(g.chunk_count(), 7);
    let x: Vec<f32> = (0..17 * 96).map(|_| rng.f()).collect();
    assert_close(
        "split Q4_1",
        &g.matmul_slice(&ctx, &x, 17).unwrap(),
        &reference(&w, &x, 17),
    );

    // f32 rows of 5 columns (20 bytes): 610 bytes hold 30 rows -> 3 chunks.
    let w = random_matrix(&mut rng, GgmlType::F32, 67, 5);
    let g = GpuMatrix::upload(&ctx, &w).unwrap();
    assert_eq!(g.chunk_count(), 3);
    let x: Vec<f32> = (0..3 * 5).map(|_| rng.f()).collect();
    assert_close(
        "split F32",
        &g.matmul_slice(&ctx, &x, 3).unwrap(),
        &reference(&w, &x, 3),
    );

    // A single row over the limit is an error that names the limit.
    let w = random_matrix(&mut rng, GgmlType::F32, 2, 200);
    let err = GpuMatrix::upload(&ctx, &w)
        .err()
        .expect("an 800-byte row cannot fit 610 bytes")
        .to_string();
    assert!(err.contains("610"), "{err}");
}

#[test]
fn chained_matmuls_stay_on_the_device() {
    // y = W2 · (W1 · x): the first output is the second's input without a
    // readback in between.
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(31);
    let w1 = random_matrix(&mut rng, GgmlType::Q8_0, 64, 96);
    let w2 = random_matrix(&mut rng, GgmlType::Q4_1, 67, 64);
    let x: Vec<f32> = (0..3 * 96).map(|_| rng.f()).collect();
    let (g1, g2) = (
        GpuMatrix::upload(ctx, &w1).unwrap(),
        GpuMatrix::upload(ctx, &w2).unwrap(),
    );
    let xt = GpuTensor::from_slice(ctx, &x).unwrap();
    let h = g1.matmul(ctx, &xt, 3).unwrap();
    let y = g2.matmul(ctx, &h, 3).unwrap().to_vec(ctx).unwrap();
    let h_ref: Vec<f32> = reference(&w1, &x, 3).iter().map(|&v| v as f32).collect();
    assert_close("chained", &y, &reference(&w2, &h_ref, 3));
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(41);
    let w = random_matrix(&mut rng, GgmlType::Q4_1, 4, 32);
    let g = GpuMatrix::upload(ctx, &w).unwrap();
    let err = g.matmul_slice(ctx, &[0.0; 31], 1).unwrap_err().to_string();
    assert!(err.contains("32") && err.contains("31"), "{err}");
    assert!(g.matmul_slice(ctx, &[], 0).unwrap().is_empty());
    // Q3_K has a CPU kernel but no GPU one: refused by name. (Q8_K is no
    // weight type at all: `Matrix::quant` refuses it before any upload.)
    let q3k = Matrix::quant(GgmlType::Q3K, 1, 256, SharedBytes::owned(vec![0; 110])).unwrap();
    let err = GpuMatrix::upload(ctx, &q3k)
        .err()
        .expect("no Q3_K kernel")
        .to_string();
    assert!(err.contains("Q3_K"), "{err}");
    assert!(Matrix::quant(GgmlType::Q8K, 1, 256, SharedBytes::owned(vec![0; 292])).is_err());
}

#[test]
fn five_hundred_matmuls_keep_buffers_flat() {
    let Some(ctx) = open(GpuOptions::default()) else {
        return;
    };
    let mut rng = Rng(51);
    let w = random_matrix(&mut rng, GgmlType::Q4_1, 67, 96);
    let g = GpuMatrix::upload(&ctx, &w).unwrap();
    let x: Vec<f32> = (0..17 * 96).map(|_| rng.f()).collect();
    let want = reference(&w, &x, 17);
    // Warm up: the pool fills to its steady state on the first calls.
    for _ in 0..3 {
        g.matmul_slice(&ctx, &x, 17).unwrap();
    }
    let before = ctx.pool_stats();
    let pipelines = ctx.pipeline_count();
    for i in 0..500 {
        let y = g.matmul_slice(&ctx, &x, 17).unwrap();
        if i % 100 == 0 {
            assert_close("repeated", &y, &want);
        }
    }
    let after = ctx.pool_stats();
    eprintln!("pool before {before:?}, after {after:?}");
    assert_eq!(before.live_buffers, after.live_buffers);
    assert_eq!(before.live_bytes, after.live_bytes);
    assert_eq!(pipelines, ctx.pipeline_count());
    // Weights plus the steady state of x, y, params and staging: a handful.
    assert!(after.live_buffers <= 8, "{after:?}");
    drop(g);
    ctx.trim_pool();
    assert_eq!(ctx.pool_stats().live_buffers, 0);
}

#[test]
fn adapters_are_listed_with_features_and_limits() {
    let Some(ctx) = ctx() else { return };
    let all = GpuContext::adapters(None);
    assert!(all.iter().any(|a| a.name == ctx.adapter().name), "{all:?}");
    for a in &all {
        eprintln!("{a}");
        assert!(
            a.limits.max_storage_buffer_binding_size > 0
                && a.limits.max_compute_workgroup_size_x >= 64
        );
    }
    assert!(!ctx.adapter().reason.is_empty());
}

#[test]
fn a_lost_device_is_an_error_on_every_later_call_not_a_panic() {
    let Some(ctx) = open(GpuOptions::default()) else {
        return;
    };
    let mut rng = Rng(61);
    let w = random_matrix(&mut rng, GgmlType::Q8_0, 8, 32);
    let g = GpuMatrix::upload(&ctx, &w).unwrap();
    let x: Vec<f32> = (0..32).map(|_| rng.f()).collect();
    assert_eq!(g.matmul_slice(&ctx, &x, 1).unwrap().len(), 8);
    ctx.destroy_device();
    for _ in 0..2 {
        let err = g.matmul_slice(&ctx, &x, 1).unwrap_err().to_string();
        assert!(err.contains("lost"), "{err}");
    }
    assert!(GpuMatrix::upload(&ctx, &w).is_err());
}
