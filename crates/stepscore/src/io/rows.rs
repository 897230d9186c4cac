//! One JSON row -> one [`Trace`], for each supported row format.
//!
//! Errors here carry only the field and message; the reader adds the source
//! and line.

use serde_json::{Map, Value};

use super::chat::chat_row;
use super::fields::{
    type_name, wrong_type, FieldError, RowResult, FINAL_ANSWER_FIELDS, REFERENCE_FIELDS,
};
use super::InputFormat;
use crate::segment::Segmenter;
use crate::trace::{Step, Trace};
use crate::validate::check_score;

/// Removes a required string field.
pub(crate) fn take_string(row: &mut Map<String, Value>, field: &str) -> RowResult<String> {
    match row.remove(field) {
        None => Err(FieldError::at(field, format!("missing field `{field}`"))),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(wrong_type(field, "a string", &v)),
    }
}

/// Removes the first present of `fields` as a string; `Ok(None)` when none is
/// present or the value is null. Numbers are accepted as their JSON text
/// (ids and answers are often numeric; the strict parser keeps their text).
pub(crate) fn take_text_opt(
    row: &mut Map<String, Value>,
    fields: &[&str],
) -> RowResult<Option<String>> {
    for &field in fields {
        match row.remove(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => return Ok(Some(s)),
            Some(Value::Number(n)) => return Ok(Some(n.to_string())),
            Some(v) => return Err(wrong_type(field, "a string or number", &v)),
        }
    }
    Ok(None)
}

/// Removes a required, non-empty array of strings.
fn take_string_list(row: &mut Map<String, Value>, field: &str) -> RowResult<Vec<String>> {
    let items = take_array(row, field)?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(s),
            v => Err(wrong_type(&format!("{field}[{i}]"), "a string", &v)),
        })
        .collect()
}

/// Removes a required, non-empty array.
fn take_array(row: &mut Map<String, Value>, field: &str) -> RowResult<Vec<Value>> {
    match row.remove(field) {
        None => Err(FieldError::at(field, format!("missing field `{field}`"))),
        Some(Value::Array(a)) if a.is_empty() => Err(FieldError::at(field, "empty step list")),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => Err(wrong_type(field, "an array", &v)),
    }
}

/// Decides a row's format from its fields (`Auto` mode).
fn detect(row: &Map<String, Value>) -> RowResult<InputFormat> {
    // Each of these fields holds the steps in its own format: a row with two
    // of them is ambiguous, and picking one would drop the other silently.
    let holders = [
        ("messages", "chat"),
        ("completions", "TRL"),
        ("steps", "ProcessBench/native"),
        ("prefix", "PRM800K"),
    ];
    let present: Vec<String> = holders
        .iter()
        .filter(|(f, _)| row.contains_key(*f))
        .map(|(f, fmt)| format!("`{f}` ({fmt})"))
        .collect();
    if present.len() > 1 {
        return Err(FieldError::whole(format!(
            "cannot tell the row format: it has both {}; keep one, or name the format \
             with --input-format",
            present.join(" and ")
        )));
    }
    if row.contains_key("messages") {
        return Ok(InputFormat::Chat);
    }
    if row.contains_key("completions") {
        return Ok(InputFormat::Trl);
    }
    if let Some(steps) = row.get("steps") {
        // Objects are native steps; strings (or anything else, reported by the
        // ProcessBench reader) are ProcessBench steps.
        let native = matches!(steps, Value::Array(a) if a.first().is_some_and(Value::is_object));
        return Ok(if native {
            InputFormat::Native
        } else {
            InputFormat::ProcessBench
        });
    }
    if row.contains_key("prefix") {
        return Ok(InputFormat::Prm800k);
    }
    if row.contains_key("response") {
        return Ok(InputFormat::Raw);
    }
    Err(FieldError::whole(
        "cannot tell the row format: expected a field `steps` (native/ProcessBench), \
         `completions` (TRL), `response` (raw), `messages` (chat) or `prefix` (PRM800K)",
    ))
}

/// Converts one parsed row; returns the format it was read as (the detected
/// one in `Auto` mode).
pub(crate) fn row_to_trace(
    value: Value,
    format: InputFormat,
    seg: &Segmenter,
) -> RowResult<(InputFormat, Trace)> {
    let mut row = match value {
        Value::Object(m) => m,
        v => {
            return Err(FieldError::whole(format!(
                "expected a JSON object, found {}",
                type_name(&v)
            )))
        }
    };
    let format = match format {
        InputFormat::Auto => detect(&row)?,
        f => f,
    };
    let mut trace = match format {
        InputFormat::Native => native_row(&mut row)?,
        InputFormat::ProcessBench => processbench_row(&mut row)?,
        InputFormat::Trl => trl_row(&mut row)?,
        InputFormat::Raw => raw_row(&mut row, seg)?,
        InputFormat::Chat => chat_row(&mut row)?,
        InputFormat::Prm800k => prm800k_row(&mut row)?,
        InputFormat::Auto => unreachable_auto()?,
    };
    common_fields(&mut row, &mut trace)?;
    // Whatever is left is kept verbatim.
    for (k, v) in row {
        trace.metadata.insert(k, v);
    }
    Ok((format, trace))
}

