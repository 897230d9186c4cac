//! The crate's one error type. Every message names what is at fault: the
//! input line and field, the model file and tensor, the step.

use std::fmt;

/// Where in an input a bad record sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// A file path, or `<stdin>`.
    pub source: String,
    /// 1-based line number (JSONL) or, for a JSON array, 1-based item number.
    pub line: usize,
    /// The field at fault, when one is known (`steps`, `steps[2].text`, ...).
    pub field: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} line {}", self.source, self.line)?;
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record of an input file is malformed.
    #[error("{location}: {message}")]
    Input { location: Location, message: String },

    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },

    /// A caller passed a value the operation cannot use.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A model file (GGUF, safetensors, config.json) is malformed or unsupported.
    #[error("{file}: {message}")]
    Model { file: String, message: String },

    /// A trace needs more tokens than the model's context or the set limit.
    #[error("the trace is {tokens} tokens, over the limit of {limit} (the model's context or --max-tokens); \
             shorten it, raise the limit, or choose truncation to score only the steps that fit")]
    TraceTooLong { tokens: usize, limit: usize },

    /// A tokenizer could not be built or could not encode the text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// The GPU engine failed: no adapter, device creation or loss, a
    /// validation error, a shape over the adapter's limits, a failed readback.
    #[error("gpu: {0}")]
    Gpu(String),
}

impl Error {
    pub fn input(
        source: &str,
        line: usize,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Error::Input {
            location: Location {
                source: source.to_string(),
                line,
                field: field.map(str::to_string),
            },
            message: message.into(),
        }
    }

    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn model(file: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Model {
            file: file.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
