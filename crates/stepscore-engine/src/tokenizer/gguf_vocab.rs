//! What both GGUF vocabulary readers (`from_gguf.rs` for BPE, `spm.rs` for
//! SentencePiece) share: llama.cpp's token types and the error rule.

use crate::error::Error;

// llama.cpp token types (llama_token_type in the GGUF spec).
pub(super) const TYPE_NORMAL: i32 = 1;
pub(super) const TYPE_UNKNOWN: i32 = 2;
pub(super) const TYPE_CONTROL: i32 = 3;
pub(super) const TYPE_USER_DEFINED: i32 = 4;
pub(super) const TYPE_BYTE: i32 = 6;

/// Metadata getter errors are about the tokenizer here; report them so.
pub(super) fn as_tokenizer_error(e: Error) -> Error {
    match e {
        Error::Model { file, message } => Error::Tokenizer(format!("{file}: {message}")),
        other => other,
    }
}
