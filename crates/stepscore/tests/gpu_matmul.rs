//! The GPU matmul kernels against the CPU engine, on whatever adapter wgpu
//! finds (Mesa's llvmpipe in CI). Without an adapter each test prints
//! `SKIPPED: no GPU adapter (...)` and passes, unless STEPSCORE_REQUIRE_GPU=1.
//!
//! Tolerance, every kernel: |gpu - ref| <= 1e-4 * (1 + |ref|), where ref is
//! the product of the (dequantized) f32 weights and x accumulated in f64.
//! The CPU engine's f32 product (`Matrix::to_f32()` then `matmul`) must meet
//! the same bound, so GPU and CPU agree within twice it. Both sides only
//! differ in f32 summation order (and, for quantized weights, in whether
//! q*d + m is rounded before the product), a few ulps of the row's scale.
//! The 32-element formats run two kernels: the plain one below 16 tokens (1
//! and 3 here) and the tiled prefill one (2 rows x 4 tokens an invocation)
//! from 16 (17 and 40), on odd row counts so the last tile's second row is
//! past the end. F16 and BF16 weights have their own kernel, which rounds
//! the activations to 16 bits as the CPU engine does: tests/gpu_float16.rs.
#![cfg(feature = "gpu")]

mod gpu_support;

use gpu_support::{ctx, open, random_matrix, Rng};
use stepscore::ggml::GgmlType;
use stepscore::gpu::{GpuContext, GpuMatrix, GpuOptions, GpuTensor};
use stepscore::model::{Matrix, SharedBytes};

/// f64 product of the f32-expanded weights (the reference of every kernel).
fn reference(w: &Matrix, x: &[f32], n_tokens: usize) -> Vec<f64> {
    let Matrix::F32 { rows, cols, data } = w.to_f32().unwrap() else {
        unreachable!()
    };
    let mut out = vec![0f64; n_tokens * rows];
    for t in 0..n_tokens {
        for r in 0..rows {
            out[t * rows + r] = (0..cols)
                .map(|k| data[r * cols + k] as f64 * x[t * cols + k] as f64)
                .sum();
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
    w.to_f32()
        .unwrap()
        .matmul(&x, n_tokens, &mut cpu, 1)
        .unwrap();
    assert_close(&format!("{what} (CPU engine)"), &cpu, &want);
    eprintln!("{what}: max relative error {worst:.2e}");
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

/// Token counts of the quantized kernels: the plain and the tiled one.
const QUANT_TOKENS: [usize; 4] = [1, 3, 17, 40];

fn check_quant(ty: GgmlType, shapes: &[(usize, usize)], seed: u64) {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(seed);
    for &(rows, cols) in shapes {
        for t in QUANT_TOKENS {
            check(ctx, &mut rng, ty, rows, cols, t);
        }
    }
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