// `detect` never returns Auto; an error instead of a panic keeps that local.
fn unreachable_auto() -> RowResult<Trace> {
    Err(FieldError::whole(
        "internal error (a bug in stepscore, please report it): row format left undetected",
    ))
}

/// Fields every format shares: id, answers, optional per-step scores. The
/// camelCase spellings are what JS callers write (the npm package hands its
/// objects to this reader).
fn common_fields(row: &mut Map<String, Value>, trace: &mut Trace) -> RowResult<()> {
    if let Some(id) = take_text_opt(row, &["id"])? {
        trace.id = Some(id);
    }
    if let Some(a) = take_text_opt(row, &FINAL_ANSWER_FIELDS)? {
        trace.final_answer = Some(a);
    }
    if let Some(a) = take_text_opt(row, &REFERENCE_FIELDS)? {
        trace.reference_answer = Some(a);
    }
    if let Some(scores) = row.remove("scores") {
        let scores = parse_scores(&scores, trace.steps.len())?;
        for (step, s) in trace.steps.iter_mut().zip(scores) {
            step.score = s;
        }
    }
    Ok(())
}

/// `scores`: one number (or null for "no score") per step.
fn parse_scores(v: &Value, n_steps: usize) -> RowResult<Vec<Option<f64>>> {
    let Value::Array(items) = v else {
        return Err(wrong_type("scores", "an array", v));
    };
    if items.len() != n_steps {
        return Err(FieldError::at(
            "scores",
            format!("{} scores for {n_steps} steps", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            Value::Null => Ok(None),
            Value::Number(n) => match n.as_f64() {
                Some(x) => check_score(x, &format!("scores[{i}]")).map(Some),
                None => Err(FieldError::at(
                    format!("scores[{i}]"),
                    format!("{n} is not a number"),
                )),
            },
            other => Err(wrong_type(
                &format!("scores[{i}]"),
                "a number or null",
                other,
            )),
        })
        .collect()
}

/// The serde form of [`Trace`]; unknown top-level fields join `metadata`.
fn native_row(row: &mut Map<String, Value>) -> RowResult<Trace> {
    let problem = take_string(row, "problem")?;
    let response = match row.remove("response") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(v) => return Err(wrong_type("response", "a string", &v)),
    };
    let mut steps = Vec::new();
    for (i, v) in take_array(row, "steps")?.into_iter().enumerate() {
        let field = format!("steps[{i}]");
        if !v.is_object() {
            return Err(wrong_type(&field, "an object", &v));
        }
        let step: Step =
            serde_json::from_value(v).map_err(|e| FieldError::at(&field, e.to_string()))?;
        if let Some(score) = step.score {
            check_score(score, &format!("{field}.score"))?;
        }
        if let Some(span) = step.span {
            check_span(&field, &step, span, response.as_deref())?;
        }
        steps.push(step);
    }
    let mut trace = Trace {
        problem,
        response,
        steps,
        ..Default::default()
    };
    match row.remove("metadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => trace.metadata = m,
        Some(v) => return Err(wrong_type("metadata", "an object", &v)),
    }
    Ok(trace)
}

/// A span must point at exactly the step's text inside the response.
fn check_span(
    field: &str,
    step: &Step,
    span: crate::trace::Span,
    response: Option<&str>,
) -> RowResult<()> {
    let field = format!("{field}.span");
    let Some(response) = response else {
        return Err(FieldError::at(
            field,
            "a span needs the trace's `response` to point into",
        ));
    };
    match response.get(span.start..span.end) {
        None => Err(FieldError::at(
            field,
            format!(
                "[{}, {}) is not a char-aligned range of the {}-byte response",
                span.start,
                span.end,
                response.len()
            ),
        )),
        Some(s) if s != step.text => Err(FieldError::at(
            field,
            "the span's text differs from the step's `text`",
        )),
        Some(_) => Ok(()),
    }
}

/// ProcessBench: `{problem, steps: [string], label: int, ...}`.
fn processbench_row(row: &mut Map<String, Value>) -> RowResult<Trace> {
    let problem = take_string(row, "problem")?;
    let steps: Vec<Step> = take_string_list(row, "steps")?
        .into_iter()
        .map(Step::new)
        .collect();
    let mut trace = Trace {
        problem,
        steps,
        ..Default::default()
    };
    match row.remove("label") {
        // Unlabelled rows are fine for scoring.
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) => {
            let n_steps = trace.steps.len() as i64;
            match n.as_i64() {
                Some(l) if (-1..n_steps).contains(&l) => trace.set_first_error_label(l),
                Some(l) => {
                    return Err(FieldError::at(
                        "label",
                        format!(
                            "label {l} is outside -1..{} for {n_steps} steps",
                            n_steps - 1
                        ),
                    ))
                }
                None => {
                    return Err(FieldError::at(
                        "label",
                        format!("expected an integer, found {n}"),
                    ))
                }
            }
        }
        Some(v) => return Err(wrong_type("label", "an integer", &v)),
    }
    Ok(trace)
}

