//! Reading traces that JS hands in (already converted to `serde_json::Value`
//! by serde-wasm-bindgen). Checked by hand rather than by derive so every
//! message names the field at fault: `traces[2].steps[1].text must be a string`.
//!
//! Accepted shape (camelCase, extra fields ignored):
//! `{ problem, steps: (string | {text, score?, label?})[], scores?, response?,
//!    finalAnswer?, referenceAnswer?, id? }`.

use serde_json::{Map, Value};
use stepscore::{Step, Trace};

use crate::error::{Error, Result};

/// What a trace is read for: scoring needs a problem and ignores scores;
/// selection needs scores and may omit the problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Score,
    Select,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn opt_string(obj: &Map<String, Value>, keys: &[&str], what: &str) -> Result<Option<String>> {
    for key in keys {
        match obj.get(*key) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s.clone())),
            Some(other) => {
                return Err(Error::trace(format!(
                    "{what}.{key} must be a string, got {}",
                    kind(other)
                )))
            }
        }
    }
    Ok(None)
}

fn opt_score(v: Option<&Value>, what: &str) -> Result<Option<f64>> {
    match v {
        // serde-wasm-bindgen turns NaN into null: both mean "no usable score".
        None | Some(Value::Null) => Ok(None),
        // The core's one rule for step scores: a probability in [0, 1].
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) => stepscore::validate::check_score(x, what)
                .map(Some)
                .map_err(|p| Error::trace(p.to_string())),
            None => Err(Error::trace(format!("{what} must be a number, got {n}"))),
        },
        Some(other) => Err(Error::trace(format!(
            "{what} must be a number, got {}",
            kind(other)
        ))),
    }
}

fn step(v: &Value, what: &str) -> Result<Step> {
    match v {
        Value::String(s) => Ok(Step::new(s.clone())),
        Value::Object(obj) => {
            let text = match obj.get("text") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(Error::trace(format!(
                        "{what}.text must be a string, got {}",
                        kind(other)
                    )))
                }
                None => return Err(Error::trace(format!("{what} has no `text`"))),
            };
            let label = match obj.get("label") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(other) => {
                    return Err(Error::trace(format!(
                        "{what}.label must be a boolean, got {}",
                        kind(other)
                    )))
                }
            };
            let score = opt_score(obj.get("score"), &format!("{what}.score"))?;
            Ok(Step {
                text,
                label,
                score,
                ..Step::default()
            })
        }
        other => Err(Error::trace(format!(
            "{what} must be a string or an object with `text`, got {}",
            kind(other)
        ))),
    }
}

/// Reads one trace; `what` names it in messages (`trace`, `traces[3]`).
pub fn parse_trace(v: &Value, what: &str, purpose: Purpose) -> Result<Trace> {
    let obj = v.as_object().ok_or_else(|| {
        Error::trace(format!(
            "{what} must be an object like {{problem, steps}}, got {}",
            kind(v)
        ))
    })?;
    let problem = match (obj.get("problem"), purpose) {
        (Some(Value::String(s)), _) => s.clone(),
        (None | Some(Value::Null), Purpose::Select) => String::new(),
        (None, Purpose::Score) => return Err(Error::trace(format!("{what} has no `problem`"))),
        (Some(other), _) => {
            return Err(Error::trace(format!(
                "{what}.problem must be a string, got {}",
                kind(other)
            )))
        }
    };
    let steps = match obj.get("steps") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| step(s, &format!("{what}.steps[{i}]")))
            .collect::<Result<Vec<_>>>()?,
        Some(other) => {
            return Err(Error::trace(format!(
                "{what}.steps must be an array, got {}",
                kind(other)
            )))
        }
        None => return Err(Error::trace(format!("{what} has no `steps`"))),
    };
    let mut trace = Trace {
        id: opt_string(obj, &["id"], what)?,
        problem,
        response: opt_string(obj, &["response"], what)?,
        steps,
        final_answer: opt_string(obj, &["finalAnswer", "final_answer"], what)?,
        reference_answer: opt_string(obj, &["referenceAnswer", "reference_answer"], what)?,
        metadata: Map::new(),
    };
    if purpose == Purpose::Select {
        apply_scores(
            &mut trace,
            obj.get("scores").or_else(|| obj.get("stepScores")),
            what,
        )?;
    }
    Ok(trace)
}

