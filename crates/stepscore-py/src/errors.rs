//! The core's error kinds as Python exceptions: one class per
//! `stepscore::Error` variant (chosen by matching the variant, never its
//! message), all under `StepscoreError`, with the variant's fields as
//! attributes.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use stepscore::Error;

create_exception!(
    stepscore,
    StepscoreError,
    PyException,
    "Base class of every error stepscore raises."
);
create_exception!(
    stepscore,
    InputError,
    StepscoreError,
    "A trace or row is malformed. Attributes: `source`, `line` (1-based row), `item` (1-based item of a JSON array, or None), `id` (the row's id, or None), `field` (or None)."
);
create_exception!(
    stepscore,
    FileError,
    StepscoreError,
    "Reading or writing a file failed. Attribute: `path`."
);
create_exception!(
    stepscore,
    InvalidArgumentError,
    StepscoreError,
    "A value passed to stepscore cannot be used (an unknown name, mismatched lengths, ...)."
);
create_exception!(
    stepscore,
    ModelError,
    StepscoreError,
    "A model file is malformed or unsupported. Attribute: `file`."
);
create_exception!(
    stepscore,
    TraceTooLongError,
    StepscoreError,
    "A trace needs more tokens than the limit. Attributes: `tokens`, `limit`, `truncating` (truncation was on and not even the first step fits)."
);
create_exception!(
    stepscore,
    TokenizerError,
    StepscoreError,
    "The tokenizer could not be built or could not encode the text."
);
create_exception!(
    stepscore,
    InternalError,
    StepscoreError,
    "An invariant of stepscore itself failed: a bug, never the caller's input."
);
create_exception!(
    stepscore,
    GpuError,
    StepscoreError,
    "The GPU engine failed (no adapter, device loss, a shape over its limits)."
);

/// The Python exception for `e`, its fields set as attributes.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    // Setting attributes on a fresh exception instance cannot fail.
    match e {
        Error::Input { location, .. } => {
            let err = InputError::new_err(message);
            let v = err.value(py);
            let _ = v.setattr("source", location.source);
            let _ = v.setattr("line", location.line);
            let _ = v.setattr("item", location.item);
            let _ = v.setattr("id", location.id);
            let _ = v.setattr("field", location.field);
            err
        }
        Error::Io { path, .. } => {
            let err = FileError::new_err(message);
            let _ = err.value(py).setattr("path", path);
            err
        }
        Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        Error::Model { file, .. } => {
            let err = ModelError::new_err(message);
            let _ = err.value(py).setattr("file", file);
            err
        }
        Error::TraceTooLong {
            tokens,
            limit,
            truncating,
            ..
        } => {
            let err = TraceTooLongError::new_err(message);
            let v = err.value(py);
            let _ = v.setattr("tokens", tokens);
            let _ = v.setattr("limit", limit);
            let _ = v.setattr("truncating", truncating);
            err
        }
        Error::Tokenizer(_) => TokenizerError::new_err(message),
        Error::Gpu(_) => GpuError::new_err(message),
        Error::Internal(_) => InternalError::new_err(message),
    }
}

/// `Result<T, stepscore::Error>` into `PyResult<T>`.
pub trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for stepscore::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StepscoreError", py.get_type::<StepscoreError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("FileError", py.get_type::<FileError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("TraceTooLongError", py.get_type::<TraceTooLongError>())?;
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    m.add("GpuError", py.get_type::<GpuError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
