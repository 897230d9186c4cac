//! Quantized matmul against independent references:
//! - dequantize weights (bit-exact with llama.cpp, see quant_reference.rs),
//!   quantize-then-dequantize activations the same way, and take the f64
//!   dot product: the kernels must agree up to f32 accumulation rounding;
//! - small integer cases (unit scales, integer activations whose Q8 scale is
//!   exactly +-1) where every intermediate is an integer below 2^24, so the
//!   result must equal the exact integer dot product, bit for bit.

use proptest::prelude::*;
use stepscore::engine::testing::{
    dequantize_row, f16_to_f32, f32_to_bf16, f32_to_f16, matmul, matmul_quantized, matmul_rows,
    matmul_with, quantize_row_q8_0, quantize_row_q8_1, quantize_row_q8_k, vec_dot_type, QMatrix,
};
use stepscore::engine::{GgmlType, QuantizedActs, Simd};
use stepscore::Error;

const WEIGHT_TYPES: [GgmlType; 13] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
];

struct Rng(u64);
impl Rng {
    fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f32 {
        (self.u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn sym(&mut self) -> f32 {
        2.0 * self.unit() - 1.0
    }
    fn int(&mut self, lo: i32, hi: i32) -> i32 {
        lo + (self.u64() % (hi - lo + 1) as u64) as i32
    }
}

/// Byte offsets of the f16 scale (and min) fields in each block.
fn half_fields(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => &[0, 2],
        GgmlType::Q2K => &[80, 82],
        GgmlType::Q3K => &[108],
        GgmlType::Q6K => &[208],
        _ => &[],
    }
}

fn cols_for(ty: GgmlType, blocks: usize) -> usize {
    match ty.block_elems() {
        1 => 8 * blocks + 3, // not a multiple of 8: exercises the tails
        be => be * blocks,
    }
}

/// Random rows: random quant bytes with finite scales in a realistic range.
fn random_weights(ty: GgmlType, rows: usize, cols: usize, rng: &mut Rng) -> Vec<u8> {
    let n = rows * cols;
    match ty {
        GgmlType::F32 => (0..n).flat_map(|_| rng.sym().to_le_bytes()).collect(),
        GgmlType::F16 => (0..n)
            .flat_map(|_| f32_to_f16(rng.sym()).to_le_bytes())
            .collect(),
        GgmlType::BF16 => (0..n)
            .flat_map(|_| f32_to_bf16(rng.sym()).to_le_bytes())
            .collect(),
        _ => {
            let bb = ty.block_bytes();
            let mut data: Vec<u8> = (0..n / ty.block_elems() * bb)
                .map(|_| rng.u64() as u8)
                .collect();
            for blk in data.chunks_exact_mut(bb) {
                for (k, &off) in half_fields(ty).iter().enumerate() {
                    let mag = 10f32.powf(-4.0 + 3.0 * rng.unit());
                    let v = if k == 0 && rng.u64() & 1 == 1 {
                        -mag
                    } else {
                        mag
                    };
                    blk[off..off + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
                }
            }
            data
        }
    }
}

fn dequant_rows(ty: GgmlType, data: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; rows * cols];
    let rb = data.len() / rows;
    for (r, o) in out.chunks_exact_mut(cols).enumerate() {
        dequantize_row(ty, &data[r * rb..(r + 1) * rb], o).unwrap();
    }
    out
}

/// The activations as the kernels see them, via the bit-exact quantizers and
/// dequantizer; plus, for Q8_1, each block's (s, d * sum(q)) so the test can
/// bound the error of ggml's f16-rounded block sum.
fn act_reference(ty: GgmlType, x: &[f32], cols: usize) -> (Vec<f32>, Vec<f32>) {
    let mut sums_err = Vec::new();
    let deq = match vec_dot_type(ty).unwrap() {
        GgmlType::F32 => x.to_vec(),
        GgmlType::F16 => x.iter().map(|&v| f16_to_f32(f32_to_f16(v))).collect(),
        GgmlType::BF16 => x
            .iter()
            .map(|&v| f32::from_bits((f32_to_bf16(v) as u32) << 16))
            .collect(),
        at => {
            let mut q = vec![0u8; x.len() / at.block_elems() * at.block_bytes()];
            match at {
                GgmlType::Q8_0 => quantize_row_q8_0(x, &mut q).unwrap(),
                GgmlType::Q8_1 => quantize_row_q8_1(x, &mut q).unwrap(),
                _ => quantize_row_q8_k(x, &mut q).unwrap(),
            }
            if at == GgmlType::Q8_1 {
                for b in q.chunks_exact(36) {
                    let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]])) as f64;
                    let s = f16_to_f32(u16::from_le_bytes([b[2], b[3]])) as f64;
                    let sum: f64 = b[4..].iter().map(|&v| v as i8 as f64).sum();
                    sums_err.push((s - d * sum).abs() as f32);
                }
            }
            let mut out = vec![0.0f32; x.len()];
            dequantize_row(at, &q, &mut out).unwrap();
            out
        }
    };
    assert_eq!(deq.len() % cols, 0);
    (deq, sums_err)
}