/// A separate `scores` array (e.g. the `stepScores` a scoring call returned)
/// overrides per-step scores; its length must match the steps.
fn apply_scores(trace: &mut Trace, scores: Option<&Value>, what: &str) -> Result<()> {
    let items = match scores {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(Error::trace(format!(
                "{what}.scores must be an array, got {}",
                kind(other)
            )))
        }
    };
    if items.len() != trace.steps.len() {
        return Err(Error::trace(format!(
            "{what}.scores has {} entries for {} steps",
            items.len(),
            trace.steps.len()
        )));
    }
    for (i, (s, item)) in trace.steps.iter_mut().zip(items).enumerate() {
        s.score = opt_score(Some(item), &format!("{what}.scores[{i}]"))?;
    }
    Ok(())
}

/// Reads an array of traces (`traces[i]` in messages).
pub fn parse_traces(v: &Value, what: &str, purpose: Purpose) -> Result<Vec<Trace>> {
    let items = v.as_array().ok_or_else(|| {
        Error::trace(format!(
            "{what} must be an array of traces, got {}",
            kind(v)
        ))
    })?;
    items
        .iter()
        .enumerate()
        .map(|(i, t)| parse_trace(t, &format!("{what}[{i}]"), purpose))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use serde_json::json;

    #[test]
    fn steps_may_be_strings_or_objects() {
        let t = parse_trace(
            &json!({"problem": "2+2?", "steps": ["2+2=4", {"text": "So 4.", "label": true, "score": 0.5}], "extra": 1}),
            "trace",
            Purpose::Score,
        )
        .unwrap();
        assert_eq!(t.problem, "2+2?");
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.steps[0].text, "2+2=4");
        assert_eq!(
            (t.steps[1].label, t.steps[1].score),
            (Some(true), Some(0.5))
        );
    }

    #[test]
    fn messages_name_the_field_at_fault() {
        let cases = [
            (
                json!("text"),
                "trace must be an object like {problem, steps}, got a string",
            ),
            (json!({"steps": []}), "trace has no `problem`"),
            (
                json!({"problem": 3, "steps": []}),
                "trace.problem must be a number",
            ),
            (json!({"problem": "p"}), "trace has no `steps`"),
            (
                json!({"problem": "p", "steps": "a"}),
                "trace.steps must be an array, got a string",
            ),
            (
                json!({"problem": "p", "steps": ["a", 7]}),
                "trace.steps[1] must be a string or an object with `text`, got a number",
            ),
            (
                json!({"problem": "p", "steps": [{"txt": "a"}]}),
                "trace.steps[0] has no `text`",
            ),
            (
                json!({"problem": "p", "steps": [{"text": "a", "label": "yes"}]}),
                "trace.steps[0].label must be a boolean",
            ),
            (
                json!({"problem": "p", "steps": ["a"], "finalAnswer": 4}),
                "trace.finalAnswer must be a string",
            ),
        ];
        for (v, want) in cases {
            let e = parse_trace(&v, "trace", Purpose::Score).unwrap_err();
            assert_eq!(e.code, Code::TraceInvalid);
            // One case's message says "must be a string"; the rest match as written.
            let want = want.replace("must be a number", "must be a string, got a number");
            assert!(
                e.message.starts_with(&want),
                "{v}: got {:?}, want {want:?}",
                e.message
            );
        }
    }

    #[test]
    fn selection_reads_a_scores_array_and_checks_its_length() {
        let t = parse_trace(
            &json!({"steps": ["a", "b"], "scores": [0.9, null]}),
            "c",
            Purpose::Select,
        )
        .unwrap();
        assert_eq!(t.problem, "");
        assert_eq!(t.steps[0].score, Some(0.9));
        assert_eq!(t.steps[1].score, None);
        let e = parse_trace(
            &json!({"steps": ["a", "b"], "scores": [0.9]}),
            "c",
            Purpose::Select,
        )
        .unwrap_err();
        assert_eq!(e.message, "c.scores has 1 entries for 2 steps");
        let e = parse_traces(
            &json!([{"steps": ["a"]}, {"steps": ["a"], "scores": ["x"]}]),
            "candidates",
            Purpose::Select,
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "candidates[1].scores[0] must be a number, got a string"
        );
    }
}
