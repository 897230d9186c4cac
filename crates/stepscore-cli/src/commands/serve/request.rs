//! Request bodies -> trace slots, with no socket or runtime: the routes
//! call these, and so does the fuzz target `serve_request` (which includes
//! this file), so what is fuzzed is what is served.
//!
//! The body's own fields are read with serde (a duplicated field is an
//! error); each trace row is handed to the core as its JSON text
//! ([`stepscore::io::read_row`]), so it is parsed by the CLI's strict
//! reader and no number in it passes through this side's own parse. A row
//! that cannot be read is an error in its own slot; the others are still
//! read.

use serde::Deserialize;
use serde_json::value::RawValue;
use stepscore::io::{read_row, ReadOptions};
use stepscore::segment::{segment_response, Segmenter};
use stepscore::{Location, Trace};

/// A body that cannot be read at all (answered 400, or 413 for
/// `too_many_traces`).
#[derive(Debug, Clone, PartialEq)]
pub struct BadRequest {
    pub code: &'static str,
    pub message: String,
}

/// Why one trace was not scored: a stable code and a message.
#[derive(Debug, Clone, PartialEq)]
pub struct RowError {
    pub code: &'static str,
    pub message: String,
}

/// One trace slot: the trace to score, or why it cannot be.
pub type Slot = Result<Trace, RowError>;

/// The per-request bounds that parsing enforces.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_traces: usize,
    /// Problem plus steps, bytes; longer traces get `trace_too_long`.
    pub max_trace_bytes: usize,
}

/// `/v1/score_steps`: the rows' slots and the aggregation asked for.
#[derive(Debug)]
pub struct ScoreRequest {
    pub slots: Vec<Slot>,
    pub aggregation: Option<stepscore::aggregate::Aggregation>,
}

/// The stable code of a core error, for clients to branch on.
pub fn error_code(e: &stepscore::Error) -> &'static str {
    use stepscore::Error;
    match e {
        Error::Input { .. } => "input",
        Error::Io { .. } => "io",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::Model { .. } => "model",
        Error::TraceTooLong { .. } => "trace_too_long",
        Error::Tokenizer(_) => "tokenizer",
        Error::Gpu(_) => "gpu",
        Error::Internal(_) => "internal",
    }
}

/// A body refused with `bad_request` and `message`.
pub fn bad(message: impl Into<String>) -> BadRequest {
    BadRequest {
        code: "bad_request",
        message: message.into(),
    }
}

/// One trace's error: its code and message.
pub fn row_error(code: &'static str, message: impl Into<String>) -> RowError {
    RowError {
        code,
        message: message.into(),
    }
}

fn json_error(e: serde_json::Error) -> BadRequest {
    bad(format!("the body is not a valid request: {e}"))
}

pub fn count_ok(n: usize, limits: &Limits) -> Result<(), BadRequest> {
    if n > limits.max_traces {
        return Err(BadRequest {
            code: "too_many_traces",
            message: format!(
                "{n} traces in one request, over the limit of {} (--max-traces)",
                limits.max_traces
            ),
        });
    }
    Ok(())
}

/// The slot of a parsed trace: refused when its text is over the limit.
pub fn sized(t: Trace, limits: &Limits) -> Slot {
    let bytes = t.problem.len() + t.steps.iter().map(|s| s.text.len()).sum::<usize>();
    if bytes > limits.max_trace_bytes {
        return Err(row_error(
            "trace_too_long",
            format!(
                "the trace's text is {bytes} bytes, over the server's limit of {} (--max-trace-bytes)",
                limits.max_trace_bytes
            ),
        ));
    }
    if t.steps.is_empty() {
        return Err(row_error("input", "the trace has no steps"));
    }
    Ok(t)
}

#[derive(Deserialize)]
struct GetRewardBody {
    query: Vec<String>,
    #[serde(default)]
    prompts: Option<Vec<String>>,
    // `labels` and any other field OpenRLHF adds are not used for scoring.
}

