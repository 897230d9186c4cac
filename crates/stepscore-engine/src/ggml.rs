//! ggml tensor element types: ids as GGUF stores them, block geometry, and
//! overflow-checked byte sizes. Shared by the GGUF reader and the quantized
//! kernels.

use crate::error::{Error, Result};

/// A ggml tensor type, with the numeric id GGUF files use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
    Q8K,
    BF16,
}

impl GgmlType {
    /// The type for a GGUF type id, or `None` for ids this crate does not read.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            9 => GgmlType::Q8_1,
            10 => GgmlType::Q2K,
            11 => GgmlType::Q3K,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            15 => GgmlType::Q8K,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q8_1 => 9,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Q8K => 15,
            GgmlType::BF16 => 30,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q8_1 => "Q8_1",
            GgmlType::Q2K => "Q2_K",
            GgmlType::Q3K => "Q3_K",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
            GgmlType::Q8K => "Q8_K",
            GgmlType::BF16 => "BF16",
        }
    }

    /// Elements per block (1 for plain float types).
    pub fn block_elems(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q8_1 => 32,
            GgmlType::Q2K
            | GgmlType::Q3K
            | GgmlType::Q4K
            | GgmlType::Q5K
            | GgmlType::Q6K
            | GgmlType::Q8K => 256,
        }
    }

    /// Bytes per block, as ggml lays blocks out.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 2 + 16,
            GgmlType::Q4_1 => 2 + 2 + 16,
            GgmlType::Q5_0 => 2 + 4 + 16,
            GgmlType::Q5_1 => 2 + 2 + 4 + 16,
            GgmlType::Q8_0 => 2 + 32,
            GgmlType::Q8_1 => 2 + 2 + 32,
            GgmlType::Q2K => 256 / 16 + 256 / 4 + 2 + 2,
            GgmlType::Q3K => 256 / 8 + 256 / 4 + 12 + 2,
            GgmlType::Q4K => 2 + 2 + 12 + 256 / 2,
            GgmlType::Q5K => 2 + 2 + 12 + 256 / 8 + 256 / 2,
            GgmlType::Q6K => 256 / 2 + 256 / 4 + 256 / 16 + 2,
            GgmlType::Q8K => 4 + 256 + 2 * 256 / 16,
        }
    }

    /// Bytes taken by `n_elems` elements; an error when `n_elems` is not a
    /// whole number of blocks or the size overflows.
    pub fn bytes_for(self, n_elems: u64) -> Result<u64> {
        let be = self.block_elems() as u64;
        if n_elems % be != 0 {
            return Err(Error::InvalidArgument(format!(
                "{} elements is not a multiple of the {} block size {be}",
                n_elems,
                self.name()
            )));
        }
        (n_elems / be)
            .checked_mul(self.block_bytes() as u64)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{} tensor of {n_elems} elements overflows",
                    self.name()
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for id in 0..64 {
            if let Some(t) = GgmlType::from_id(id) {
                assert_eq!(t.id(), id);
            }
        }
        // Sizes from ggml.c's type_traits table.
        assert_eq!(GgmlType::Q4_0.block_bytes(), 18);
        assert_eq!(GgmlType::Q4_1.block_bytes(), 20);
        assert_eq!(GgmlType::Q5_0.block_bytes(), 22);
        assert_eq!(GgmlType::Q5_1.block_bytes(), 24);
        assert_eq!(GgmlType::Q8_0.block_bytes(), 34);
        assert_eq!(GgmlType::Q2K.block_bytes(), 84);
        assert_eq!(GgmlType::Q3K.block_bytes(), 110);
        assert_eq!(GgmlType::Q4K.block_bytes(), 144);
        assert_eq!(GgmlType::Q5K.block_bytes(), 176);
        assert_eq!(GgmlType::Q6K.block_bytes(), 210);
        assert_eq!(GgmlType::Q8K.block_bytes(), 292);
        assert!(GgmlType::Q4_0.bytes_for(33).is_err());
        assert!(GgmlType::F32.bytes_for(u64::MAX).is_err());
    }
}
