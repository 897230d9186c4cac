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
use serde_json::Value;
use stepscore::io::{read_row, ReadOptions};
use stepscore::segment::{segment_response, Segmenter};
use stepscore::{Location, Step, Trace};

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

/// `/v1/score`: the rows' slots and the aggregation asked for.
#[derive(Debug)]
pub struct ScoreRequest {
    pub slots: Vec<Slot>,
    pub aggregation: Option<stepscore::aggregate::Aggregation>,
}

/// `/pooling`: one slot per input, and the model named (if any).
#[derive(Debug)]
pub struct PoolingRequest {
    pub slots: Vec<Slot>,
    pub model: Option<String>,
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

fn bad(message: impl Into<String>) -> BadRequest {
    BadRequest {
        code: "bad_request",
        message: message.into(),
    }
}

fn row_error(code: &'static str, message: impl Into<String>) -> RowError {
    RowError {
        code,
        message: message.into(),
    }
}

fn json_error(e: serde_json::Error) -> BadRequest {
    bad(format!("the body is not a valid request: {e}"))
}

fn count_ok(n: usize, limits: &Limits) -> Result<(), BadRequest> {
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
fn sized(t: Trace, limits: &Limits) -> Slot {
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

/// `/v1/score`: rows in any format `stepscore score` reads, each parsed by
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

/// The step tag of vLLM's process-reward pooling (Qwen2.5-Math-PRM): each
/// step ends with it.
pub const STEP_TAG: &str = "<extra_0>";
const ASSISTANT_TURN: &str = "<|im_start|>assistant\n";
const USER_TURN: &str = "<|im_start|>user\n";
const END_TURN: &str = "<|im_end|>";

#[derive(Deserialize)]
struct PoolingBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    task: Option<String>,
    // Other vLLM request fields (user, priority, ...) do not change scores.
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: String,
}

/// vLLM's `POST /pooling` for a process reward model: `input` (a string or
/// strings of chat text, each step ended by `<extra_0>`) or `messages`
/// (the user turn is the problem, the assistant turn the tagged steps).
pub fn pooling(body: &[u8], limits: &Limits) -> Result<PoolingRequest, BadRequest> {
    let body: PoolingBody = serde_json::from_slice(body).map_err(json_error)?;
    match body.encoding_format.as_deref() {
        None | Some("float") => {}
        Some(f) => {
            return Err(bad(format!(
                "encoding_format `{f}` is not supported (only \"float\")"
            )))
        }
    }
    match body.task.as_deref() {
        None | Some("token_classify") | Some("reward") | Some("encode") => {}
        Some(t) => {
            return Err(bad(format!(
                "task `{t}` is not served: this is a process reward model (token_classify)"
            )))
        }
    }
    let slots = match (body.input, body.messages) {
        (Some(_), Some(_)) => return Err(bad("give `input` or `messages`, not both")),
        (None, None) => return Err(bad("`input` (a string or an array of strings) is required")),
        (None, Some(messages)) => vec![from_messages(&messages, limits)],
        (Some(Value::String(s)), None) => vec![from_chat_text(&s, limits)],
        (Some(Value::Array(items)), None) => {
            count_ok(items.len(), limits)?;
            items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => from_chat_text(s, limits),
                    _ => Err(row_error(
                        "input",
                        format!("input[{i}] is not a string (token ids are not accepted: the server tokenizes)"),
                    )),
                })
                .collect()
        }
        (Some(_), None) => {
            return Err(bad("`input` must be a string or an array of strings"));
        }
    };
    Ok(PoolingRequest {
        slots,
        model: body.model,
    })
}

