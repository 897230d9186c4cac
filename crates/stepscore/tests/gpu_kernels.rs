//! The WGSL engine's kernels other than the matmuls (gpu_matmul.rs), each
//! against a CPU reference on whatever adapter wgpu finds (Mesa's llvmpipe
//! in CI), on random shapes including sizes that are not multiples of the
//! 64-wide workgroups (and, for attention, of its 8-key tiles and
//! 64-query workgroups).
//!
//! References: the CPU engine's own `Matrix::gather_row` for the embedding
//! gather (every weight type the GPU reads); for the rest, straightforward
//! f64 loops written here from the operations' definitions (the engine's
//! f32 versions are private to transformer.rs; whole-model parity in
//! gpu_model.rs checks the GPU against them end to end).
//!
//! Tolerances (|Δ| ≤ tol · (1 + |ref|)):
//! - gather, residual/bias add, gather_rows: 1e-6 (a copy, a dequantize or
//!   one f32 add: at most one rounding, or a fused multiply-add, apart);
//! - RMSNorm, RoPE, SwiGLU: 1e-5 (f32 sums of ≤ 600 terms / exp);
//! - attention: 1e-5 (f32 dot products and softmax vs f64);
//! - token statistics: log Z and target logit 1e-5, entropy 1e-4 (f32
//!   sums over up to 5,000 exponentials).
#![cfg(feature = "gpu")]

use crate::gpu_support;

use gpu_support::{assert_close, ctx, open, random_matrix, Rng};
use stepscore::engine::testing::ops::{self, AttentionShape, RopeShape};
use stepscore::engine::testing::GpuTensor;
use stepscore::engine::{Activation, GgmlType, GpuMatrix, GpuOptions, RopeStyle};

fn gather_case(
    ctx: &stepscore::engine::GpuContext,
    rng: &mut Rng,
    ty: GgmlType,
    rows: usize,
    cols: usize,
) -> usize {
    let m = random_matrix(rng, ty, rows, cols);
    let g = GpuMatrix::upload(ctx, &m).unwrap();
    // First and last rows, repeats, and random ones.
    let mut ids = vec![0u32, (rows - 1) as u32, 0];
    ids.extend((0..13).map(|_| rng.below(rows) as u32));
    let got = g.gather(ctx, &ids).unwrap().to_vec(ctx).unwrap();
    let mut want = vec![0f32; ids.len() * cols];
    for (row, &id) in want.chunks_exact_mut(cols).zip(&ids) {
        m.gather_row(id as usize, row).unwrap();
    }
    let want: Vec<f64> = want.iter().map(|&v| v as f64).collect();
    assert_close(
        &format!("gather {} {rows}x{cols}", ty.name()),
        &got,
        &want,
        1e-6,
    );
    g.chunk_count()
}

#[test]
fn embedding_gather_matches_the_cpu_engine_for_every_weight_type() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(11);
    for (ty, cols) in [
        (GgmlType::F32, 37),
        (GgmlType::F16, 96),
        (GgmlType::F16, 37),
        (GgmlType::BF16, 45),
        (GgmlType::Q8_0, 96),
        (GgmlType::Q4_0, 160),
        (GgmlType::Q4_1, 96),
        (GgmlType::Q5_0, 160),
        (GgmlType::Q5_1, 96),
        (GgmlType::Q4K, 256),
        (GgmlType::Q5K, 512),
        (GgmlType::Q6K, 512),
    ] {
        for rows in [1, 67, 130] {
            gather_case(ctx, &mut rng, ty, rows, cols);
        }
    }
}

#[test]
fn embedding_gather_covers_tables_split_over_several_buffers() {
    // A 4 KiB binding limit splits a 130-row table into many chunks; every
    // id must still come from the chunk that holds it.
    let Some(small) = open(GpuOptions {
        max_storage_binding_size: Some(4096),
        ..Default::default()
    }) else {
        return;
    };
    let mut rng = Rng(12);
    for (ty, cols) in [
        (GgmlType::F32, 64),
        (GgmlType::F16, 64),
        (GgmlType::BF16, 40),
        (GgmlType::Q4_1, 256),
        (GgmlType::Q5_0, 256),
        (GgmlType::Q5K, 256),
        (GgmlType::Q6K, 256),
    ] {
        let chunks = gather_case(&small, &mut rng, ty, 130, cols);
        assert!(
            chunks > 1,
            "{ty:?}: expected a split table, got {chunks} chunk"
        );
    }
}

