//! Problem rows for generation and search: `{problem | prompt | question,
//! id?, reference_answer | answer?}`. They come out of the trace reader's
//! layouts, limits and strict parser ([`super::TraceReader::problems`]), so
//! a duplicate key, a number that would be rounded, invalid UTF-8 or an
//! over-long line is that row's error, located as a trace row's is, and the
//! other rows are read on. Fields other than these are ignored (a trace row
//! with `steps` is a problem too).

use serde_json::{Map, Value};

use super::fields::{wrong_type, FieldError, RowResult};
use super::rows::take_text_opt;
use crate::answer::extract_answer;
use crate::{Error, Location, Result};

/// One problem to write solutions to, with where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemRow {
    /// Where the row was read; `at.id` is the row's id.
    pub at: Location,
    /// The row's `id` as written (a number keeps its digits), if any.
    pub id: Option<String>,
    pub problem: String,
    /// The known answer (`reference_answer`, else `answer`); a GSM8K-style
    /// worked answer is reduced to what follows its `####`.
    pub reference: Option<String>,
}

/// Spellings of the problem text, the first present read.
const PROBLEM_FIELDS: [&str; 3] = ["problem", "prompt", "question"];
/// Spellings of a problem's known answer (here `answer` is the reference:
/// a problem row has no solution of its own).
const REFERENCE_FIELDS: [&str; 2] = ["reference_answer", "answer"];

/// One row (parsed) as a problem, or its error at `at` with its id and the
/// field at fault.
pub(crate) fn read_problem(value: Value, mut at: Location) -> Result<ProblemRow> {
    at.id = super::row_id(&value);
    match problem_fields(value) {
        Ok((id, problem, reference)) => Ok(ProblemRow {
            at,
            id,
            problem,
            reference,
        }),
        Err(p) => Err(Error::input_at(at.with_field(p.field), p.message)),
    }
}

fn problem_fields(value: Value) -> RowResult<(Option<String>, String, Option<String>)> {
    let mut row = match value {
        Value::Object(row) => row,
        other => {
            return Err(FieldError::whole(format!(
                "expected a JSON object, found {}",
                super::json_type_name(&other)
            )))
        }
    };
    let id = take_text_opt(&mut row, &["id"])?;
    let problem = problem_text(&mut row)?;
    let reference = take_text_opt(&mut row, &REFERENCE_FIELDS)?.and_then(|a| {
        if a.contains("####") {
            extract_answer(&a)
        } else {
            Some(a)
        }
    });
    Ok((id, problem, reference))
}

fn problem_text(row: &mut Map<String, Value>) -> RowResult<String> {
    for field in PROBLEM_FIELDS {
        match row.remove(field) {
            None => continue,
            Some(Value::String(s)) => return Ok(s),
            Some(v) => return Err(wrong_type(field, "a string", &v)),
        }
    }
    Err(FieldError::whole(
        "no `problem`, `prompt` or `question` field",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<ProblemRow> {
        let v = super::super::strict::from_slice(json.as_bytes()).unwrap();
        read_problem(v, Location::default())
    }

    #[test]
    fn fields_and_their_errors() {
        let p = read("{\"id\": 7, \"question\": \"q\", \"answer\": \"#### 1,234\"}").unwrap();
        assert_eq!(
            (p.id.as_deref(), p.problem.as_str(), p.reference.as_deref()),
            (Some("7"), "q", Some("1,234"))
        );
        assert_eq!(p.at.id.as_deref(), Some("7"));
        let p = read(r#"{"problem": "p", "reference_answer": 12345678901234567890123}"#).unwrap();
        assert_eq!(p.reference.as_deref(), Some("12345678901234567890123"));
        let e = read(r#"{"id": "b"}"#).unwrap_err().to_string();
        assert!(
            e.contains("id `b`: no `problem`, `prompt` or `question`"),
            "{e}"
        );
        let e = read(r#"{"problem": 5}"#).unwrap_err().to_string();
        assert!(
            e.contains("field `problem`: expected a string, found a number"),
            "{e}"
        );
        let e = read(r#"{"problem": "p", "answer": [1]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `answer`"), "{e}");
        let e = read("[1]").unwrap_err().to_string();
        assert!(e.contains("expected a JSON object, found an array"), "{e}");
    }
}
