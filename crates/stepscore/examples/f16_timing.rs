//! GPU time of one F16 matrix x activations product (not a test): the
//! 16-bit kernel (rounding pass + matmul_float16.wgsl) against the same
//! weights widened to f32 on matmul_f32.wgsl, interleaved, best of `iters`:
//!
//!     cargo run -p stepscore --features gpu --example f16_timing -- [rows cols tokens iters]
//!
//! Defaults: 1536 x 576 (SmolLM2's gate/up) times 64 tokens, 5 runs.

#[cfg(feature = "gpu")]
fn main() -> stepscore::Result<()> {
    use std::time::Instant;
    use stepscore::engine::testing::GpuTensor;
    use stepscore::engine::{GgmlType, GpuContext, GpuMatrix, GpuOptions, Matrix, SharedBytes};
    let mut a = Vec::new();
    for arg in std::env::args().skip(1) {
        a.push(arg.parse::<usize>().map_err(|_| {
            stepscore::Error::InvalidArgument(format!(
                "`{arg}`: the arguments are rows cols tokens iters, positive integers"
            ))
        })?);
    }
    let g = |i: usize, d: usize| a.get(i).copied().unwrap_or(d);
    let (rows, cols, n, iters) = (g(0, 1536), g(1, 576), g(2, 64), g(3, 5).max(1));
    let ctx = GpuContext::new(GpuOptions::default())?;
    eprintln!("{}", ctx.adapter());
    let mut s = 1u64;
    let mut r = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    };
    let v: Vec<f32> = (0..rows * cols).map(|_| r()).collect();
    let bytes = stepscore::engine::testing::quantize_weights(GgmlType::F16, &v, rows, cols)?;
    let w16 = Matrix::quant(GgmlType::F16, rows, cols, SharedBytes::owned(bytes))?;
    let w32 = w16.to_f32()?;
    let (g16, g32) = (
        GpuMatrix::upload(&ctx, &w16)?,
        GpuMatrix::upload(&ctx, &w32)?,
    );
    let x: Vec<f32> = (0..n * cols).map(|_| r()).collect();
    let xt = GpuTensor::from_slice(&ctx, &x)?;
    let (mut b16, mut b32) = (f64::MAX, f64::MAX);
    for i in 0..=iters {
        for (m, best) in [(&g16, &mut b16), (&g32, &mut b32)] {
            ctx.wait_idle()?;
            let t = Instant::now();
            let y = m.matmul(&ctx, &xt, n)?;
            ctx.wait_idle()?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            drop(y);
            if i > 0 {
                *best = best.min(ms);
            }
        }
    }
    println!("{rows}x{cols}, {n} tokens: float16 kernel {b16:.1} ms, f32 kernel on widened weights {b32:.1} ms (best of {iters})");
    Ok(())
}

#[cfg(not(feature = "gpu"))]
fn main() {
    eprintln!("f16_timing needs the `gpu` feature: cargo run -p stepscore --features gpu --example f16_timing");
}