fn upload(ctx: &stepscore::engine::GpuContext, v: &[f32]) -> GpuTensor {
    GpuTensor::from_slice(ctx, v).unwrap()
}

#[test]
fn rms_norm_matches_the_definition() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(21);
    for (rows, cols) in [(1, 1), (5, 7), (17, 64), (3, 100), (9, 576)] {
        let x = rng.vec(rows * cols, 3.0);
        let w = rng.vec(cols, 1.5);
        let eps = 1e-5f32;
        let got = ops::rms_norm(ctx, &upload(ctx, &x), &upload(ctx, &w), eps)
            .unwrap()
            .to_vec(ctx)
            .unwrap();
        let mut want = Vec::new();
        for r in x.chunks_exact(cols) {
            let ms = r.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
            let inv = 1.0 / (ms + eps as f64).sqrt();
            want.extend(r.iter().zip(&w).map(|(&a, &g)| a as f64 * inv * g as f64));
        }
        let e = assert_close(&format!("rms_norm {rows}x{cols}"), &got, &want, 1e-5);
        eprintln!("rms_norm {rows}x{cols}: {e:.1e}");
    }
}

/// f64 RoPE on `x` (as the CPU engine defines it), with the cos/sin
/// rounded to f32 first as the engine's tables are.
#[allow(clippy::too_many_arguments)]
fn rope_ref(x: &[f32], inv_freq: &[f64], start: usize, s: &RopeShape) -> Vec<f64> {
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let half = s.head_dim / 2;
    for t in 0..s.n_tokens {
        for h in 0..s.n_heads {
            let o = s.base + t * s.row_stride + h * s.head_dim;
            for (i, f) in inv_freq.iter().enumerate() {
                let (sn, cs) = (((start + t) as f64) * f).sin_cos();
                let (c, sn) = (cs as f32 as f64, sn as f32 as f64);
                let (a, b) = match s.style {
                    RopeStyle::HalfSplit => (o + i, o + i + half),
                    RopeStyle::AdjacentPairs => (o + 2 * i, o + 2 * i + 1),
                };
                let (xa, xb) = (x[a] as f64, x[b] as f64);
                out[a] = xa * c - xb * sn;
                out[b] = xb * c + xa * sn;
            }
        }
    }
    out
}

#[test]
fn rope_matches_the_definition_in_both_styles_at_offsets() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(31);
    for style in [RopeStyle::HalfSplit, RopeStyle::AdjacentPairs] {
        for (n_tokens, n_heads, head_dim, start, extra) in [
            (1, 1, 2, 0, 0),
            (5, 3, 8, 13, 6),
            (17, 9, 64, 100, 0),
            (3, 2, 100, 4095, 10),
        ] {
            // Rotate heads inside wider rows, after a prefix (a KV cache slice).
            let stride = n_heads * head_dim + extra;
            let base = 3 * stride;
            let x = rng.vec(base + n_tokens * stride, 2.0);
            let inv_freq: Vec<f64> = (0..head_dim / 2)
                .map(|i| 10000f64.powf(-2.0 * i as f64 / head_dim as f64))
                .collect();
            let shape = RopeShape {
                n_tokens,
                n_heads,
                head_dim,
                row_stride: stride,
                base,
                style,
            };
            let mut t = upload(ctx, &x);
            ops::rope(ctx, &mut t, &inv_freq, start, &shape).unwrap();
            let got = t.to_vec(ctx).unwrap();
            let want = rope_ref(&x, &inv_freq, start, &shape);
            assert_close(
                &format!("rope {style:?} {n_tokens}x{n_heads}x{head_dim} at {start}"),
                &got,
                &want,
                1e-5,
            );
        }
    }
}