/// Checks `got` (n_tokens x rows) against the f64 reference with tolerance
/// 1e-5 * sum|w a| (f32 accumulation) plus, for Q4_1/Q5_1, sum_b |m_b| *
/// |s_b - d_b sum q_b| (ggml stores the activation block sum in f16).
fn check_against_reference(
    ty: GgmlType,
    w: &[u8],
    rows: usize,
    cols: usize,
    x: &[f32],
    n_tokens: usize,
    got: &[f32],
) {
    let wd = dequant_rows(ty, w, rows, cols);
    let (xd, sums_err) = act_reference(ty, x, cols);
    let nb = cols / ty.block_elems();
    let rb = w.len() / rows;
    for t in 0..n_tokens {
        for r in 0..rows {
            let wr = &wd[r * cols..(r + 1) * cols];
            let xr = &xd[t * cols..(t + 1) * cols];
            let exact: f64 = wr.iter().zip(xr).map(|(&a, &b)| a as f64 * b as f64).sum();
            let mag: f64 = wr
                .iter()
                .zip(xr)
                .map(|(&a, &b)| (a as f64 * b as f64).abs())
                .sum();
            let mut tol = 1e-5 * mag + 1e-30;
            if !sums_err.is_empty() {
                for b in 0..nb {
                    let blk = &w[r * rb + b * ty.block_bytes()..];
                    let m = f16_to_f32(u16::from_le_bytes([blk[2], blk[3]])) as f64;
                    tol += m.abs() * sums_err[t * nb + b] as f64 * 1.0001;
                }
            }
            let g = got[t * rows + r] as f64;
            assert!(
                (g - exact).abs() <= tol,
                "{} token {t} row {r}: got {g}, reference {exact}, |diff| {} > tol {tol}",
                ty.name(),
                (g - exact).abs()
            );
        }
    }
}

fn backends() -> Vec<Simd> {
    [
        Simd::Portable,
        Simd::Avx2,
        Simd::AvxVnni,
        Simd::Avx512,
        Simd::Wasm128,
        Simd::Neon,
        Simd::NeonDot,
    ]
    .into_iter()
    .filter(|b| b.is_available())
    .collect()
}

#[test]
fn every_weight_type_matches_the_dequantized_reference() {
    let mut rng = Rng(42);
    // 7 rows and 11 tokens: one full 8-token tile plus single-token remainders.
    let (rows, n_tokens) = (7, 11);
    for ty in WEIGHT_TYPES {
        let cols = cols_for(ty, 3);
        let w = random_weights(ty, rows, cols, &mut rng);
        let m = QMatrix::new(ty, rows, cols, &w).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| rng.sym() * if i % 13 == 0 { 20.0 } else { 1.0 })
            .collect();
        let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
        for backend in backends() {
            for threads in [1, 3] {
                let mut out = vec![f32::NAN; n_tokens * rows];
                matmul_with(&m, None, &acts, &mut out, threads, backend).unwrap();
                check_against_reference(ty, &w, rows, cols, &x, n_tokens, &out);
            }
        }
    }
}

