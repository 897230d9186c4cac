//! The 16-bit float path of the WGSL engine (F16 and BF16 weights kept
//! 16-bit on the device, matmul_float16.wgsl) against the CPU engine, on
//! whatever adapter wgpu finds (Mesa's llvmpipe in CI, which has
//! `shader-f16`). Without an adapter each test prints `SKIPPED: no GPU
//! adapter (...)` and passes, unless STEPSCORE_REQUIRE_GPU=1.
//!
//! Both sides compute the same thing: activations rounded to the weights'
//! type (the CPU engine's vec_dot_type for float weights), exact widening,
//! f32 products summed in eight lanes, the lanes in order, then the tail.
//! So:
//! - the rounding kernel equals the CPU's f32_to_f16 / f32_to_bf16 bit for
//!   bit on every class of input (ties, subnormals, overflow, NaN, signs);
//! - the two F16 paths (f16 loads on a device with `shader-f16`, u32 words
//!   and `unpack2x16float` on one without) give bit-identical outputs;
//! - GPU and CPU engine differ only where the CPU's AVX2 kernel fuses a
//!   multiply-add the GPU rounds (or the reverse):
//!   |gpu - cpu| <= 1e-6 · Σ_k |w_k · x'_k| (x' the rounded activations),
//!   the same bound against an f64 product of the same values; the
//!   measured maximum is printed (about 1e-7 on llvmpipe);
//! - whole models within the whole-model bounds of gpu_model.rs.
#![cfg(feature = "gpu")]

use crate::gpu_support;

use std::sync::Arc;

use gpu_support::{arc_ctx, ctx, max_rel, open, Rng};
use stepscore::engine::testing::round_acts16;
use stepscore::engine::testing::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use stepscore::engine::{
    Float16Path, GgmlType, GgufModel, GpuContext, GpuMatrix, GpuOptions, GpuTransformer,
    HfCheckpoint, Matrix, SharedBytes, Transformer,
};

const TOKENS: [usize; 4] = [1, 3, 17, 40];
/// Ragged shapes: rows past a 64-row workgroup, columns below one 8-value
/// group, between groups, and long rows with a tail.
const SHAPES: [(usize, usize); 6] = [(67, 96), (1, 1), (64, 5), (130, 33), (3, 160), (33, 1003)];
const TOL: f64 = 1e-6;

fn baseline() -> Option<GpuContext> {
    open(GpuOptions {
        baseline_features: true,
        ..Default::default()
    })
}

/// The activations the CPU engine multiplies F16/BF16 weights with.
fn rounded(ty: GgmlType, x: &[f32]) -> Vec<f32> {
    x.iter()
        .map(|&v| match ty {
            GgmlType::F16 => f16_to_f32(f32_to_f16(v)),
            _ => bf16_to_f32(f32_to_bf16(v)),
        })
        .collect()
}

/// Largest |got - want| / Σ|w·x'| of one product, checked against TOL.
fn check_against(what: &str, got: &[f32], want: &[f32], scale: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (i, ((&g, &w), &s)) in got.iter().zip(want).zip(scale).enumerate() {
        let err = (g as f64 - w as f64).abs();
        let rel = if s == 0.0 { err } else { err / s };
        assert!(
            rel <= TOL,
            "{what}: element {i}: got {g}, want {w} (|Δ| = {err:e}, Σ|w·x| = {s:e})"
        );
        worst = worst.max(rel);
    }
    worst
}

/// f64 products of the widened weights with the rounded activations, and
/// their Σ|w·x'| scales.
fn reference(w: &Matrix, x16: &[f32], n: usize) -> (Vec<f32>, Vec<f64>) {
    let Matrix::F32 { rows, cols, data } = w.to_f32().unwrap() else {
        unreachable!()
    };
    let mut out = vec![0f32; n * rows];
    let mut scale = vec![0f64; n * rows];
    for t in 0..n {
        for r in 0..rows {
            let (mut s, mut a) = (0f64, 0f64);
            for k in 0..cols {
                let p = data[r * cols + k] as f64 * x16[t * cols + k] as f64;
                s += p;
                a += p.abs();
            }
            out[t * rows + r] = s as f32;
            scale[t * rows + r] = a;
        }
    }
    (out, scale)
}

