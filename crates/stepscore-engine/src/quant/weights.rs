//! Quantizing f32 weights at load time (Hugging Face checkpoints arrive as
//! f32/f16/bf16): llama.cpp's reference quantizers for Q8_0 and Q4_0, so a
//! matrix quantized here holds the same blocks llama.cpp's converter writes.

use super::act::quantize_row_q8_0;
use super::fp::{f32_to_bf16, f32_to_f16};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// The block types [`quantize_weights`] can produce (it also converts to
/// F16 and BF16, rounding to nearest even).
#[cfg(any(test, feature = "testing"))]
pub const LOAD_TIME_TYPES: [GgmlType; 2] = [GgmlType::Q8_0, GgmlType::Q4_0];

/// Quantizes a row-major `rows x cols` f32 matrix into ggml blocks of `ty`
/// (Q8_0 or Q4_0; `cols` must be a multiple of 32), or converts it to F16 or
/// BF16 rows (any `cols`), ggml's conversions bit for bit.
pub fn quantize_weights(ty: GgmlType, data: &[f32], rows: usize, cols: usize) -> Result<Vec<u8>> {
    if matches!(ty, GgmlType::F16 | GgmlType::BF16) {
        if Some(data.len()) != rows.checked_mul(cols) {
            return Err(Error::InvalidArgument(format!(
                "cannot convert a {rows}x{cols} matrix of {} values to {}",
                data.len(),
                ty.name()
            )));
        }
        let half = if ty == GgmlType::F16 {
            f32_to_f16
        } else {
            f32_to_bf16
        };
        return Ok(data.iter().flat_map(|&v| half(v).to_le_bytes()).collect());
    }
    if cols % 32 != 0 || Some(data.len()) != rows.checked_mul(cols) {
        return Err(Error::InvalidArgument(format!(
            "cannot quantize a {rows}x{cols} matrix of {} values to {} (rows must be whole 32-value blocks)",
            data.len(),
            ty.name()
        )));
    }
    let blocks = data.len() / 32;
    let mut out = vec![0u8; blocks * ty.block_bytes()];
    match ty {
        GgmlType::Q8_0 => quantize_row_q8_0(data, &mut out)?,
        GgmlType::Q4_0 => {
            for (x, o) in data.chunks_exact(32).zip(out.chunks_exact_mut(18)) {
                q4_0_block(x, o);
            }
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "load-time quantization to {} is not supported (Q8_0, Q4_0)",
                other.name()
            )))
        }
    }
    Ok(out)
}

/// `quantize_row_q4_0_ref`: the scale maps the value of largest magnitude
/// to -8, quants are offset by 8 and truncated after adding 8.5.
fn q4_0_block(x: &[f32], out: &mut [u8]) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    out[..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
    for j in 0..16 {
        let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
        let q1 = ((x[16 + j] * id + 8.5) as i8).min(15) as u8;
        out[2 + j] = q0 | (q1 << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize_row, f16_to_f32};

    #[test]
    fn round_trip_error_is_within_a_quantization_step() {
        // A deterministic spread of values, including a zero block.
        let mut x: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        x[32..64].iter_mut().for_each(|v| *v = 0.0);
        for ty in LOAD_TIME_TYPES {
            let q = quantize_weights(ty, &x, 2, 128).unwrap();
            let mut back = vec![0.0f32; x.len()];
            dequantize_row(ty, &q, &mut back).unwrap();
            for (b, (xs, bs)) in x.chunks(32).zip(back.chunks(32)).enumerate() {
                let block = &q[b * ty.block_bytes()..];
                let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]])).abs();
                for (v, w) in xs.iter().zip(bs) {
                    // Half a quantization step, plus the f16 rounding of the scale
                    // (relative 2^-11) times the largest quant (8 or 127). Q4_0's
                    // range is -8..7 steps, so values on the side opposite the
                    // largest magnitude clip by up to one whole step.
                    let steps = if ty == GgmlType::Q4_0 { 1.0 } else { 0.5 };
                    let bound = steps * d + v.abs() * 2f32.powi(-10) + 1e-6;
                    assert!(
                        (v - w).abs() <= bound,
                        "{ty:?} block {b}: {v} -> {w} (d {d})"
                    );
                }
            }
        }
    }

    #[test]
    fn q4_0_matches_a_hand_worked_block() {
        // max magnitude -16 -> d = 2, id = 0.5; 6 -> 6*0.5+8.5 = 11.5 -> 11;
        // -16 -> 0.5 -> 0; 0 -> 8.5 -> 8.
        let mut x = [0.0f32; 32];
        x[0] = 6.0;
        x[16] = -16.0;
        let q = quantize_weights(GgmlType::Q4_0, &x, 1, 32).unwrap();
        assert_eq!(f16_to_f32(u16::from_le_bytes([q[0], q[1]])), 2.0);
        assert_eq!(q[2], 11);
        assert_eq!(q[3], 8 | (8 << 4));
        assert!(quantize_weights(GgmlType::Q4_0, &x[..20], 1, 20).is_err());
        assert!(quantize_weights(GgmlType::Q6K, &x, 1, 32).is_err());
    }

    #[test]
    fn f16_and_bf16_conversions_round_each_value_to_nearest_even() {
        // 1 + 2^-11 is halfway between two f16 values: the even one (1.0)
        // wins; 1 + 2^-8 + 2^-9 is exact in f16 and rounds up in bf16 (7
        // fraction bits) to 1 + 2^-7.
        let x = [
            1.0 + 2f32.powi(-11),
            -2.5,
            1.0 + 2f32.powi(-8) + 2f32.powi(-9),
        ];
        let h = quantize_weights(GgmlType::F16, &x, 1, 3).unwrap();
        assert_eq!(h, [0x00, 0x3C, 0x00, 0xC1, 0x06, 0x3C]);
        let b = quantize_weights(GgmlType::BF16, &x, 3, 1).unwrap();
        assert_eq!(b, [0x80, 0x3F, 0x20, 0xC0, 0x81, 0x3F]);
        assert!(quantize_weights(GgmlType::F16, &x, 2, 2).is_err());
    }
}