/// f64 causal grouped-query attention (two-pass softmax).
fn attention_ref(q: &[f32], k: &[f32], v: &[f32], s: &AttentionShape) -> Vec<f64> {
    let (hd, qd, kvd) = (
        s.head_dim,
        s.n_heads * s.head_dim,
        s.n_kv_heads * s.head_dim,
    );
    let group = s.n_heads / s.n_kv_heads;
    let scale = s.scale as f64;
    let mut out = vec![0f64; s.n_tokens * qd];
    for t in 0..s.n_tokens {
        let pos = s.start + t;
        let first = s.sliding_window.map_or(0, |w| (pos + 1).saturating_sub(w));
        for h in 0..s.n_heads {
            let ko = (h / group) * hd;
            let sc: Vec<f64> = (first..=pos)
                .map(|j| {
                    (0..hd)
                        .map(|e| q[t * qd + h * hd + e] as f64 * k[j * kvd + ko + e] as f64)
                        .sum::<f64>()
                        * scale
                })
                .collect();
            let mx = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|s| (s - mx).exp()).sum();
            for (p, j) in sc.iter().zip(first..=pos) {
                let p = (p - mx).exp() / z;
                for e in 0..hd {
                    out[t * qd + h * hd + e] += p * v[j * kvd + ko + e] as f64;
                }
            }
        }
    }
    out
}

#[test]
fn attention_matches_the_definition_over_tiles_offsets_and_windows() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(41);
    // (tokens, start, heads, kv heads, head_dim, window, scaled as if the
    // head were this wide: Gemma's query_pre_attn_scalar)
    let cases = [
        (1, 0, 1, 1, 4, None, 4),
        (3, 0, 4, 2, 8, None, 8),
        (17, 5, 9, 3, 64, None, 64),
        (70, 0, 2, 1, 16, None, 16),    // more than one 64-key tile
        (5, 130, 4, 4, 100, None, 100), // prefix of 130 cached positions, head_dim > 64
        (20, 50, 4, 2, 8, Some(7), 8),
        (2, 0, 2, 2, 256, None, 256),
        (9, 3, 4, 1, 256, Some(5), 168),
    ];
    for (n, start, nh, nkv, hd, window, scalar) in cases {
        let s = AttentionShape {
            n_tokens: n,
            start,
            n_heads: nh,
            n_kv_heads: nkv,
            head_dim: hd,
            sliding_window: window,
            scale: 1.0 / (scalar as f32).sqrt(),
        };
        let q = rng.vec(n * nh * hd, 1.0);
        let k = rng.vec((start + n) * nkv * hd, 1.0);
        let v = rng.vec((start + n) * nkv * hd, 1.0);
        let got = ops::attention(
            ctx,
            &upload(ctx, &q),
            &upload(ctx, &k),
            &upload(ctx, &v),
            &s,
        )
        .unwrap()
        .to_vec(ctx)
        .unwrap();
        let want = attention_ref(&q, &k, &v, &s);
        let e = assert_close(
            &format!("attention n={n} start={start} heads={nh}/{nkv} hd={hd} window={window:?}"),
            &got,
            &want,
            1e-5,
        );
        eprintln!("attention n={n} start={start} hd={hd}: {e:.1e}");
    }
}