fn random_float16(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Matrix {
    let v = rng.vec(rows * cols, 1.0);
    let bytes = stepscore::engine::testing::quantize_weights(ty, &v, rows, cols).unwrap();
    Matrix::quant(ty, rows, cols, SharedBytes::owned(bytes)).unwrap()
}

/// One matrix on both devices and the CPU engine; returns the worst
/// relative error against the CPU engine and against the f64 product.
fn case(
    with: &GpuContext,
    without: &GpuContext,
    w: &Matrix,
    x: &[f32],
    n: usize,
    what: &str,
) -> (f64, f64) {
    let ty = match w {
        Matrix::Quant { ty, .. } => *ty,
        Matrix::F32 { .. } => unreachable!(),
    };
    let a = GpuMatrix::upload(with, w).unwrap();
    let b = GpuMatrix::upload(without, w).unwrap();
    assert_eq!(a.weight_type(), ty, "{what}: stays {}", ty.name());
    let got = a.matmul_slice(with, x, n).unwrap();
    let got_words = b.matmul_slice(without, x, n).unwrap();
    let same = got
        .iter()
        .zip(&got_words)
        .all(|(p, q)| p.to_bits() == q.to_bits());
    assert!(same, "{what}: the f16 and word paths differ");

    let mut cpu = vec![0f32; n * w.rows()];
    w.matmul(x, n, &mut cpu, 1).unwrap();
    let (want, scale) = reference(w, &rounded(ty, x), n);
    let e_cpu = check_against(&format!("{what} vs CPU engine"), &got, &cpu, &scale);
    let e_ref = check_against(&format!("{what} vs f64"), &got, &want, &scale);
    (e_cpu, e_ref)
}

fn kernel_matches(ty: GgmlType, seed: u64) {
    let Some(with) = ctx() else { return };
    let Some(without) = baseline() else { return };
    assert_eq!(without.float16_path(), Float16Path::Words);
    if with.float16_path() != Float16Path::ShaderF16 {
        eprintln!(
            "note: {} has no shader-f16: both devices take the word path",
            with.adapter().name
        );
    }
    let mut rng = Rng(seed);
    let (mut worst_cpu, mut worst_ref) = (0f64, 0f64);
    for (rows, cols) in SHAPES {
        let w = random_float16(&mut rng, ty, rows, cols);
        for n in TOKENS {
            let x = rng.vec(n * cols, 2.0);
            let what = format!("{} {rows}x{cols}, {n} tokens", ty.name());
            let (c, r) = case(with, &without, &w, &x, n, &what);
            worst_cpu = worst_cpu.max(c);
            worst_ref = worst_ref.max(r);
        }
    }
    eprintln!(
        "{}: max |gpu - cpu| / Σ|w·x| = {worst_cpu:.2e}, max |gpu - f64| / Σ|w·x| = {worst_ref:.2e} \
         (bound {TOL:e}); f16 and word paths bit-identical",
        ty.name()
    );
}

#[test]
fn f16_kernel_matches_the_cpu_engine_on_both_paths() {
    kernel_matches(GgmlType::F16, 0xF16);
}

#[test]
fn bf16_kernel_matches_the_cpu_engine_on_both_paths() {
    kernel_matches(GgmlType::BF16, 0xBF16);
}

/// f16 subnormal weights (and activations that round to f16 subnormals)
/// are kept, not flushed, on both paths: their products are far above
/// f32's subnormal range, and a flush would miss the bound by orders of
/// magnitude.
#[test]
fn f16_subnormals_are_kept_on_both_paths() {
    let Some(with) = ctx() else { return };
    let Some(without) = baseline() else { return };
    let mut rng = Rng(5);
    let (rows, cols) = (67, 45);
    // Every weight a subnormal f16 (bits 0x0001..0x03ff, either sign).
    let bytes: Vec<u8> = (0..rows * cols)
        .flat_map(|_| {
            let m = 1 + rng.below(0x3ff) as u16;
            let s = if rng.below(2) == 0 { 0 } else { 0x8000 };
            (s | m).to_le_bytes()
        })
        .collect();
    let w = Matrix::quant(GgmlType::F16, rows, cols, SharedBytes::owned(bytes)).unwrap();
    let x = rng.vec(3 * cols, 1.0);
    case(with, &without, &w, &x, 3, "subnormal F16 weights");
    // Activations of 1e-7..6e-5 round to f16 subnormals.
    let w = random_float16(&mut rng, GgmlType::F16, rows, cols);
    let x = rng.vec(3 * cols, 6e-5);
    let got = GpuMatrix::upload(with, &w)
        .unwrap()
        .matmul_slice(with, &x, 3)
        .unwrap();
    assert!(
        got.iter().any(|&v| v != 0.0),
        "subnormal activations flushed"
    );
    case(with, &without, &w, &x, 3, "subnormal f16 activations");
}

/// The rounding kernel against the CPU engine's conversions, bit for bit:
/// ties to even at every scale, the subnormal range and its edges, the
/// largest finite values and the overflow threshold (65520 rounds to
/// infinity in f16), infinities, NaNs of every kind, both signs, and a
/// sweep over the whole f32 bit space.
#[test]
fn activation_rounding_is_the_cpu_engines_bit_for_bit() {
    let Some(with) = ctx() else { return };
    let Some(without) = baseline() else { return };
    let mut bits: Vec<u32> = vec![
        0,
        1,           // smallest f32 subnormal
        0x007f_ffff, // largest f32 subnormal
        0x3300_0000, // 2^-25: tie between 0 and the smallest f16 subnormal
        0x3300_0001,
        0x3380_0000, // 2^-24, the smallest f16 subnormal
        0x33c0_0000, // 1.5 * 2^-24: tie, to even (2)
        0x3420_0000, // 2.5 * 2^-24: tie, to even (2)
        0x387f_c000, // just below 2^-14, the smallest f16 normal
        0x387f_e000, // tie with 2^-14
        0x387f_ffff,
        0x3880_0000, // 2^-14
        0x3f80_1000, // 1 + 2^-11: tie, to even (1)
        0x3f80_3000, // 1 + 3 * 2^-11: tie, up
        0x3f80_8000, // bf16 tie at 1
        0x3f81_8000, // bf16 tie, up
        0x477f_e000, // 65504, the largest f16
        0x477f_efff, // below 65520: 65504
        0x477f_f000, // 65520: infinity
        0x4780_0000, // 65536
        0x7f7f_ffff, // f32::MAX (bf16: rounds to infinity)
        0x7f7f_7fff,
        0x7f80_0000, // infinity
        0x7f80_0001, // signalling NaN
        0x7fc0_0000, // quiet NaN
        0x7fff_ffff,
        0x7f80_2000, // NaN whose payload sits below the kept bits
    ];
    let negatives: Vec<u32> = bits.iter().map(|b| b | 0x8000_0000).collect();
    bits.extend(negatives);
    let mut rng = Rng(17);
    bits.extend((0..1u64 << 16).map(|i| (i * 65_537) as u32));
    bits.extend((0..1 << 16).map(|_| rng.next() as u32));
    // Every f16 tie and its neighbours over the f16 exponent range.
    for e in 103u32..=143 {
        for m in [0x1000u32, 0x3000, 0x0fff, 0x1001, 0x5000, 0x7f_f000] {
            bits.push((e << 23) | m);
        }
    }
    let x: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b)).collect();
    // 7 values a row: ragged rows, so padding and row starts are covered.
    let cols = 7;
    let x = &x[..x.len() / cols * cols];
    for ty in [GgmlType::F16, GgmlType::BF16] {
        let cpu: Vec<u16> = x
            .iter()
            .map(|&v| {
                if ty == GgmlType::F16 {
                    f32_to_f16(v)
                } else {
                    f32_to_bf16(v)
                }
            })
            .collect();
        for (dev, c) in [("shader-f16 device", with), ("baseline device", &without)] {
            let got = round_acts16(c, ty, x, cols).unwrap();
            assert_eq!(got.len(), cpu.len());
            for (i, (&g, &w)) in got.iter().zip(&cpu).enumerate() {
                assert_eq!(
                    g,
                    w,
                    "{} on the {dev}: {:#010x} -> {g:#06x}, the CPU gives {w:#06x}",
                    ty.name(),
                    x[i].to_bits()
                );
            }
        }
        eprintln!("{}: {} values rounded as the CPU does", ty.name(), x.len());
    }
}

