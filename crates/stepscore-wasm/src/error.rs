//! The bindings' one error type: a stable machine-readable `code` plus the
//! core crate's message. JS receives it as an `Error` whose `code` property
//! is one of [`Code`]'s strings; the npm package documents the same list.

use std::fmt;

/// Stable error codes. Changing a string here is a breaking change of the
/// npm package's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A model file (GGUF, config.json, safetensors) is malformed or unsupported.
    ModelInvalid,
    /// tokenizer.json / tokenizer_config.json (or a GGUF's tokenizer metadata) is unusable.
    TokenizerInvalid,
    /// The tokenizer failed on a trace's text.
    TokenizeFailed,
    /// A trace passed to a scoring call is malformed.
    TraceInvalid,
    /// A trace is over the token limit.
    TraceTooLong,
    /// An option or helper argument is out of its domain.
    InvalidArgument,
    /// A file operation failed (not expected in a JS host; kept for completeness).
    Io,
    /// The GPU engine failed (device lost, validation, limits).
    Gpu,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ModelInvalid => "MODEL_INVALID",
            Code::TokenizerInvalid => "TOKENIZER_INVALID",
            Code::TokenizeFailed => "TOKENIZE_FAILED",
            Code::TraceInvalid => "TRACE_INVALID",
            Code::TraceTooLong => "TRACE_TOO_LONG",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::Io => "IO_ERROR",
            Code::Gpu => "GPU_ERROR",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub code: Code,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Error::new(Code::InvalidArgument, message)
    }

    pub fn trace(message: impl Into<String>) -> Self {
        Error::new(Code::TraceInvalid, message)
    }

    /// An error raised while building a scorer from model files.
    pub fn from_load(e: stepscore::Error) -> Self {
        let code = match &e {
            stepscore::Error::Model { file, .. } if file.starts_with("tokenizer") => {
                Code::TokenizerInvalid
            }
            stepscore::Error::Model { .. } | stepscore::Error::Input { .. } => Code::ModelInvalid,
            stepscore::Error::Tokenizer(_) => Code::TokenizerInvalid,
            stepscore::Error::InvalidArgument(_) => Code::InvalidArgument,
            stepscore::Error::TraceTooLong { .. } => Code::TraceTooLong,
            stepscore::Error::Io { .. } => Code::Io,
            stepscore::Error::Gpu(_) => Code::Gpu,
        };
        Error::new(code, e.to_string())
    }

    /// An error raised while scoring `what` (e.g. `trace`, `traces[2]`).
    pub fn from_score(what: &str, e: stepscore::Error) -> Self {
        let code = match &e {
            stepscore::Error::TraceTooLong { .. } => Code::TraceTooLong,
            stepscore::Error::Tokenizer(_) => Code::TokenizeFailed,
            // At scoring time the only argument is the trace: no steps, an
            // empty step, a step holding the family's marker token.
            stepscore::Error::InvalidArgument(_) | stepscore::Error::Input { .. } => {
                Code::TraceInvalid
            }
            stepscore::Error::Model { .. } => Code::ModelInvalid,
            stepscore::Error::Io { .. } => Code::Io,
            stepscore::Error::Gpu(_) => Code::Gpu,
        };
        Error::new(code, format!("{what}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_errors_name_the_tokenizer_files_apart_from_the_weights() {
        let tok = Error::from_load(stepscore::Error::model("tokenizer_config.json", "bad json"));
        assert_eq!(tok.code, Code::TokenizerInvalid);
        assert_eq!(tok.message, "tokenizer_config.json: bad json");
        let weights = Error::from_load(stepscore::Error::model("model.safetensors", "truncated"));
        assert_eq!(weights.code, Code::ModelInvalid);
        assert_eq!(
            Error::from_load(stepscore::Error::Tokenizer("x".into())).code,
            Code::TokenizerInvalid
        );
    }

    #[test]
    fn score_errors_keep_the_core_message_and_say_which_trace() {
        let e = Error::from_score(
            "traces[3]",
            stepscore::Error::TraceTooLong {
                tokens: 9000,
                limit: 8192,
            },
        );
        assert_eq!(e.code, Code::TraceTooLong);
        assert!(
            e.message
                .starts_with("traces[3]: the trace is 9000 tokens, over the limit of 8192"),
            "{}",
            e.message
        );
        assert_eq!(
            Error::from_score("trace", stepscore::Error::Tokenizer("x".into()))
                .code
                .as_str(),
            "TOKENIZE_FAILED"
        );
        let empty = Error::from_score(
            "trace",
            stepscore::Error::InvalidArgument("step 1 is empty".into()),
        );
        assert_eq!(
            (empty.code, empty.message.as_str()),
            (
                Code::TraceInvalid,
                "trace: invalid argument: step 1 is empty"
            )
        );
    }
}
