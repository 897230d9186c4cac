//! Traces from JS, through the core's one reader (`stepscore::io`): a
//! file's text (`readTraces`), and the objects handed to `score`,
//! `scoreMany` and `selectBest`, each read as one row of a file is read, so
//! every row format the CLI takes works here with the CLI's messages.

use serde_json::{Map, Value};
use stepscore::io::{read_value, ReadOptions};
use stepscore::{Location, Trace};

use crate::error::{Error, Result};

/// `readTraces` options: `{format?, segmenter?, name?, maxLineBytes?}`
/// (unknown keys refused, so a typo is not silently ignored).
pub fn read_options(options: &Value) -> Result<ReadOptions> {
    let mut opts = ReadOptions::default();
    let obj = match options {
        Value::Null => return Ok(opts),
        Value::Object(obj) => obj,
        _ => {
            return Err(Error::invalid_argument(
                "readTraces options must be an object like {format, segmenter, name}",
            ))
        }
    };
    let core = |e: stepscore::Error| Error::invalid_argument(e.to_string());
    for (key, v) in obj {
        if v.is_null() {
            continue;
        }
        let text = || {
            v.as_str()
                .ok_or_else(|| Error::invalid_argument(format!("options.{key} must be a string")))
        };
        match key.as_str() {
            "format" => opts.format = text()?.parse().map_err(core)?,
            "segmenter" => opts.segmenter = text()?.parse().map_err(core)?,
            "name" => opts.source_name = text()?.to_string(),
            "maxLineBytes" => {
                opts.max_line_bytes = v
                    .as_u64()
                    .filter(|&n| n > 0)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        Error::invalid_argument("options.maxLineBytes must be a positive integer")
                    })?
            }
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown readTraces option `{other}` (expected format, segmenter, name, maxLineBytes)"
                )))
            }
        }
    }
    Ok(opts)
}

/// A row error of the core (its place and field in the message) as `TRACE_INVALID`.
fn row_error(e: stepscore::Error) -> Error {
    Error::trace(e.to_string())
}

/// What a trace argument is read for: selection never reads the problem,
/// so a candidate may leave it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Score,
    Select,
}

/// One trace argument (`what` names it in messages: `trace`, `traces[2]`).
pub fn trace_arg(mut value: Value, what: &str, purpose: Purpose) -> Result<Trace> {
    if let (Purpose::Select, Value::Object(row)) = (purpose, &mut value) {
        default_problem(row);
    }
    let at = Location {
        source: what.to_string(),
        ..Location::default()
    };
    read_value(value, &ReadOptions::default(), at)
        .map(|r| r.trace)
        .map_err(row_error)
}

fn default_problem(row: &mut Map<String, Value>) {
    let has = ["problem", "prompt", "question", "messages"]
        .iter()
        .any(|k| row.contains_key(*k));
    if !has {
        row.insert("problem".into(), Value::String(String::new()));
    }
}

/// An array of trace arguments (`what[i]` in messages).
pub fn traces_arg(value: Value, what: &str, purpose: Purpose) -> Result<Vec<Trace>> {
    let Value::Array(items) = value else {
        return Err(Error::trace(format!("{what} must be an array of traces")));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, t)| trace_arg(t, &format!("{what}[{i}]"), purpose))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use serde_json::json;

    #[test]
    fn arguments_read_as_rows_of_any_format() {
        let t = trace_arg(
            json!({"problem": "2+2?", "steps": [{"text": "2+2=4", "label": true, "score": 0.5}], "finalAnswer": "4"}),
            "trace",
            Purpose::Score,
        )
        .unwrap();
        assert_eq!(
            (t.steps[0].label, t.steps[0].score),
            (Some(true), Some(0.5))
        );
        assert_eq!(t.final_answer.as_deref(), Some("4"));
        let t = trace_arg(
            json!({"prompt": "p", "completions": ["a", "b"]}),
            "trace",
            Purpose::Score,
        )
        .unwrap();
        assert_eq!(t.steps.len(), 2);
    }

    #[test]
    fn errors_name_the_argument_and_the_field() {
        let e = trace_arg(
            json!({"problem": "p", "steps": ["a", 7]}),
            "trace",
            Purpose::Score,
        )
        .unwrap_err();
        assert_eq!(e.code, Code::TraceInvalid);
        assert_eq!(
            e.message,
            "trace, field `steps[1]`: expected a string, found a number"
        );
        let e = traces_arg(
            json!([{"problem": "p", "steps": ["a"]}, {"problem": "p"}]),
            "traces",
            Purpose::Score,
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("traces[1]: cannot tell the row format"),
            "{}",
            e.message
        );
        let e = trace_arg(json!({"steps": ["a"]}), "trace", Purpose::Score).unwrap_err();
        assert_eq!(e.message, "trace, field `problem`: missing field `problem`");
    }

    #[test]
    fn candidates_may_omit_the_problem_and_carry_scores() {
        let t = traces_arg(
            json!([{"steps": ["a", "b"], "scores": [0.9, null]}]),
            "candidates",
            Purpose::Select,
        )
        .unwrap();
        assert_eq!(t[0].problem, "");
        assert_eq!(
            (t[0].steps[0].score, t[0].steps[1].score),
            (Some(0.9), None)
        );
        let e = traces_arg(
            json!([{"steps": ["a", "b"], "scores": [0.9]}]),
            "candidates",
            Purpose::Select,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "candidates[0], field `scores`: 1 scores for 2 steps"
        );
    }

    #[test]
    fn read_options_are_checked() {
        let o = read_options(&json!({"format": "chat", "name": "a.jsonl"})).unwrap();
        assert_eq!(o.source_name, "a.jsonl");
        assert!(read_options(&json!({"fromat": "chat"})).is_err());
        assert!(read_options(&json!({"format": "csv"})).is_err());
        assert!(read_options(&json!({"maxLineBytes": 0})).is_err());
    }
}