/// F16 and BF16 weights take 2 bytes a value on the device (each row
/// padded to a whole 8-value group), half of the f32 upload they had.
#[test]
fn float16_weights_take_half_the_device_memory_of_f32() {
    let Some(c) = ctx() else { return };
    let mut rng = Rng(3);
    for ty in [GgmlType::F16, GgmlType::BF16] {
        for (rows, cols, padded) in [(67, 96, 96), (64, 5, 8), (130, 33, 40)] {
            let w = random_float16(&mut rng, ty, rows, cols);
            let g = GpuMatrix::upload(c, &w).unwrap();
            let f = GpuMatrix::upload(c, &w.to_f32().unwrap()).unwrap();
            assert_eq!(
                g.device_bytes(),
                (rows * padded * 2) as u64,
                "{ty:?} {rows}x{cols}"
            );
            assert_eq!(f.device_bytes(), (rows * cols * 4) as u64);
            if padded == cols {
                assert_eq!(2 * g.device_bytes(), f.device_bytes());
            }
        }
    }
}

/// Weights split by rows past the binding limit: every chunk multiplies
/// its own rows and gathers its own ids.
#[test]
fn float16_weights_over_the_binding_limit_are_split_by_rows() {
    let Some(small) = open(GpuOptions {
        max_storage_binding_size: Some(1024),
        ..Default::default()
    }) else {
        return;
    };
    let Some(without) = baseline() else { return };
    let mut rng = Rng(8);
    // 96 columns = 12 groups x 16 bytes = 192 bytes a row: 5 rows a chunk.
    let w = random_float16(&mut rng, GgmlType::F16, 67, 96);
    let g = GpuMatrix::upload(&small, &w).unwrap();
    assert_eq!(g.chunk_count(), 14);
    let x = rng.vec(17 * 96, 1.0);
    let got = g.matmul_slice(&small, &x, 17).unwrap();
    let want = GpuMatrix::upload(&without, &w)
        .unwrap()
        .matmul_slice(&without, &x, 17)
        .unwrap();
    assert!(got
        .iter()
        .zip(&want)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}

fn mean_rel(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).abs() / (1.0 + (y as f64).abs()))
        .sum::<f64>()
        / a.len() as f64
}