/// Weights with unit scales (mins 1, or 2 for Q4_1/Q5_1) and integer
/// activations with a 127 in every block, so the activation scale is exactly
/// 1 (-1 for Q8_K, which keys on the signed max) and every quantity is an
/// integer: the result must be the exact integer dot product.
#[test]
fn small_integer_cases_are_exact() {
    let mut rng = Rng(7);
    let (rows, n_tokens) = (5, 10);
    for ty in WEIGHT_TYPES {
        let cols = match ty.block_elems() {
            1 => 37,
            be => 2 * be,
        };
        let mut w = match ty {
            GgmlType::F32 => (0..rows * cols)
                .flat_map(|_| (rng.int(-9, 9) as f32).to_le_bytes())
                .collect(),
            GgmlType::F16 => (0..rows * cols)
                .flat_map(|_| f32_to_f16(rng.int(-9, 9) as f32).to_le_bytes())
                .collect(),
            GgmlType::BF16 => (0..rows * cols)
                .flat_map(|_| f32_to_bf16(rng.int(-9, 9) as f32).to_le_bytes())
                .collect(),
            _ => random_weights(ty, rows, cols, &mut rng),
        };
        if ty.block_elems() > 1 {
            let min = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                2.0
            } else {
                1.0
            };
            for blk in w.chunks_exact_mut(ty.block_bytes()) {
                for (k, &off) in half_fields(ty).iter().enumerate() {
                    let v = if k == 0 { 1.0 } else { min };
                    blk[off..off + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
                }
            }
        }
        let be = vec_dot_type(ty).unwrap().block_elems().max(32);
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| {
                if i % be == 0 && cols % be == 0 {
                    127.0
                } else {
                    rng.int(-3, 3) as f32
                }
            })
            .collect();
        let wd = dequant_rows(ty, &w, rows, cols);
        let m = QMatrix::new(ty, rows, cols, &w).unwrap();
        for backend in backends() {
            let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
            let mut out = vec![f32::NAN; n_tokens * rows];
            matmul_with(&m, None, &acts, &mut out, 2, backend).unwrap();
            for t in 0..n_tokens {
                for r in 0..rows {
                    let exact: i64 = (0..cols)
                        .map(|c| wd[r * cols + c] as i64 * x[t * cols + c] as i64)
                        .sum();
                    assert!(wd[r * cols..(r + 1) * cols]
                        .iter()
                        .all(|v| v.fract() == 0.0));
                    assert!(exact.abs() < 1 << 24);
                    assert_eq!(
                        out[t * rows + r],
                        exact as f32,
                        "{} {backend:?} token {t} row {r}",
                        ty.name()
                    );
                }
            }
        }
    }
}

#[test]
fn hand_worked_q4_0_times_q8_0() {
    // One Q4_0 block, d = 0.5, nibbles: low = 9 (value +1), high = 6 (value -2)
    // for every byte -> weights [+1 x16, -2 x16] * 0.5 = [0.5 x16, -1 x16].
    let mut w = vec![0u8; 18];
    w[0..2].copy_from_slice(&f32_to_f16(0.5).to_le_bytes());
    w[2..].fill(0x69);
    // Activations: 127 at index 0, 1.0 elsewhere -> Q8_0 d = 1, quants = x.
    let mut x = vec![1.0f32; 32];
    x[0] = 127.0;
    // dot = 0.5*127 + 15*0.5*1 + 16*(-1)*1 = 63.5 + 7.5 - 16 = 55
    let m = QMatrix::new(GgmlType::Q4_0, 1, 32, &w).unwrap();
    let mut out = [0.0f32];
    matmul(&m, &x, 1, &mut out, 1).unwrap();
    assert_eq!(out[0], 55.0);
}

