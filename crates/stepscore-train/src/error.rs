//! One error type for the trainer; every message names the file, line, field or tensor at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("invalid data: {0}")]
    Data(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("training backend: {0}")]
    Backend(String),
    #[error("safetensors {}: {message}", path.display())]
    Export { path: PathBuf, message: String },
    #[error(transparent)]
    Metrics(#[from] stepscore::Error),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