#[test]
fn swiglu_residual_and_bias_adds_match_the_definitions() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(51);
    for n in [1, 63, 65, 1000, 4099] {
        let g = rng.vec(n, 6.0);
        let u = rng.vec(n, 2.0);
        let mut gt = upload(ctx, &g);
        ops::glu(ctx, &mut gt, &upload(ctx, &u), Activation::Silu).unwrap();
        let want: Vec<f64> = g
            .iter()
            .zip(&u)
            .map(|(&a, &b)| a as f64 / (1.0 + (-(a as f64)).exp()) * b as f64)
            .collect();
        assert_close(
            &format!("swiglu {n}"),
            &gt.to_vec(ctx).unwrap(),
            &want,
            1e-5,
        );
        // GELU, tanh form (Gemma): 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a³))).
        let mut gt = upload(ctx, &g);
        ops::glu(ctx, &mut gt, &upload(ctx, &u), Activation::GeluTanh).unwrap();
        let want: Vec<f64> = g
            .iter()
            .zip(&u)
            .map(|(&a, &b)| {
                let a = a as f64;
                let z = (2.0 / std::f64::consts::PI).sqrt() * (a + 0.044715 * a * a * a);
                0.5 * a * (1.0 + z.tanh()) * b as f64
            })
            .collect();
        assert_close(&format!("geglu {n}"), &gt.to_vec(ctx).unwrap(), &want, 1e-5);
        let mut st = upload(ctx, &g);
        ops::scale(ctx, &mut st, 25.298).unwrap();
        let want: Vec<f64> = g.iter().map(|&a| (a * 25.298) as f64).collect();
        assert_eq!(
            st.to_vec(ctx).unwrap(),
            want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            "scale {n}"
        );

        let mut xt = upload(ctx, &g);
        ops::add(ctx, &mut xt, &upload(ctx, &u)).unwrap();
        let want: Vec<f64> = g
            .iter()
            .zip(&u)
            .map(|(&a, &b)| a as f64 + b as f64)
            .collect();
        assert_close(&format!("add {n}"), &xt.to_vec(ctx).unwrap(), &want, 1e-6);
    }
    for (rows, len) in [(1, 1), (3, 65), (17, 576)] {
        let x = rng.vec(rows * len, 1.0);
        let b = rng.vec(len, 1.0);
        for relu in [false, true] {
            let mut xt = upload(ctx, &x);
            ops::bias_add(ctx, &mut xt, &upload(ctx, &b), relu).unwrap();
            let want: Vec<f64> = x
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let v = a as f64 + b[i % len] as f64;
                    if relu {
                        v.max(0.0)
                    } else {
                        v
                    }
                })
                .collect();
            assert_close(
                &format!("bias_add {rows}x{len} relu={relu}"),
                &xt.to_vec(ctx).unwrap(),
                &want,
                1e-6,
            );
        }
    }
}

#[test]
fn gather_rows_picks_the_marker_rows() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(61);
    let (rows, cols) = (23, 67);
    let src = rng.vec(rows * cols, 1.0);
    let idx = [22u32, 0, 5, 5, 17];
    let got = ops::gather_rows(ctx, &upload(ctx, &src), cols, &idx)
        .unwrap()
        .to_vec(ctx)
        .unwrap();
    let want: Vec<f64> = idx
        .iter()
        .flat_map(|&r| {
            src[r as usize * cols..(r as usize + 1) * cols]
                .iter()
                .map(|&v| v as f64)
        })
        .collect();
    assert_close("gather_rows", &got, &want, 0.0);
    assert!(ops::gather_rows(ctx, &upload(ctx, &src), cols, &[23]).is_err());
}

#[test]
fn token_statistics_match_a_float64_log_softmax() {
    let Some(ctx) = ctx() else { return };
    let mut rng = Rng(71);
    for vocab in [1, 7, 1000, 5003] {
        let rows = 3;
        let logits = rng.vec(rows * vocab, 10.0);
        let targets: Vec<u32> = (0..rows).map(|_| rng.below(vocab) as u32).collect();
        let got = ops::token_stats(ctx, &upload(ctx, &logits), vocab, &targets)
            .unwrap()
            .to_vec(ctx)
            .unwrap();
        for (r, row) in logits.chunks_exact(vocab).enumerate() {
            let mx = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let z: f64 = row.iter().map(|&v| (v as f64 - mx).exp()).sum();
            let log_z = mx + z.ln();
            let ent = log_z
                - row
                    .iter()
                    .map(|&v| (v as f64 - log_z).exp() * v as f64)
                    .sum::<f64>();
            let what = format!("token_stats vocab={vocab} row {r}");
            assert_close(
                &what,
                &got[3 * r..3 * r + 2],
                &[log_z, row[targets[r] as usize] as f64],
                1e-5,
            );
            assert_close(&what, &got[3 * r + 2..3 * r + 3], &[ent], 1e-4);
        }
    }
}
