//! What the row readers (`rows.rs`, `chat.rs`) say about a bad field: the
//! error type and the "expected X, found Y" wording, written once for both.

use serde_json::Value;

/// A row-level problem: the field at fault (if known) and what is wrong.
pub(crate) use crate::validate::Problem as RowError;

pub(crate) type RowResult<T> = std::result::Result<T, RowError>;

/// Names the JSON type of `v`, for "expected X, found Y" messages (the
/// wasm bindings' option messages use it too).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn wrong_type(field: &str, expected: &str, v: &Value) -> RowError {
    RowError::at(
        field,
        format!("expected {expected}, found {}", type_name(v)),
    )
}
