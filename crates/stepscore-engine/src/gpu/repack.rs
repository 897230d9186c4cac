//! Weight layouts on the device. ggml blocks are not all 4-byte multiples
//! (Q4_0 is 18 bytes, Q5_0 22, Q8_0 34, Q6_K 210), and WGSL storage buffers
//! are read as u32 words, so blocks are padded at upload to a whole number
//! of words: two zero bytes after the f16 scale for Q4_0, Q5_0 and Q8_0 (so
//! the high bits and quants start word-aligned), two at the end for Q6_K.
//! Q4_1 (20 bytes), Q5_1 (24), Q4_K (144) and Q5_K (176) are copied as they
//! are. Every other field keeps its ggml position, so the shaders read the
//! layouts documented in quant/dequant.rs, shifted by the padding. f16
//! scales are read in the shader with `unpack2x16float`, which is core WGSL:
//! no quantized kernel needs the `shader-f16` feature.
//!
//! F16 and BF16 matrices stay 16-bit (`float16_rows`): each row padded with
//! zeros to a multiple of 8 values (one 16-byte group, the float16 kernels'
//! unit of load), interleaved by row a group at a time. The F16 kernel
//! reads them as `f16` where the device has `shader-f16` and as u32 words
//! widened with `unpack2x16float` where it does not (the same bits); BF16 is
//! widened by a shift. F32 rows are uploaded as they are.
//!
//! Not here, on purpose: Q8_K and Q8_1 are activation formats that ggml
//! never multiplies as weights (`quant::vec_dot_type` has no entry for
//! them, so `Matrix::quant` refuses them and no model the engine loads can
//! hold one); Q2_K and Q3_K have no kernel yet and are refused by name.
//!
//! The upload then interleaves the padded rows word by word (word j of row r
//! at `j * rows + r`, see `interleave_rows` in matmul.rs) so the invocations
//! of a workgroup, one row each, read neighbouring words (coalesced loads on
//! GPUs). The shaders' `wl(j)` reads word j of the invocation's row.

use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// How one weight type sits in device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuWeightLayout {
    pub ty: GgmlType,
    /// Bytes of a ggml block.
    pub block_bytes: usize,
    /// u32 words of a block on the device.
    pub block_words: usize,
    /// Where the zero padding goes (byte offset in the ggml block).
    pub pad_at: usize,
}

/// The device layout of `ty`, or `None` when there is no kernel for it.
pub fn gpu_weight_layout(ty: GgmlType) -> Option<GpuWeightLayout> {
    let (pad_at, block_words) = match ty {
        GgmlType::Q8_0 => (2, 9),
        GgmlType::Q4_0 => (2, 5),
        GgmlType::Q4_1 => (20, 5),
        GgmlType::Q5_0 => (2, 6),
        GgmlType::Q5_1 => (24, 6),
        GgmlType::Q4K => (144, 36),
        GgmlType::Q5K => (176, 44),
        GgmlType::Q6K => (210, 53),
        _ => return None,
    };
    Some(GpuWeightLayout {
        ty,
        block_bytes: ty.block_bytes(),
        block_words,
        pad_at,
    })
}

/// Repacks whole ggml blocks of `ty` into device words (little endian).
pub fn repack_blocks(ty: GgmlType, src: &[u8]) -> Result<Vec<u32>> {
    let layout = gpu_weight_layout(ty)
        .ok_or_else(|| Error::Gpu(format!("no GPU weight layout for {} blocks", ty.name())))?;
    let bb = layout.block_bytes;
    if src.len() % bb != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} weights: {} bytes is not a whole number of {bb}-byte blocks",
            ty.name(),
            src.len()
        )));
    }
    let pad = layout.block_words * 4 - bb;
    let mut out = Vec::with_capacity(src.len() / bb * layout.block_words);
    let mut block = vec![0u8; layout.block_words * 4];
    for b in src.chunks_exact(bb) {
        let (head, tail) = b.split_at(layout.pad_at);
        block[..head.len()].copy_from_slice(head);
        block[head.len()..head.len() + pad].fill(0);
        block[head.len() + pad..].copy_from_slice(tail);
        out.extend(
            block
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
        );
    }
    Ok(out)
}

/// 16-bit values of a padded float16 row group (the kernels' unit of load).
pub const FLOAT16_GROUP: usize = 8;

/// Groups of a padded float16 row of `cols` values.
pub fn float16_groups(cols: usize) -> usize {
    cols.div_ceil(FLOAT16_GROUP)
}