#[test]
fn row_subsets_thread_counts_and_reused_activations_agree_exactly() {
    let mut rng = Rng(99);
    for ty in [
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4K,
        GgmlType::Q6K,
        GgmlType::F16,
    ] {
        let (rows, cols, n_tokens) = (23, cols_for(ty, 2), 9);
        let w = random_weights(ty, rows, cols, &mut rng);
        let m = QMatrix::new(ty, rows, cols, &w).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols).map(|_| rng.sym()).collect();
        let mut full = vec![0.0f32; n_tokens * rows];
        matmul(&m, &x, n_tokens, &mut full, 1).unwrap();
        for threads in [2, 4, 64] {
            let mut o = vec![0.0f32; n_tokens * rows];
            matmul(&m, &x, n_tokens, &mut o, threads).unwrap();
            assert_eq!(o, full, "{} with {threads} threads", ty.name());
        }
        let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
        let mut o = vec![0.0f32; n_tokens * rows];
        matmul_quantized(&m, &acts, &mut o, 2).unwrap();
        assert_eq!(o, full);
        let sel = [22, 0, 5, 5];
        let mut sub = vec![0.0f32; n_tokens * sel.len()];
        matmul_rows(&m, &sel, &x, n_tokens, &mut sub, 2).unwrap();
        for t in 0..n_tokens {
            for (i, &r) in sel.iter().enumerate() {
                assert_eq!(
                    sub[t * sel.len() + i],
                    full[t * rows + r],
                    "{} row {r} token {t}",
                    ty.name()
                );
            }
        }
    }
}

/// The CPU engine's result must not depend on the instruction set: every
/// kernel (AVX2, AVX-512, SIMD128 in scripts/test/test-wasm-kernels.sh) follows
/// the portable kernels' float steps (quant/portable.rs), so a model scores the
/// same bits natively, on another CPU and in the browser. Every weight
/// type, shapes with tails, token counts across the tile sizes, 1 and 3
/// threads, a row selection.
#[test]
fn every_instruction_set_gives_the_portable_bits() {
    let mut rng = Rng(99);
    for ty in WEIGHT_TYPES {
        for (rows, n_tokens, blocks) in [(1, 1, 1), (3, 5, 2), (7, 11, 3), (18, 9, 4)] {
            let cols = cols_for(ty, blocks);
            let w = random_weights(ty, rows, cols, &mut rng);
            let m = QMatrix::new(ty, rows, cols, &w).unwrap();
            let x: Vec<f32> = (0..n_tokens * cols)
                .map(|i| rng.sym() * if i % 13 == 0 { 30.0 } else { 1.0 })
                .collect();
            let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
            let mut want = vec![f32::NAN; n_tokens * rows];
            matmul_with(&m, None, &acts, &mut want, 1, Simd::Portable).unwrap();
            let sel: Vec<usize> = (0..rows).rev().step_by(2).collect();
            let mut want_sel = vec![f32::NAN; n_tokens * sel.len()];
            matmul_with(&m, Some(&sel), &acts, &mut want_sel, 1, Simd::Portable).unwrap();
            for backend in backends() {
                for threads in [1, 3] {
                    let mut got = vec![f32::NAN; n_tokens * rows];
                    matmul_with(&m, None, &acts, &mut got, threads, backend).unwrap();
                    let differ = got
                        .iter()
                        .zip(&want)
                        .filter(|(g, e)| g.to_bits() != e.to_bits());
                    assert_eq!(
                        differ.count(),
                        0,
                        "{} {rows}x{cols}, {n_tokens} tokens, {backend:?}, {threads} threads: \
                         outputs differ from the portable kernel's bits",
                        ty.name()
                    );
                }
                let mut got = vec![f32::NAN; n_tokens * sel.len()];
                matmul_with(&m, Some(&sel), &acts, &mut got, 2, backend).unwrap();
                assert!(
                    got.iter()
                        .zip(&want_sel)
                        .all(|(g, e)| g.to_bits() == e.to_bits()),
                    "{} row selection on {backend:?}",
                    ty.name()
                );
            }
        }
    }
}

