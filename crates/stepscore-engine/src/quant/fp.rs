//! Half-precision conversions with ggml's exact semantics.
//!
//! ggml converts with bit tricks (after Maratyszcza's FP16 library) rather
//! than with hardware instructions on the reference path; these ports give the
//! same bits for every input, NaNs included, so dequantized values and
//! activation scales match llama.cpp exactly.

/// f16 bits -> f32, exact (every f16 is representable in f32).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    // Normal numbers: move the exponent/mantissa into f32 position, then
    // rebias by multiplying with 2^-112 (exact).
    let exp_offset: u32 = 0xE0 << 23;
    let normalized = f32::from_bits((two_w >> 4) + exp_offset) * f32::from_bits(0x0780_0000);
    // Subnormals: build 0.5 + m*2^-24 style value and subtract the bias.
    let magic_mask: u32 = 126 << 23;
    let denormalized = f32::from_bits((two_w >> 17) | magic_mask) - 0.5;
    let cutoff: u32 = 1 << 27;
    let bits = if two_w < cutoff {
        denormalized.to_bits()
    } else {
        normalized.to_bits()
    };
    f32::from_bits(sign | bits)
}

/// f32 -> f16 bits, round to nearest even; NaN becomes the quiet NaN 0x7E00
/// (with the sign kept), as ggml does.
#[inline]
pub fn f32_to_f16(f: f32) -> u16 {
    // Scaling up then down lets the FPU do the rounding of the mantissa.
    let scale_to_inf = f32::from_bits(0x7780_0000); // 2^112
    let scale_to_zero = f32::from_bits(0x0880_0000); // 2^-110
    let mut base = (f.abs() * scale_to_inf) * scale_to_zero;
    let w = f.to_bits();
    let shl1_w = w.wrapping_add(w);
    let sign = w & 0x8000_0000;
    let mut bias = shl1_w & 0xFF00_0000;
    if bias < 0x7100_0000 {
        bias = 0x7100_0000;
    }
    base += f32::from_bits((bias >> 1) + 0x0780_0000);
    let bits = base.to_bits();
    let exp_bits = (bits >> 13) & 0x7C00;
    let mantissa_bits = bits & 0x0FFF;
    let nonsign = exp_bits + mantissa_bits;
    let r = if shl1_w > 0xFF00_0000 {
        0x7E00
    } else {
        nonsign
    };
    ((sign >> 16) | r) as u16
}

/// bf16 bits -> f32, exact.
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 -> bf16 bits, round to nearest even, NaNs forced quiet; subnormals
/// are kept (not flushed), as in ggml.
#[inline]
pub fn f32_to_bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

/// Little-endian u16 at `off`; callers guarantee the bounds by construction
/// (block slices of a validated size).
#[inline(always)]
pub(crate) fn le_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

#[inline(always)]
pub(crate) fn le_f16(b: &[u8], off: usize) -> f32 {
    f16_to_f32(le_u16(b, off))
}
