//! Pre-tokenizer splits for byte-level BPE vocabularies, keyed by the
//! `tokenizer.ggml.pre` names llama.cpp gives them. The regexes are the ones
//! llama.cpp uses (its case-insensitive contractions spelled out as
//! `'[sS]`), applied in order, each splitting the pieces the previous one
//! left, with unmatched text kept as its own piece (HF's "isolated" split).

use crate::error::{Error, Result};

/// GPT-2's split: contractions, letter runs, number runs, other runs, and
/// whitespace not followed by a non-space.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Llama 3: numbers in groups of at most three, one optional leading
/// non-letter before a letter run, newlines kept with trailing punctuation.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Qwen2: as Llama 3 but every digit on its own.
const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A family of pre-tokenizers that share one split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreTokenizer {
    Gpt2,
    Llama3,
    Qwen2,
    /// Every digit split off first, then GPT-2's split (SmolLM, StarCoder).
    Smollm,
}

impl PreTokenizer {
    /// The family for a `tokenizer.ggml.pre` value, as llama.cpp maps them.
    pub fn from_ggml_pre(name: &str) -> Result<Self> {
        Ok(match name {
            "gpt-2" | "phi-2" | "mpt" | "olmo" | "jina-es" | "jina-de" | "jina-v2-es" | "jina-v2-de" => Self::Gpt2,
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "dbrx" | "smaug-bpe" => Self::Llama3,
            "qwen2" | "deepseek-r1-qwen" | "stablelm2" | "megrez" => Self::Qwen2,
            "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" | "exaone" | "minerva-7b" => Self::Smollm,
            other => {
                return Err(Error::Tokenizer(format!(
                    "unsupported tokenizer.ggml.pre `{other}` (supported: gpt-2, llama-bpe, qwen2, smollm and their aliases)"
                )))
            }
        })
    }

    /// The regexes to split with, in order.
    pub fn regexes(self) -> &'static [&'static str] {
        match self {
            Self::Gpt2 => &[GPT2],
            Self::Llama3 => &[LLAMA3],
            Self::Qwen2 => &[QWEN2],
            Self::Smollm => &[r"\p{N}", GPT2],
        }
    }

    /// Whether a pre-token found whole in the vocabulary skips BPE merging
    /// (llama.cpp's `ignore_merges`, set for the Llama 3 names it lists).
    pub fn ignore_merges(name: &str) -> bool {
        matches!(name, "llama3" | "llama-v3" | "llama-bpe" | "falcon3")
    }
}