fn tiny(name: &str) -> Transformer {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/prm")
        .join(name);
    HfCheckpoint::open_dir(dir).unwrap().transformer().unwrap()
}

/// Device bytes an upload of `model` adds.
fn uploaded_bytes(ctx: &Arc<GpuContext>, model: &Transformer) -> (GpuTransformer, u64) {
    let before = ctx.pool_stats().live_bytes;
    let gm = GpuTransformer::upload(ctx.clone(), model).unwrap();
    (gm, ctx.pool_stats().live_bytes - before)
}

/// The GPU engine on a 16-bit model against the CPU engine on the same
/// weights (`want16`, which rounds activations as the GPU does) and on its
/// f32 expansion (`want32`, which does not). Returns (max, mean) of
/// |Δ|/(1+|ref|) for GPU vs CPU 16-bit and for CPU 16-bit vs CPU f32.
fn against_both(got: &[f32], want16: &[f32], want32: &[f32]) -> ((f64, f64), (f64, f64)) {
    (
        (max_rel(got, want16), mean_rel(got, want16)),
        (max_rel(want16, want32), mean_rel(want16, want32)),
    )
}

/// Tiny decoders with every matrix converted to F16 (and BF16), embeddings
/// included, 40 tokens: the GPU engine against the CPU engine on the same
/// 16-bit weights. Both round each matmul's activations to the weights'
/// type, so they agree except where their f32 activations (summed in other
/// orders in attention and the norms) straddle a rounding boundary and the
/// two roundings differ by one 16-bit step, which later layers carry on:
/// the gpu_model.rs tiny-decoder bound of 1e-5 does not hold (measured max
/// 9.3e-4 F16, 1.9e-3 BF16). Stated bounds: max |Δ|/(1+|ref|) <= 5e-3,
/// and a mean error at most half of what the CPU's own activation
/// rounding moves its hidden states (measured at most 0.18 of it; a GPU
/// that did not round, or rounded otherwise, would sit near 1). The upload
/// takes half the device memory of the f32 model's (norm and bias vectors
/// stay f32; measured ratio 0.497 to 0.503).
#[test]
fn tiny_f16_decoders_match_the_cpu_engine_at_half_the_memory() {
    let Some(ctx) = arc_ctx() else { return };
    for name in ["qwen2-prm-tiny", "rlhflow-tiny"] {
        let f32_model = tiny(name);
        let vocab = f32_model.config().vocab_size as u32;
        let tokens: Vec<u32> = (0..40u32).map(|i| (i * 37 + 11) % vocab).collect();
        let (_g32, bytes32) = uploaded_bytes(&ctx, &f32_model);
        for ty in [GgmlType::F16, GgmlType::BF16] {
            let mut model = f32_model.clone();
            model.quantize_weights(ty).unwrap();
            let want = model.forward(&tokens, None).unwrap();
            let wide = model.dequantized().unwrap().forward(&tokens, None).unwrap();
            let (gm, bytes) = uploaded_bytes(&ctx, &model);
            let got = gm.forward(&tokens, None).unwrap();
            let ((e, mean), (_, mean_cpu)) = against_both(&got.data, &want.data, &wide.data);
            let ratio = bytes as f64 / bytes32 as f64;
            eprintln!(
                "{name} {}: hidden max |Δ|/(1+|ref|) = {e:.2e}, mean {mean:.2e} ({:.3} of the CPU's \
                 own rounding effect {mean_cpu:.2e}); device bytes {bytes} vs f32 {bytes32} ({ratio:.3})",
                ty.name(),
                mean / mean_cpu
            );
            assert!(e <= 5e-3, "{name} {ty:?}: {e:e}");
            assert!(
                mean <= 0.5 * mean_cpu,
                "{name} {ty:?}: mean {mean:e} vs {mean_cpu:e}"
            );
            assert!(ratio <= 0.51, "{name} {ty:?}: {ratio}");
        }
    }
}

