//! Shared by the gpu_* tests: one context for the test binary (None without an
//! adapter: the test prints `SKIPPED: no GPU adapter (...)` and passes,
//! unless STEPSCORE_REQUIRE_GPU=1), deterministic random data, and random
//! ggml matrices with sane scales.
#![allow(dead_code)]

use std::sync::OnceLock;

use stepscore::engine::testing::{f32_to_bf16, f32_to_f16};
use stepscore::engine::{GgmlType, GpuContext, GpuOptions, Matrix, SharedBytes};

pub fn ctx() -> Option<&'static GpuContext> {
    static CTX: OnceLock<Option<GpuContext>> = OnceLock::new();
    CTX.get_or_init(|| open(GpuOptions::default())).as_ref()
}

/// A context of its own, shareable (`GpuTransformer::upload` takes an Arc).
pub fn arc_ctx() -> Option<std::sync::Arc<GpuContext>> {
    if !have_adapter() {
        return None;
    }
    open(GpuOptions::default()).map(std::sync::Arc::new)
}

/// Largest |a - b| / (1 + |b|).
pub fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).abs() / (1.0 + (y as f64).abs()))
        .fold(0.0, f64::max)
}

pub fn open(options: GpuOptions) -> Option<GpuContext> {
    match GpuContext::new(options) {
        Ok(c) => {
            eprintln!("adapter: {}", c.adapter());
            Some(c)
        }
        Err(e) => {
            skip_or_fail(&e.to_string());
            None
        }
    }
}

pub fn skip_or_fail(why: &str) {
    assert!(
        std::env::var("STEPSCORE_REQUIRE_GPU").map_or(true, |v| v != "1"),
        "STEPSCORE_REQUIRE_GPU=1 but no GPU context: {why}"
    );
    eprintln!("SKIPPED: no GPU adapter ({why})");
}

/// Whether wgpu finds any adapter at all (tests that build their own
/// contexts skip when not).
pub fn have_adapter() -> bool {
    if GpuContext::adapters(None).is_empty() {
        skip_or_fail("wgpu found no adapter");
        return false;
    }
    true
}

/// xorshift64*: deterministic test data without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f() * scale).collect()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn put_f16(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
}

/// A `rows x cols` matrix of `ty`: random quants, scales in a sane range
/// (random bytes in f16 fields could be NaN or huge).
pub fn random_matrix(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> Matrix {
    if ty == GgmlType::F32 {
        return Matrix::from_f32(rows, cols, rng.vec(rows * cols, 1.0)).unwrap();
    }
    let (bb, be) = (ty.block_bytes(), ty.block_elems());
    let mut bytes = rng.bytes(rows * cols / be * bb);
    for b in bytes.chunks_exact_mut(bb) {
        let d = 0.01 + 0.04 * rng.f().abs();
        match ty {
            GgmlType::Q8_0 | GgmlType::Q4_0 => put_f16(b, 0, d * rng.f().signum()),
            GgmlType::Q5_0 => put_f16(b, 0, 0.5 * d * rng.f().signum()),
            GgmlType::Q4_1 => {
                put_f16(b, 0, d);
                put_f16(b, 2, -8.0 * d + 0.1 * rng.f());
            }
            GgmlType::Q5_1 => {
                put_f16(b, 0, 0.5 * d);
                put_f16(b, 2, -8.0 * d + 0.1 * rng.f());
            }
            GgmlType::Q4K | GgmlType::Q5K => {
                put_f16(b, 0, d * 0.1);
                put_f16(b, 2, d * 0.05);
            }
            GgmlType::Q6K => put_f16(b, 208, d * 0.05),
            GgmlType::F16 => {
                for v in b.chunks_exact_mut(2) {
                    put_f16(v, 0, rng.f());
                }
            }
            GgmlType::BF16 => {
                for v in b.chunks_exact_mut(2) {
                    v.copy_from_slice(&f32_to_bf16(rng.f()).to_le_bytes());
                }
            }
            _ => panic!("no generator for {ty:?}"),
        }
    }
    Matrix::quant(ty, rows, cols, SharedBytes::owned(bytes)).unwrap()
}

/// Asserts |got - want| <= tol * (1 + |want|) elementwise; returns the
/// largest |got - want| / (1 + |want|).
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(
            err <= tol * (1.0 + w.abs()),
            "{what}: element {i}: got {g}, want {w} (|Δ| = {err:e})"
        );
        worst = worst.max(err / (1.0 + w.abs()));
    }
    worst
}

/// A second context whose quantized matmuls emulate `dot4I8Packed` in core
/// WGSL (the path of WebGPU implementations without it).
pub fn emulated_ctx() -> Option<&'static GpuContext> {
    static CTX: OnceLock<Option<GpuContext>> = OnceLock::new();
    CTX.get_or_init(|| {
        open(GpuOptions {
            emulate_packed_dot: true,
            ..Default::default()
        })
    })
    .as_ref()
}
