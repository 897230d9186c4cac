//! The crate's one error type. Every message names what is at fault: the
//! input line and field, the model file and tensor, the step.

use std::fmt;

/// Where in an input a record sits: `<stdin> line 4, item 2, id `c7`,
/// field `scores[1]``.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Location {
    /// A file path, or `<stdin>`; for a value a binding hands in, what the
    /// caller called it (`trace`, `traces`).
    pub source: String,
    /// The 1-based physical line the record starts on; 0 for a record that
    /// was not read from text (a binding's argument), left out when shown.
    pub line: usize,
    /// For an element of a JSON array, its 1-based position in the array.
    pub item: Option<usize>,
    /// The record's `id`, when it has one.
    pub id: Option<String>,
    /// The field at fault, when one is known (`steps`, `steps[2].text`, ...).
    pub field: Option<String>,
}

impl Location {
    /// The same place, naming `field`.
    pub fn with_field(&self, field: Option<String>) -> Location {
        Location {
            field,
            ..self.clone()
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)?;
        if self.line > 0 {
            write!(f, " line {}", self.line)?;
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(id) = &self.id {
            write!(f, ", id `{id}`")?;
        }
        if let Some(field) = &self.field {
            write!(f, ", field `{field}`")?;
        }
        Ok(())
    }
}

/// What went wrong, by kind: callers (the CLI's exit codes, the wasm
/// bindings' error codes) decide by the variant, never by the message.
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
    /// `truncating`: truncation was on, and not even the first step fits.
    /// `by_length`: the trace was refused by its text's length before it
    /// was tokenized, and `tokens` is the least it can be (see
    /// [`LengthBound`]); `None` when `tokens` was counted.
    #[error("{}", too_long(*tokens, *limit, *truncating, by_length.as_ref()))]
    TraceTooLong {
        tokens: usize,
        limit: usize,
        truncating: bool,
        by_length: Option<LengthBound>,
    },

    /// A tokenizer could not be built or could not encode the text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),

    /// The GPU engine failed: no adapter, device creation or loss, a
    /// validation error, a shape over the adapter's limits, a failed readback.
    #[error("gpu: {0}")]
    Gpu(String),

    /// An invariant of stepscore itself failed: a bug, never the caller's input.
    #[error("internal error (a bug in stepscore, please report it): {0}")]
    Internal(String),
}

impl Error {
    /// The message without its kind's prefix (`invalid argument: `), for an
    /// error reported inside another message (serde naming the option).
    pub fn detail(&self) -> String {
        match self {
            Error::InvalidArgument(m) => m.clone(),
            other => other.to_string(),
        }
    }

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
                ..Default::default()
            },
            message: message.into(),
        }
    }

    /// A bad record at `location`.
    pub fn input_at(location: Location, message: impl Into<String>) -> Self {
        Error::Input {
            location,
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

/// Why a trace is over the token limit before it is tokenized: its problem
/// and steps `0..=step` hold `bytes` bytes, and no token of the tokenizer
/// stands for more than `bytes_per_token` of them
/// ([`crate::tokenizer::Tokenizer::max_input_bytes_per_token`]), so they
/// are at least `bytes.div_ceil(bytes_per_token)` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthBound {
    pub step: usize,
    pub bytes: usize,
    pub bytes_per_token: usize,
}

fn too_long(
    tokens: usize,
    limit: usize,
    truncating: bool,
    by_length: Option<&LengthBound>,
) -> String {
    let head = match by_length {
        None => format!(
            "the trace is {tokens} tokens, over the limit of {limit} (the model's context or --max-tokens)"
        ),
        Some(b) => format!(
            "the trace is at least {tokens} tokens, over the limit of {limit} (the model's context \
             or --max-tokens), refused before tokenizing: up to step {} (field `steps[{}]`) it \
             holds {} bytes, and no token stands for more than {} bytes",
            b.step, b.step, b.bytes, b.bytes_per_token
        ),
    };
    if truncating {
        format!(
            "{head}, and not even its first step fits after the problem, so truncation leaves \
             nothing to score; shorten the problem or the first step, or raise the limit"
        )
    } else {
        format!(
            "{head}; shorten it, raise the limit, or choose truncation to score only the steps \
             that fit"
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