/// The decode shapes (1 to 4 tokens: `rowdot.rs` multiplies the packed rows
/// directly up to 3, the tiles take over at 4) give the portable kernels'
/// bits on every instruction set: every weight type, rows that split
/// unevenly over threads, several blocks per row (the 1.5B's Q6_K output
/// projection has 6), a row selection, activations with outliers (Q8_K
/// scales near the clamp).
#[test]
fn decode_shapes_give_the_portable_bits() {
    let mut rng = Rng(4242);
    for ty in WEIGHT_TYPES {
        for (rows, blocks) in [(1, 1), (19, 6), (40, 2)] {
            let cols = cols_for(ty, blocks);
            let w = random_weights(ty, rows, cols, &mut rng);
            let m = QMatrix::new(ty, rows, cols, &w).unwrap();
            for n_tokens in 1..=4 {
                let x: Vec<f32> = (0..n_tokens * cols)
                    .map(|i| rng.sym() * if i % 17 == 0 { 50.0 } else { 1.0 })
                    .collect();
                let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
                let mut want = vec![f32::NAN; n_tokens * rows];
                matmul_with(&m, None, &acts, &mut want, 1, Simd::Portable).unwrap();
                let sel: Vec<usize> = (0..rows).rev().step_by(3).collect();
                let mut want_sel = vec![f32::NAN; n_tokens * sel.len()];
                matmul_with(&m, Some(&sel), &acts, &mut want_sel, 1, Simd::Portable).unwrap();
                for backend in backends() {
                    for threads in [1, 2, 3] {
                        let mut got = vec![f32::NAN; n_tokens * rows];
                        matmul_with(&m, None, &acts, &mut got, threads, backend).unwrap();
                        for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                            assert_eq!(
                                g.to_bits(),
                                e.to_bits(),
                                "{} {rows}x{cols}, {n_tokens} tokens, {backend:?}, {threads} threads: \
                                 output {i}: {g} vs {e}",
                                ty.name()
                            );
                        }
                    }
                    let mut got = vec![f32::NAN; n_tokens * sel.len()];
                    matmul_with(&m, Some(&sel), &acts, &mut got, 2, backend).unwrap();
                    assert!(
                        got.iter()
                            .zip(&want_sel)
                            .all(|(g, e)| g.to_bits() == e.to_bits()),
                        "{} {n_tokens} tokens, row selection on {backend:?}",
                        ty.name()
                    );
                }
            }
        }
    }
}

/// The prefill tiles on AVX-512 and AVX2 (K-quants: 16 rows x 8 tokens;
/// 32-element formats: 8 rows x 4 tokens, two rows per register and quants
/// stored unsigned on AVX-512, one row per lane and signed on AVX2) and on
/// NEON with and without `sdot` (K-quants: 4 rows x 2 tokens; 32-element
/// formats: 4 rows x 1 token) compute
/// every integer sum exactly and accumulate in the portable kernel's f32
/// order, so they must equal it bit for bit: shapes cover partial row
/// groups and token tiles, several groups, thread splits inside a group,
/// row selections, and rows longer than one AVX2 pass of 32 blocks (33, 70).
#[test]
fn prefill_tiles_equal_the_portable_kernel_bit_for_bit() {
    let tiled: Vec<Simd> = [
        Simd::Avx2,
        Simd::AvxVnni,
        Simd::Avx512,
        Simd::Neon,
        Simd::NeonDot,
    ]
    .into_iter()
    .filter(|b| b.is_available())
    .collect();
    if tiled.is_empty() {
        eprintln!("no AVX2 or NEON on this CPU: the tiled kernels are not exercised");
        return;
    }
    let mut rng = Rng(2024);
    for ty in [
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
    ] {
        for (rows, n_tokens, blocks) in [
            (1, 1, 1),
            (3, 5, 2),
            (4, 4, 1),
            (5, 3, 3),
            (21, 9, 2),
            (37, 13, 1),
            (9, 6, 33),
            (17, 7, 70),
        ] {
            let cols = cols_for(ty, blocks);
            let w = random_weights(ty, rows, cols, &mut rng);
            let m = QMatrix::new(ty, rows, cols, &w).unwrap();
            let x: Vec<f32> = (0..n_tokens * cols)
                .map(|i| rng.sym() * if i % 29 == 0 { 40.0 } else { 1.0 })
                .collect();
            let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
            let mut want = vec![f32::NAN; n_tokens * rows];
            matmul_with(&m, None, &acts, &mut want, 1, Simd::Portable).unwrap();
            let sel: Vec<usize> = (0..rows).rev().step_by(2).collect();
            let mut want_sel = vec![0.0f32; n_tokens * sel.len()];
            matmul_with(&m, Some(&sel), &acts, &mut want_sel, 1, Simd::Portable).unwrap();
            for &backend in &tiled {
                for threads in [1, 2, 3] {
                    let mut got = vec![f32::NAN; n_tokens * rows];
                    matmul_with(&m, None, &acts, &mut got, threads, backend).unwrap();
                    for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(
                            g.to_bits(),
                            e.to_bits(),
                            "{} {rows}x{cols}, {n_tokens} tokens, {backend:?}, {threads} threads: \
                             output {i}: {g} vs {e}",
                            ty.name()
                        );
                    }
                }
                let mut got = vec![0.0f32; n_tokens * sel.len()];
                matmul_with(&m, Some(&sel), &acts, &mut got, 2, backend).unwrap();
                assert!(
                    got.iter()
                        .zip(&want_sel)
                        .all(|(g, e)| g.to_bits() == e.to_bits()),
                    "{} row selection on {backend:?}",
                    ty.name()
                );
            }
        }
    }
}