/// `n` rows of `cols` F16 or BF16 values (little endian, as in ggml) ->
/// row-major device words, each row padded with zeros to
/// `float16_groups(cols) * 4` words; the value of column c is the low half of
/// word c / 2 for even c, the high half for odd c.
pub fn float16_rows(ty: GgmlType, src: &[u8], n: usize, cols: usize) -> Result<Vec<u32>> {
    if !matches!(ty, GgmlType::F16 | GgmlType::BF16) {
        return Err(Error::Internal(format!(
            "float16_rows takes F16 or BF16, not {}",
            ty.name()
        )));
    }
    if n.checked_mul(cols).and_then(|v| v.checked_mul(2)) != Some(src.len()) {
        return Err(Error::InvalidArgument(format!(
            "{} weights: {} bytes is not {n} rows of {cols} values",
            ty.name(),
            src.len()
        )));
    }
    let words = float16_groups(cols) * FLOAT16_GROUP / 2;
    let mut out = vec![0u32; n * words];
    for (row, o) in src
        .chunks_exact((cols * 2).max(1))
        .zip(out.chunks_exact_mut(words.max(1)))
    {
        for (c, h) in row.chunks_exact(2).enumerate() {
            o[c / 2] |= u32::from(u16::from_le_bytes([h[0], h[1]])) << (16 * (c % 2));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float16_rows_pad_to_whole_groups_low_half_first() {
        // 2 rows of 3 values: row r value c = 0x0100 * (r + 1) + c.
        let vals: [u16; 6] = [0x0100, 0x0101, 0x0102, 0x0200, 0x0201, 0x0202];
        let src: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = float16_rows(GgmlType::F16, &src, 2, 3).unwrap();
        assert_eq!(w.len(), 8);
        assert_eq!(&w[..4], &[0x0101_0100, 0x0000_0102, 0, 0]);
        assert_eq!(&w[4..], &[0x0201_0200, 0x0000_0202, 0, 0]);
        assert_eq!(float16_groups(8), 1);
        assert_eq!(float16_groups(9), 2);
        assert!(float16_rows(GgmlType::BF16, &src[..5], 2, 3).is_err());
        assert!(float16_rows(GgmlType::Q8_0, &src, 2, 3).is_err());
    }

    #[test]
    fn layouts_are_whole_words_with_at_most_three_pad_bytes() {
        for ty in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q4K,
            GgmlType::Q5K,
            GgmlType::Q6K,
        ] {
            let l = gpu_weight_layout(ty).unwrap();
            let pad = l.block_words * 4 - l.block_bytes;
            assert!(pad < 4, "{ty:?}");
            assert!(l.pad_at <= l.block_bytes);
        }
        for ty in [GgmlType::Q8K, GgmlType::Q8_1, GgmlType::Q2K, GgmlType::Q3K] {
            assert!(gpu_weight_layout(ty).is_none(), "{ty:?}");
        }
    }

    #[test]
    fn q5_0_and_q5_1_share_one_word_layout() {
        // Q5_0: d @0, qh @2, qs @6 -> word 0 = d, word 1 = qh, words 2..5 = qs.
        let mut b = vec![0x00, 0x3C, 0xA1, 0xB2, 0xC3, 0xD4];
        b.extend(1..=16u8);
        let w = repack_blocks(GgmlType::Q5_0, &b).unwrap();
        assert_eq!(w.len(), 6);
        assert_eq!(w[0], 0x3C00);
        assert_eq!(w[1], 0xD4C3_B2A1);
        assert_eq!(w[2], u32::from_le_bytes([1, 2, 3, 4]));
        assert_eq!(w[5], u32::from_le_bytes([13, 14, 15, 16]));
        // Q5_1: d @0, m @2, qh @4, qs @8, copied as it is.
        let mut b = vec![0x00, 0x3C, 0x00, 0xBC, 0xA1, 0xB2, 0xC3, 0xD4];
        b.extend(1..=16u8);
        let w = repack_blocks(GgmlType::Q5_1, &b).unwrap();
        assert_eq!(w.len(), 6);
        assert_eq!(w[0], 0xBC00_3C00);
        assert_eq!(w[1], 0xD4C3_B2A1);
        assert_eq!(w[2], u32::from_le_bytes([1, 2, 3, 4]));
    }

    #[test]
    fn q5_k_is_copied_word_for_word() {
        let b: Vec<u8> = (0..176u32).map(|i| (i * 7) as u8).collect();
        let w = repack_blocks(GgmlType::Q5K, &b).unwrap();
        assert_eq!(w.len(), 44);
        let want: Vec<u32> = b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(w, want);
    }

    #[test]
    fn q8_0_scale_stays_in_word_0_and_quants_start_at_word_1() {
        // d = 0x3C00 (1.0 in f16), quants 1..=32.
        let mut b = vec![0x00, 0x3C];
        b.extend(1..=32u8);
        let w = repack_blocks(GgmlType::Q8_0, &b).unwrap();
        assert_eq!(w.len(), 9);
        assert_eq!(w[0], 0x3C00);
        assert_eq!(w[1], u32::from_le_bytes([1, 2, 3, 4]));
        assert_eq!(w[8], u32::from_le_bytes([29, 30, 31, 32]));
    }

    #[test]
    fn q6_k_pads_at_the_end_and_rejects_partial_blocks() {
        let b: Vec<u8> = (0..210u32).map(|i| i as u8).collect();
        let w = repack_blocks(GgmlType::Q6K, &b).unwrap();
        assert_eq!(w.len(), 53);
        assert_eq!(w[0], u32::from_le_bytes([0, 1, 2, 3]));
        assert_eq!(w[52], u32::from_le_bytes([208, 209, 0, 0]));
        assert!(repack_blocks(GgmlType::Q6K, &b[..209]).is_err());
    }
}