const PROMPT: &str =
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many \
    clips in May. How many clips did Natalia sell altogether in April and May? Step 1: In May she \
    sold 48 / 2 = 24 clips.";

/// SmolLM2-135M with every matrix in F16 (its Q4_1/Q8_0 weights widened,
/// then rounded to f16), 32 tokens of a real prompt: the GPU engine against
/// the CPU engine on the same F16 weights. Over 30 layers the rounding
/// flips described above spread (SmolLM2's activation outliers reach ~100),
/// so gpu_model.rs's quantized-model bounds (5e-4 hidden, 2e-3 logits,
/// both engines on f32 activations) do not hold; the engines still differ
/// by less than the CPU engine's f16 activation rounding moves its own
/// outputs. Bounds: the same top-5 tokens in the same order at every
/// position; hidden states max |Δ|/(1+|ref|) <= 2e-2 (measured 1.1e-2;
/// the CPU's rounding effect 2.3e-2) and logits max |Δ| <= 0.1 (measured
/// 4.7e-2; 8.2e-2), each no larger than the CPU's rounding effect.
#[test]
fn smollm2_in_f16_matches_the_cpu_engine() {
    let Some(path) = stepscore::testing::find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
        return;
    };
    let Some(ctx) = arc_ctx() else { return };
    let gguf = GgufModel::parse(
        stepscore::engine::ModelBytes::open(&path).unwrap(),
        "SmolLM2",
    )
    .unwrap();
    let tok = stepscore::engine::Tokenizer::from_gguf(&gguf.file).unwrap();
    let mut tokens = tok.encode(PROMPT, true).unwrap();
    assert!(tokens.len() >= 32, "prompt too short: {}", tokens.len());
    tokens.truncate(32);
    let mut model = gguf.transformer().unwrap().dequantized().unwrap();
    model.quantize_weights(GgmlType::F16).unwrap();
    model.set_threads(2);
    // The f32 expansion of the same F16 weights: the CPU without rounding.
    let wide_model = model.dequantized().unwrap();
    let want = model.forward(&tokens, None).unwrap();
    let wide = wide_model.forward(&tokens, None).unwrap();
    let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
    let hidden = gm.forward_gpu(&tokens, None).unwrap();
    let got = hidden.to_hidden(&ctx).unwrap();
    let ((e, mean), (e_cpu, mean_cpu)) = against_both(&got.data, &want.data, &wide.data);

    let logits = gm.logits_gpu(&hidden).unwrap().to_vec(&ctx).unwrap();
    let cpu = model.logits_for(&want.data, None).unwrap();
    let cpu32 = wide_model.logits_for(&wide.data, None).unwrap();
    let vocab = model.config().vocab_size;
    let top5 = |l: &[f32]| {
        let mut i: Vec<usize> = (0..l.len()).collect();
        i.sort_by(|&a, &b| l[b].total_cmp(&l[a]));
        i.truncate(5);
        i
    };
    let max_abs = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() as f64)
            .fold(0.0, f64::max)
    };
    for t in 0..tokens.len() {
        let r = t * vocab..(t + 1) * vocab;
        assert_eq!(
            top5(&logits[r.clone()]),
            top5(&cpu[r]),
            "top-5 at position {t}"
        );
    }
    let (l, l_cpu) = (max_abs(&logits, &cpu), max_abs(&cpu, &cpu32));
    eprintln!(
        "SmolLM2 F16, {} tokens: hidden max |Δ|/(1+|ref|) = {e:.2e} (mean {mean:.2e}), logits max |Δ| = \
         {l:.2e}, top-5 identical; the CPU's own f16 rounding: hidden {e_cpu:.2e} (mean {mean_cpu:.2e}), \
         logits {l_cpu:.2e}",
        tokens.len()
    );
    assert!(
        e <= 2e-2 && e <= e_cpu,
        "hidden states differ by {e:e} (CPU rounding {e_cpu:e})"
    );
    assert!(
        l <= 0.1 && l <= l_cpu,
        "logits differ by {l} (CPU rounding {l_cpu})"
    );
}