#[test]
fn bad_shapes_and_types_are_invalid_arguments() {
    let w = vec![0u8; 2 * 20];
    let is_invalid = |r: stepscore::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(QMatrix::new(GgmlType::Q4_1, 2, 32, &w[..39]).is_err());
    assert!(QMatrix::new(GgmlType::Q4_1, 2, 31, &w).is_err());
    assert!(QMatrix::new(GgmlType::Q4_1, usize::MAX, 32, &w).is_err());
    assert!(QMatrix::new(GgmlType::Q8K, 1, 256, &[0u8; 292]).is_err());
    let m = QMatrix::new(GgmlType::Q4_1, 2, 32, &w).unwrap();
    assert!(m.row(2).is_err());
    // a hand-built matrix with inconsistent fields is rejected, not indexed
    let forged = QMatrix {
        ty: GgmlType::Q4_1,
        rows: 3,
        cols: 32,
        data: &w,
    };
    assert!(forged.row(2).is_err());
    assert!(is_invalid(matmul(
        &forged,
        &[0.5f32; 32],
        1,
        &mut [0.0f32; 3],
        1
    )));
    let x = vec![0.5f32; 64];
    let mut out = vec![0.0f32; 4];
    assert!(is_invalid(matmul(&m, &x, 2, &mut out[..3], 1)));
    assert!(is_invalid(matmul(&m, &x[..63], 2, &mut out, 1)));
    assert!(is_invalid(matmul_rows(&m, &[0, 2], &x, 2, &mut out, 1)));
    let q80 = QuantizedActs::new(GgmlType::Q8_0, &x, 2, 32).unwrap();
    assert!(is_invalid(matmul_quantized(&m, &q80, &mut out, 1)));
    let wide = QuantizedActs::new(GgmlType::Q8_1, &x, 1, 64).unwrap();
    assert!(is_invalid(matmul_quantized(&m, &wide, &mut out[..2], 1)));
    assert!(QuantizedActs::new(GgmlType::Q4_0, &x, 2, 32).is_err());
    assert!(QuantizedActs::new(GgmlType::Q8K, &x, 2, 32).is_err());
    assert!(matmul(&m, &x, 2, &mut out, 0).is_ok());
    let mut empty: Vec<f32> = vec![];
    assert!(matmul(&m, &[], 0, &mut empty, 2).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn random_shapes_match_reference_on_every_backend(
        ty_idx in 0usize..WEIGHT_TYPES.len(),
        rows in 1usize..9,
        n_tokens in 1usize..10,
        blocks in 1usize..4,
        seed in any::<u64>(),
        threads in 1usize..4,
    ) {
        let ty = WEIGHT_TYPES[ty_idx];
        let mut rng = Rng(seed);
        let cols = cols_for(ty, blocks);
        let w = random_weights(ty, rows, cols, &mut rng);
        let m = QMatrix::new(ty, rows, cols, &w).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols).map(|_| rng.sym() * 3.0).collect();
        let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
        for backend in backends() {
            let mut out = vec![f32::NAN; n_tokens * rows];
            matmul_with(&m, None, &acts, &mut out, threads, backend).unwrap();
            check_against_reference(ty, &w, rows, cols, &x, n_tokens, &out);
        }
    }
}
