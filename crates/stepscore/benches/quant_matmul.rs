//! Quantized matmul throughput on SmolLM2-135M shapes: 576x576 (attention
//! projections) and 1536x576 (ffn gate/up) Q4_1 matrices times 512 tokens,
//! 1 and 2 threads, on the detected backend and the portable one; and on
//! Qwen2.5-1.5B's K-quant shapes (Q4_K q/o and gate/up, Q6_K down) times 128
//! tokens on 2 threads, every x86 backend the CPU has.
//! Throughput is reported in "elements" = multiply-adds (GFLOP/s = 2 x Melem/s / 1000).
//!
//!     cargo bench -p stepscore --bench quant_matmul

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stepscore::engine::testing::{f32_to_f16, matmul_with, QMatrix};
use stepscore::engine::{GgmlType, QuantizedActs, Simd};

fn weights(ty: GgmlType, rows: usize, cols: usize) -> Vec<u8> {
    let bb = ty.block_bytes();
    let mut s: u32 = 0x9e37_79b9;
    let mut data: Vec<u8> = (0..rows * cols / ty.block_elems() * bb)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s as u8
        })
        .collect();
    // the f16 scale fields, so no block is NaN or subnormal
    let halves: &[(usize, f32)] = match ty {
        GgmlType::Q6K => &[(208, 0.01)],
        _ => &[(0, 0.01), (2, -0.05)],
    };
    for blk in data.chunks_exact_mut(bb) {
        for &(off, v) in halves {
            blk[off..off + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
        }
    }
    data
}

fn bench_k(c: &mut Criterion) {
    let n_tokens = 128;
    let mut g = c.benchmark_group("k_quant_matmul_128tok");
    g.sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    let backends: Vec<Simd> = [Simd::Avx2, Simd::AvxVnni, Simd::Avx512]
        .into_iter()
        .filter(|b| b.is_available())
        .collect();
    for (ty, rows, cols) in [
        (GgmlType::Q4K, 1536, 1536),
        (GgmlType::Q4K, 8960, 1536),
        (GgmlType::Q6K, 1536, 8960),
    ] {
        let w = weights(ty, rows, cols);
        let m = QMatrix::new(ty, rows, cols, &w).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let acts = QuantizedActs::for_weight(ty, &x, n_tokens, cols).unwrap();
        let mut out = vec![0.0f32; n_tokens * rows];
        g.throughput(Throughput::Elements((rows * cols * n_tokens) as u64));
        for &backend in &backends {
            g.bench_function(format!("{}/{rows}x{cols}/{backend:?}/2t", ty.name()), |b| {
                b.iter(|| matmul_with(&m, None, &acts, &mut out, 2, backend).unwrap())
            });
        }
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let n_tokens = 512;
    let mut g = c.benchmark_group("q4_1_matmul_512tok");
    g.sample_size(10);
    for (rows, cols) in [(576, 576), (1536, 576)] {
        let w = weights(GgmlType::Q4_1, rows, cols);
        let m = QMatrix::new(GgmlType::Q4_1, rows, cols, &w).unwrap();
        let x: Vec<f32> = (0..n_tokens * cols)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let acts = QuantizedActs::for_weight(GgmlType::Q4_1, &x, n_tokens, cols).unwrap();
        let mut out = vec![0.0f32; n_tokens * rows];
        g.throughput(Throughput::Elements((rows * cols * n_tokens) as u64));
        let mut backends = vec![Simd::Portable];
        if Simd::detect() != Simd::Portable {
            backends.push(Simd::detect());
        }
        for backend in backends {
            for threads in [1, 2] {
                g.bench_function(format!("{rows}x{cols}/{backend:?}/{threads}t"), |b| {
                    b.iter(|| matmul_with(&m, None, &acts, &mut out, threads, backend).unwrap())
                });
            }
        }
        // activation quantization is paid once per input, shared by q/k/v;
        // its throughput is in activation values
        g.throughput(Throughput::Elements((n_tokens * cols) as u64));
        g.bench_function(format!("quantize_acts_q8_1/{rows}x{cols}"), |b| {
            b.iter(|| QuantizedActs::for_weight(GgmlType::Q4_1, &x, n_tokens, cols).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_k);
criterion_main!(benches);
