//! The device layout of 8-bit activation blocks (`act.rs` writes them,
//! the matmul shaders read them): written here once; the shaders read it
//! through the constants [`DEFS`] that the runtime puts ahead of their
//! source. Apart from `act.rs` so the batch and the shader table, which
//! `act.rs` uses, can name it without an import circle.

use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::quant::vec_dot_type;

/// The two device forms of 8-bit activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActKind {
    /// Q8_0 / Q8_1 blocks of 32: `Q8_WORDS` words.
    Q8,
    /// Q8_K blocks of 256: `Q8K_WORDS` words.
    Q8K,
}

/// Forms of activations a batch may hold at once (one buffer each).
pub(crate) const ACT_KINDS: usize = 2;

/// Q8 block: 8 words of quants (4 a word, lowest byte first), then d and s
/// (the f16 values widened to f32, as `quant::BlockQ8` holds them).
pub(super) const Q8_QS: u32 = 0;
pub(super) const Q8_D: u32 = 8;
pub(super) const Q8_S: u32 = 9;
pub(super) const Q8_WORDS: u32 = 10;
/// Q8K block: 64 words of quants, 16 sums of 16 quants (i32), d (f32).
pub(super) const Q8K_QS: u32 = 0;
pub(super) const Q8K_BSUMS: u32 = 64;
pub(super) const Q8K_D: u32 = 80;
pub(super) const Q8K_WORDS: u32 = 81;

/// The layout above as WGSL constants (see `shaders::Shader::defs`).
pub(crate) const DEFS: &[(&str, u32)] = &[
    ("Q8_QS", Q8_QS),
    ("Q8_D", Q8_D),
    ("Q8_S", Q8_S),
    ("Q8_WORDS", Q8_WORDS),
    ("Q8K_QS", Q8K_QS),
    ("Q8K_BSUMS", Q8K_BSUMS),
    ("Q8K_D", Q8K_D),
    ("Q8K_WORDS", Q8K_WORDS),
];

impl ActKind {
    /// The 8-bit form a weight type multiplies, `None` for float weights.
    pub fn for_weight(ty: GgmlType) -> Option<ActKind> {
        match vec_dot_type(ty)? {
            GgmlType::Q8_0 | GgmlType::Q8_1 => Some(ActKind::Q8),
            GgmlType::Q8K => Some(ActKind::Q8K),
            _ => None,
        }
    }

    /// Values per block.
    pub fn block_elems(self) -> usize {
        match self {
            ActKind::Q8 => GgmlType::Q8_0.block_elems(),
            ActKind::Q8K => GgmlType::Q8K.block_elems(),
        }
    }

    fn block_words(self) -> usize {
        match self {
            ActKind::Q8 => Q8_WORDS as usize,
            ActKind::Q8K => Q8K_WORDS as usize,
        }
    }

    /// Bytes of `n_tokens` rows of `cols` values in this form.
    pub fn bytes(self, n_tokens: usize, cols: usize) -> Result<u64> {
        (cols / self.block_elems())
            .checked_mul(self.block_words() * 4)
            .and_then(|b| b.checked_mul(n_tokens))
            .map(|b| b as u64)
            .ok_or_else(|| Error::InvalidArgument("activations too large".into()))
    }
}