/// Steps of `response`: the text before each step tag. Text after the
/// last tag may only be end-of-turn markup, or it would go unscored.
fn tagged_steps(response: &str) -> Result<Vec<Step>, RowError> {
    let mut parts: Vec<&str> = response.split(STEP_TAG).collect();
    let tail = parts.pop().unwrap_or_default();
    let rest = tail
        .trim()
        .trim_end_matches("<|endoftext|>")
        .trim_end()
        .trim_end_matches(END_TURN)
        .trim();
    if !rest.is_empty() {
        return Err(row_error(
            "input",
            format!("text after the last {STEP_TAG} would not be scored: end every step with {STEP_TAG}"),
        ));
    }
    if parts.is_empty() {
        return Err(row_error(
            "input",
            format!("no step: end every step with {STEP_TAG}"),
        ));
    }
    if let Some(i) = parts.iter().position(|p| p.trim().is_empty()) {
        return Err(row_error("input", format!("step {} is empty", i + 1)));
    }
    Ok(parts.into_iter().map(Step::new).collect())
}

fn from_chat_text(text: &str, limits: &Limits) -> Slot {
    let Some(turn) = text.rfind(ASSISTANT_TURN) else {
        return Err(row_error(
            "input",
            format!("no `<|im_start|>assistant` turn: send the chat text (the problem as the user turn, each step ended by {STEP_TAG}) or `messages`"),
        ));
    };
    let (head, response) = (&text[..turn], &text[turn + ASSISTANT_TURN.len()..]);
    let Some(user) = head.rfind(USER_TURN) else {
        return Err(row_error(
            "input",
            "no `<|im_start|>user` turn before the assistant turn: it holds the problem",
        ));
    };
    let user = &head[user + USER_TURN.len()..];
    let problem = user.find(END_TURN).map_or(user, |end| &user[..end]);
    let steps = tagged_steps(response)?;
    sized(
        Trace {
            problem: problem.to_string(),
            steps,
            ..Default::default()
        },
        limits,
    )
}

fn from_messages(messages: &[Message], limits: &Limits) -> Slot {
    let Some(a) = messages.iter().rposition(|m| m.role == "assistant") else {
        return Err(row_error(
            "input",
            "`messages` has no assistant message (the tagged steps)",
        ));
    };
    let Some(u) = messages[..a].iter().rposition(|m| m.role == "user") else {
        return Err(row_error(
            "input",
            "`messages` has no user message before the assistant's (the problem)",
        ));
    };
    if a + 1 != messages.len() {
        return Err(row_error(
            "input",
            "messages after the last assistant message would not be scored",
        ));
    }
    let steps = tagged_steps(&messages[a].content)?;
    sized(
        Trace {
            problem: messages[u].content.clone(),
            steps,
            ..Default::default()
        },
        limits,
    )
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

    #[test]
    fn pooling_chat_text_and_messages() {
        let text = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n1+1=2<extra_0>So 2.<extra_0><|im_end|><|endoftext|>";
        let body =
            serde_json::json!({"model": "m", "input": [text, "no markup<extra_0>"]}).to_string();
        let r = pooling(body.as_bytes(), &LIMITS).unwrap();
        assert_eq!(r.model.as_deref(), Some("m"));
        let t = r.slots[0].as_ref().unwrap();
        assert_eq!(t.problem, "What is 1+1?");
        let steps: Vec<&str> = t.steps.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(steps, ["1+1=2", "So 2."]);
        assert!(r.slots[1].is_err());
        let body = serde_json::json!({"messages": [
            {"role": "user", "content": "What is 1+1?"},
            {"role": "assistant", "content": "1+1=2<extra_0>So 2.<extra_0>"}]})
        .to_string();
        let r = pooling(body.as_bytes(), &LIMITS).unwrap();
        assert_eq!(r.slots[0].as_ref().unwrap().steps.len(), 2);
        // Untagged text after the last step is refused, not dropped.
        let body = serde_json::json!({"messages": [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "a<extra_0>b"}]})
        .to_string();
        let r = pooling(body.as_bytes(), &LIMITS).unwrap();
        assert!(r.slots[0]
            .as_ref()
            .unwrap_err()
            .message
            .contains("after the last"));
        let e = pooling(br#"{"input":"x","encoding_format":"base64"}"#, &LIMITS).unwrap_err();
        assert!(e.message.contains("base64"));
    }
}
