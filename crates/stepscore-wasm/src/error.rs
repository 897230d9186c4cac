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
    /// An invariant of stepscore itself failed: a bug.
    Internal,
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
            Code::Internal => "INTERNAL",
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

    /// An error raised while building a scorer from model files; the code
    /// follows the error's kind (its variant), never its message or file name.
    pub fn from_load(e: stepscore::Error) -> Self {
        use stepscore::Error as E;
        let code = match &e {
            // A head file or checkpoint index read as records is model input.
            E::Model { .. } | E::Input { .. } => Code::ModelInvalid,
            E::Tokenizer(_) => Code::TokenizerInvalid,
            E::InvalidArgument(_) => Code::InvalidArgument,
            E::TraceTooLong { .. } => Code::TraceTooLong,
            E::Io { .. } => Code::Io,
            E::Gpu(_) => Code::Gpu,
            E::Internal(_) => Code::Internal,
        };
        Error::new(code, e.to_string())
    }

    /// An error raised while scoring `what` (e.g. `trace`, `traces[2]`).
    pub fn from_score(what: &str, e: stepscore::Error) -> Self {
        use stepscore::Error as E;
        let code = match &e {
            E::TraceTooLong { .. } => Code::TraceTooLong,
            E::Tokenizer(_) => Code::TokenizeFailed,
            // At scoring time the only argument is the trace: no steps, an
            // empty or blank step, a step holding the family's marker token.
            E::InvalidArgument(_) | E::Input { .. } => Code::TraceInvalid,
            E::Model { .. } => Code::ModelInvalid,
            E::Io { .. } => Code::Io,
            E::Gpu(_) => Code::Gpu,
            E::Internal(_) => Code::Internal,
        };
        Error::new(code, format!("{what}: {e}"))
    }

    /// An error raised while generating or searching (`what`: `generate`,
    /// `search`): the arguments are options and a prompt, so a bad value is
    /// `INVALID_ARGUMENT` and a prompt over the context `TRACE_TOO_LONG`.
    pub fn from_run(what: &str, e: stepscore::Error) -> Self {
        use stepscore::Error as E;
        let code = match &e {
            E::TraceTooLong { .. } => Code::TraceTooLong,
            E::Tokenizer(_) => Code::TokenizeFailed,
            E::InvalidArgument(_) | E::Input { .. } => Code::InvalidArgument,
            E::Model { .. } => Code::ModelInvalid,
            E::Io { .. } => Code::Io,
            E::Gpu(_) => Code::Gpu,
            E::Internal(_) => Code::Internal,
        };
        let mut message = format!("{what}: {e}");
        if code == Code::InvalidArgument {
            // The core names options by their Rust fields; JS wrote camelCase.
            message = crate::options::camel_words(&message);
        }
        Error::new(code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_error_codes_follow_the_variant_not_the_file_name() {
        let tok = Error::from_load(stepscore::Error::Tokenizer(
            "tokenizer_config.json: bad json".into(),
        ));
        assert_eq!(tok.code, Code::TokenizerInvalid);
        assert_eq!(tok.message, "tokenizer: tokenizer_config.json: bad json");
        let weights = Error::from_load(stepscore::Error::model("model.safetensors", "truncated"));
        assert_eq!(weights.code, Code::ModelInvalid);
        // A model error stays one whatever the file is called.
        let named = Error::from_load(stepscore::Error::model("tokenizer-like.gguf", "truncated"));
        assert_eq!(named.code, Code::ModelInvalid);
        let bug = Error::from_load(stepscore::Error::Internal("x".into()));
        assert_eq!(bug.code.as_str(), "INTERNAL");
        assert_eq!(
            Error::from_score("trace", stepscore::Error::Internal("x".into())).code,
            Code::Internal
        );
    }

    #[test]
    fn score_errors_keep_the_core_message_and_say_which_trace() {
        let e = Error::from_score(
            "traces[3]",
            stepscore::Error::TraceTooLong {
                tokens: 9000,
                limit: 8192,
                truncating: false,
                by_length: None,
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
