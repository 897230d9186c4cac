//! What the row readers (`rows.rs`, `chat.rs`) say about a bad field: the
//! error type and the "expected X, found Y" wording, written once for both.

use serde_json::Value;

/// A row-level problem: the field at fault (if known) and what is wrong.
pub(crate) use crate::validate::FieldError;

pub(crate) type RowResult<T> = std::result::Result<T, FieldError>;

/// A row's final answer, by its spellings (the first present is read).
pub(crate) const FINAL_ANSWER_FIELDS: [&str; 3] = ["final_answer", "finalAnswer", "answer"];
/// A row's known correct answer, by its spellings.
pub(crate) const REFERENCE_FIELDS: [&str; 4] = [
    "reference_answer",
    "referenceAnswer",
    "gold",
    "ground_truth",
];

/// Whether a top-level field holds a name or an answer rather than a
/// quantity (`id` and the answer fields): the strict parser keeps a number
/// written there as its text, so `12345678901234567890123` or
/// `0.1000000000000000000001` is compared as written, never rounded.
pub(crate) fn keeps_number_text(field: &str) -> bool {
    field == "id" || FINAL_ANSWER_FIELDS.contains(&field) || REFERENCE_FIELDS.contains(&field)
}

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

pub(crate) fn wrong_type(field: &str, expected: &str, v: &Value) -> FieldError {
    FieldError::at(
        field,
        format!("expected {expected}, found {}", type_name(v)),
    )
}