/// OpenRLHF's `/get_reward`: each query is its prompt followed by the
/// response; the response is cut into steps by `seg`. A query that does
/// not start with its prompt is an error in its slot (scoring the whole
/// query would score the prompt as steps).
pub fn get_reward(body: &[u8], seg: &Segmenter, limits: &Limits) -> Result<Vec<Slot>, BadRequest> {
    let body: GetRewardBody = serde_json::from_slice(body).map_err(json_error)?;
    count_ok(body.query.len(), limits)?;
    if let Some(p) = &body.prompts {
        if p.len() != body.query.len() {
            return Err(bad(format!(
                "{} queries but {} prompts",
                body.query.len(),
                p.len()
            )));
        }
    }
    Ok(body
        .query
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let prompt = body.prompts.as_ref().map_or("", |p| p[i].as_str());
            let Some(response) = q.strip_prefix(prompt) else {
                return Err(row_error(
                    "prompt_not_prefix",
                    format!("query {i} does not start with prompts[{i}]"),
                ));
            };
            let t = segment_response(prompt, response, seg);
            if t.steps.is_empty() {
                return Err(row_error(
                    "input",
                    format!("query {i} has no steps after its prompt"),
                ));
            }
            sized(t, limits)
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScoreBody<'a> {
    #[serde(borrow)]
    traces: Vec<&'a RawValue>,
    #[serde(default)]
    aggregation: Option<String>,
}

/// `/v1/score_steps`: rows in any format `stepscore score` reads, each parsed by
/// the core's strict reader from its own JSON text.
pub fn score(body: &[u8], seg: &Segmenter, limits: &Limits) -> Result<ScoreRequest, BadRequest> {
    let body: ScoreBody = serde_json::from_slice(body).map_err(json_error)?;
    count_ok(body.traces.len(), limits)?;
    let aggregation = body
        .aggregation
        .map(|a| a.parse().map_err(|e: stepscore::Error| bad(e.to_string())))
        .transpose()?;
    let opts = ReadOptions {
        segmenter: seg.clone(),
        source_name: "traces".into(),
        ..ReadOptions::default()
    };
    let slots = body
        .traces
        .iter()
        .enumerate()
        .map(|(i, raw)| {
            let at = Location {
                source: "traces".into(),
                item: Some(i + 1),
                ..Default::default()
            };
            match read_row(raw.get().as_bytes(), &opts, at) {
                Ok(record) => sized(record.trace, limits),
                Err(e) => Err(row_error(error_code(&e), e.to_string())),
            }
        })
        .collect();
    Ok(ScoreRequest { slots, aggregation })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_traces: 8,
        max_trace_bytes: 1 << 16,
    };

    fn seg() -> Segmenter {
        Segmenter::Auto
    }

    #[test]
    fn array_rows_are_their_own_errors() {
        let r = score(
            br#"{"traces":[[{"problem":"A","steps":["a"]},{"problem":"B","steps":["b"]}], [], {"problem":"C","steps":["c"]}]}"#,
            &seg(),
            &LIMITS,
        )
        .unwrap();
        assert_eq!(r.slots.len(), 3);
        for s in &r.slots[..2] {
            let e = s.as_ref().unwrap_err();
            assert!(e.message.contains("expected a JSON object"), "{e:?}");
        }
        assert_eq!(r.slots[2].as_ref().unwrap().problem, "C");
    }

    #[test]
    fn duplicate_keys_are_refused_in_rows_and_body() {
        let r = score(
            br#"{"traces":[{"problem":"p","steps":["a"],"steps":["b"]},{"problem":"q","steps":["c"]}]}"#,
            &seg(),
            &LIMITS,
        )
        .unwrap();
        let e = r.slots[0].as_ref().unwrap_err();
        assert!(e.message.contains("duplicate key `steps`"), "{e:?}");
        assert!(r.slots[1].is_ok());
        let e = score(br#"{"traces":[],"traces":[]}"#, &seg(), &LIMITS).unwrap_err();
        assert!(e.message.contains("duplicate field `traces`"), "{e:?}");
        let e = get_reward(br#"{"query":["a"],"query":["b"]}"#, &seg(), &LIMITS).unwrap_err();
        assert!(e.message.contains("duplicate field `query`"), "{e:?}");
    }

    #[test]
    fn unknown_score_fields_are_refused() {
        let e = score(br#"{"traces":[],"agregation":"min"}"#, &seg(), &LIMITS).unwrap_err();
        assert!(e.message.contains("unknown field `agregation`"), "{e:?}");
    }

    #[test]
    fn too_many_traces_before_any_row_is_read() {
        let rows = vec![r#"{"problem":"p","steps":["a"]}"#; 9].join(",");
        let e = score(
            format!(r#"{{"traces":[{rows}]}}"#).as_bytes(),
            &seg(),
            &LIMITS,
        )
        .unwrap_err();
        assert_eq!(e.code, "too_many_traces");
    }

    #[test]
    fn prompt_must_prefix_its_query() {
        let slots = get_reward(
            br#"{"query":["Q: 1?\nA.\n\nB.", "Other text"],"prompts":["Q: 1?\n","Q: 2?\n"]}"#,
            &seg(),
            &LIMITS,
        )
        .unwrap();
        let t = slots[0].as_ref().unwrap();
        assert_eq!(t.problem, "Q: 1?\n");
        assert_eq!(t.steps.len(), 2);
        assert_eq!(slots[1].as_ref().unwrap_err().code, "prompt_not_prefix");
    }
}
