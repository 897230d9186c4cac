//! GPU vs CPU time of one weight x activations product (not a test):
//!
//!     cargo run -p stepscore --features gpu --example gpu_matmul_timing -- [rows cols tokens iters]
//!
//! Defaults: a 576x576 Q4_1 matrix (SmolLM2-135M's attention projections)
//! times 64 tokens. Prints the adapter, then milliseconds per product for
//! the CPU engine (ggml path: activations quantized to Q8_1; and on the
//! dequantized f32 matrix) and the GPU (kernel only, and with upload and
//! readback).

#[cfg(feature = "gpu")]
fn main() -> stepscore::Result<()> {
    use std::time::Instant;
    use stepscore::engine::testing::f32_to_f16;
    use stepscore::engine::testing::GpuTensor;
    use stepscore::engine::{GgmlType, GpuContext, GpuMatrix, GpuOptions, Matrix, SharedBytes};

    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let arg = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    let (rows, cols, tokens, iters) = (arg(0, 576), arg(1, 576), arg(2, 64), arg(3, 20).max(1));
    if cols % 32 != 0 {
        return Err(stepscore::Error::InvalidArgument(format!(
            "cols {cols} must be a multiple of 32"
        )));
    }

    // Deterministic pseudo-random Q4_1 blocks with sane scales.
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut bytes = vec![0u8; rows * cols / 32 * 20];
    for b in bytes.chunks_exact_mut(20) {
        b[0..2].copy_from_slice(&f32_to_f16(0.02).to_le_bytes());
        b[2..4].copy_from_slice(&f32_to_f16(-0.16).to_le_bytes());
        for q in &mut b[4..] {
            *q = next() as u8;
        }
    }
    let w = Matrix::quant(GgmlType::Q4_1, rows, cols, SharedBytes::owned(bytes))?;
    let wf = w.to_f32()?;
    let x: Vec<f32> = (0..tokens * cols)
        .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect();
    let mut out = vec![0f32; tokens * rows];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());

    let time = |f: &mut dyn FnMut() -> stepscore::Result<()>| -> stepscore::Result<f64> {
        f()?; // warm-up
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e3 / iters as f64)
    };

    let cpu_q = time(&mut || w.matmul(&x, tokens, &mut out, threads))?;
    let cpu_f = time(&mut || wf.matmul(&x, tokens, &mut out, threads))?;

    let ctx = GpuContext::new(GpuOptions::default())?;
    println!("adapter: {}", ctx.adapter());
    let g = GpuMatrix::upload(&ctx, &w)?;
    let xt = GpuTensor::from_slice(&ctx, &x)?;
    let gpu_kernel = time(&mut || {
        let y = g.matmul(&ctx, &xt, tokens)?;
        ctx.wait_idle()?;
        drop(y);
        Ok(())
    })?;
    let gpu_full = time(&mut || g.matmul_slice(&ctx, &x, tokens).map(drop))?;

    println!("{rows}x{cols} Q4_1 x {tokens} tokens, mean of {iters}:");
    println!("  CPU engine, Q4_1 (ggml path), {threads} threads: {cpu_q:8.3} ms");
    println!("  CPU engine, dequantized f32, {threads} threads:  {cpu_f:8.3} ms");
    println!("  GPU kernel only:                         {gpu_kernel:8.3} ms");
    println!("  GPU with upload and readback:            {gpu_full:8.3} ms");
    Ok(())
}

#[cfg(not(feature = "gpu"))]
fn main() {
    eprintln!("gpu_matmul_timing needs the `gpu` feature: cargo run -p stepscore --features gpu --example gpu_matmul_timing");
}