/// PRM800K's rows: `{problem, prefix: [string], step, rating}`. A row is one
/// rated step after the solution's earlier steps; the rows of a problem
/// form a tree (the alternatives the labellers rated for a step share its
/// prefix, and the one they continued, `preferred`, starts the next
/// prefix). Each row becomes a trace `prefix + [step]` whose last step
/// alone is labelled: rating 1 good, -1 bad, and 0 (neutral: "reasonable
/// but not clearly helpful") good, since it is no error, the only thing a
/// first-error label marks. A null rating (a step the labeller wrote
/// because every model step was bad) leaves the step unlabelled: it is not
/// model text. The earlier steps are unlabelled: their ratings are their
/// own rows. `rating` stays in the metadata for trainers that treat
/// neutral steps otherwise.
fn prm800k_row(row: &mut Map<String, Value>) -> RowResult<Trace> {
    let problem = take_string(row, "problem")?;
    let mut steps: Vec<Step> = match row.remove("prefix") {
        None => return Err(FieldError::at("prefix", "missing field `prefix`")),
        Some(Value::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(Step::new(s)),
                v => Err(wrong_type(&format!("prefix[{i}]"), "a string", &v)),
            })
            .collect::<RowResult<_>>()?,
        Some(v) => return Err(wrong_type("prefix", "an array", &v)),
    };
    let mut step = Step::new(take_string(row, "step")?);
    step.label = match row.get("rating") {
        None => return Err(FieldError::at("rating", "missing field `rating`")),
        Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(1) | Some(0) => Some(true),
            Some(-1) => Some(false),
            _ => {
                return Err(FieldError::at(
                    "rating",
                    format!("rating {n} is not -1, 0, 1 or null"),
                ))
            }
        },
        Some(v) => return Err(wrong_type("rating", "-1, 0, 1 or null", v)),
    };
    steps.push(step);
    Ok(Trace {
        problem,
        steps,
        ..Default::default()
    })
}

/// TRL's stepwise-supervision rows: `{prompt, completions: [string], labels: [bool]}`.
fn trl_row(row: &mut Map<String, Value>) -> RowResult<Trace> {
    let problem = take_string(row, "prompt")?;
    let mut steps: Vec<Step> = take_string_list(row, "completions")?
        .into_iter()
        .map(Step::new)
        .collect();
    match row.remove("labels") {
        None | Some(Value::Null) => {}
        Some(Value::Array(labels)) => {
            if labels.len() != steps.len() {
                return Err(FieldError::at(
                    "labels",
                    format!(
                        "{} labels for {} steps (`completions`)",
                        labels.len(),
                        steps.len()
                    ),
                ));
            }
            for (i, (step, l)) in steps.iter_mut().zip(&labels).enumerate() {
                step.label = match l {
                    Value::Bool(b) => Some(*b),
                    Value::Null => None,
                    other => return Err(wrong_type(&format!("labels[{i}]"), "a boolean", other)),
                };
            }
        }
        Some(v) => return Err(wrong_type("labels", "an array", &v)),
    }
    Ok(Trace {
        problem,
        steps,
        ..Default::default()
    })
}

/// A problem and a free-text response, cut by the configured segmenter.
fn raw_row(row: &mut Map<String, Value>, seg: &Segmenter) -> RowResult<Trace> {
    let key = ["problem", "question", "prompt"]
        .into_iter()
        .find(|k| row.contains_key(*k))
        .unwrap_or("problem");
    let problem = take_string(row, key)?;
    let response = take_string(row, "response")?;
    let chosen = seg.choose(&response);
    let steps = chosen.segment(&response);
    if steps.is_empty() {
        return Err(FieldError::at(
            "response",
            format!("the {chosen} segmenter found no steps in it"),
        ));
    }
    let mut trace = Trace {
        problem,
        response: Some(response),
        steps,
        ..Default::default()
    };
    // Which rule cut the response (`auto` picks one per response).
    trace
        .metadata
        .insert("segmenter".into(), chosen.to_string().into());
    Ok(trace)
}
