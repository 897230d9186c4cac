//! vLLM's pooling vocabulary, read with no socket: the bodies of
//! `POST /pooling` and `POST /classify` as vLLM's own server reads them
//! (its `PoolingCompletionRequest` / `PoolingChatRequest` and
//! `ClassificationCompletionRequest` / `ClassificationChatRequest`), and
//! its error shape. Every field vLLM defines is either honoured or refused
//! with a message naming it; none is silently ignored where it would change
//! what a client gets back. Fields vLLM itself ignores (unknown ones) are
//! ignored here too. The fuzz target `serve_request` includes this file.

use serde::Deserialize;
use serde_json::{json, Value};
use stepscore::segment::{segment_response, Segmenter};
use stepscore::{Step, Trace};

use super::request::{bad, count_ok, row_error, sized, BadRequest, Limits, RowError, Slot};

/// The step tag of vLLM's process-reward pooling (Qwen2.5-Math-PRM): each
/// step ends with it.
pub const STEP_TAG: &str = "<extra_0>";
const ASSISTANT_TURN: &str = "<|im_start|>assistant\n";
const USER_TURN: &str = "<|im_start|>user\n";
const END_TURN: &str = "<|im_end|>";

/// What each input's answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooled {
    /// One `[incorrect, correct]` pair per step (`task: token_classify`,
    /// `/pooling`'s default for a process reward model).
    PerStep,
    /// One pair per input: the trace's aggregate (`/classify`, or
    /// `/pooling` with `task: classify`).
    PerInput,
}

/// How the numbers are written back (`encoding_format`, `endianness`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Float,
    /// Base64 of the float32 values in this byte order.
    Base64 {
        big_endian: bool,
    },
}

/// A parsed `/pooling` or `/classify` body.
#[derive(Debug)]
pub struct VllmRequest {
    pub slots: Vec<Slot>,
    pub model: Option<String>,
    /// `use_activation` (default true): probabilities; false gives the
    /// log-odds pair `[0, z]`, whose softmax is the probability pair.
    pub activation: bool,
    pub pooled: Pooled,
    pub encoding: Encoding,
    /// `request_id`, echoed in the answer's `id` as vLLM does.
    pub request_id: Option<String>,
}

/// Which route the body came to: `/classify` takes no `task` and no
/// encoding options (vLLM's classification request has neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Pooling,
    Classify,
}

#[derive(Deserialize)]
struct Body {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    messages: Option<Vec<Message>>,
    #[serde(default)]
    task: Option<String>,
    #[serde(default)]
    use_activation: Option<bool>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    embed_dtype: Option<String>,
    #[serde(default)]
    endianness: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    truncate_prompt_tokens: Option<i64>,
    #[serde(default)]
    truncation_side: Option<String>,
    #[serde(default)]
    padding: Option<String>,
    #[serde(default)]
    dimensions: Option<Value>,
    #[serde(default)]
    normalize: Option<Value>,
    #[serde(default)]
    chat_template: Option<String>,
    #[serde(default)]
    chat_template_kwargs: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    mm_processor_kwargs: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    media_io_kwargs: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    add_generation_prompt: Option<bool>,
    #[serde(default)]
    continue_final_message: Option<bool>,
    // Read and checked for type only: `user`, `cache_salt` (there is no
    // prefix cache across requests to salt) and `add_special_tokens` (the
    // chat text is split into problem and steps and rendered again with the
    // model's own template, which adds what the model needs).
    #[serde(default)]
    #[allow(dead_code)]
    user: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    cache_salt: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    add_special_tokens: Option<bool>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: Content,
}

/// A message's content: a string, or OpenAI's list of parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

/// Reads a `/pooling` or `/classify` body. `decode` turns token ids into
/// text with the served model's tokenizer (vLLM accepts token-id input; the
/// ids are read back into the chat text they encode). On `/classify` a
/// response with no step tags is cut into steps by `seg` (a discriminative
/// reward model's input, as verl sends it, is the plain chat); `/pooling`
/// keeps the process-reward protocol, where every step ends with a tag.
pub fn read(
    body: &[u8],
    route: Route,
    limits: &Limits,
    seg: &Segmenter,
    decode: &dyn Fn(&[u32]) -> Result<String, String>,
) -> Result<VllmRequest, BadRequest> {
    let untagged = match route {
        Route::Classify => Some(seg),
        Route::Pooling => None,
    };
    let cut = Cut { limits, untagged };
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a valid request: {e}")))?;
    if b.normalize.is_some() {
        return Err(bad(
            "`normalize` was removed from vLLM's pooling API; use `use_activation`",
        ));
    }
    let pooled = match (route, b.task.as_deref()) {
        (Route::Classify, None) => Pooled::PerInput,
        (Route::Classify, Some(t)) => {
            return Err(bad(format!(
                "`task` (`{t}`) is not a /classify field; /pooling takes it"
            )))
        }
        (Route::Pooling, None | Some("token_classify")) => Pooled::PerStep,
        (Route::Pooling, Some("classify")) => Pooled::PerInput,
        (Route::Pooling, Some(t)) => {
            return Err(bad(format!(
                "task `{t}` is not served: this is a process reward model; the tasks are \
                 `token_classify` (a pair per step, the default) and `classify` (a pair per input)"
            )))
        }
    };
    let encoding = encoding(&b, route)?;
    if let Some(p) = b.priority.filter(|&p| p != 0) {
        return Err(bad(format!(
            "priority {p}: this server does not schedule by priority (only 0 is accepted, as vLLM \
             does without priority scheduling)"
        )));
    }
    match b.truncate_prompt_tokens {
        None | Some(-1) => {}
        Some(n) => {
            return Err(bad(format!(
                "truncate_prompt_tokens {n}: a trace is never truncated (cutting tokens drops the \
                 problem or steps); a trace over the model's limit is refused instead"
            )))
        }
    }
    match b.truncation_side.as_deref() {
        None | Some("left") | Some("right") => {}
        Some(s) => return Err(bad(format!("truncation_side `{s}`: use `left` or `right`"))),
    }
    match b.padding.as_deref() {
        None | Some("do_not_pad") => {}
        Some(p) => {
            return Err(bad(format!(
                "padding `{p}`: a causal model's step scores would change with padding; only \
                 `do_not_pad` is served"
            )))
        }
    }
    if b.dimensions.as_ref().is_some_and(|d| !d.is_null()) {
        return Err(bad(
            "`dimensions` applies to embedding models; this is a process reward model",
        ));
    }
    for (name, map) in [
        ("chat_template_kwargs", &b.chat_template_kwargs),
        ("mm_processor_kwargs", &b.mm_processor_kwargs),
        ("media_io_kwargs", &b.media_io_kwargs),
    ] {
        if map.as_ref().is_some_and(|m| !m.is_empty()) {
            return Err(bad(format!(
                "`{name}` is not supported: the chat is split into problem and steps and \
                 rendered with the model's own template"
            )));
        }
    }
    if b.chat_template.is_some() {
        return Err(bad(
            "`chat_template` is not supported: the chat is split into problem and steps and \
             rendered with the model's own template",
        ));
    }
    if b.add_generation_prompt == Some(true) && b.continue_final_message == Some(true) {
        return Err(bad(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    if b.add_generation_prompt == Some(true) && b.messages.is_some() {
        return Err(bad(
            "add_generation_prompt: the last message must be the assistant's tagged steps, \
             and a generation prompt would open a new turn after them",
        ));
    }
    let slots = match (b.input, b.messages) {
        (Some(_), Some(_)) => return Err(bad("give `input` or `messages`, not both")),
        (None, None) => {
            return Err(bad(
                "`input` (a string, strings, token ids or lists of token ids) or `messages` is required",
            ))
        }
        (None, Some(messages)) => vec![from_messages(&messages, &cut)],
        (Some(input), None) => inputs(input, &cut, decode)?,
    };
    Ok(VllmRequest {
        slots,
        model: b.model,
        activation: b.use_activation.unwrap_or(true),
        pooled,
        encoding,
        request_id: b.request_id,
    })
}

fn encoding(b: &Body, route: Route) -> Result<Encoding, BadRequest> {
    if route == Route::Classify {
        for (name, set) in [
            ("encoding_format", b.encoding_format.is_some()),
            ("embed_dtype", b.embed_dtype.is_some()),
            ("endianness", b.endianness.is_some()),
        ] {
            if set {
                return Err(bad(format!("`{name}` is not a /classify field")));
            }
        }
        return Ok(Encoding::Float);
    }
    match b.embed_dtype.as_deref() {
        None | Some("float32") => {}
        Some(d) => {
            return Err(bad(format!(
                "embed_dtype `{d}` is not served (only float32)"
            )))
        }
    }
    let big_endian = match b.endianness.as_deref() {
        None | Some("native") => cfg!(target_endian = "big"),
        Some("little") => false,
        Some("big") => true,
        Some(e) => {
            return Err(bad(format!(
                "endianness `{e}`: use `native`, `little` or `big`"
            )))
        }
    };
    match b.encoding_format.as_deref() {
        None | Some("float") => Ok(Encoding::Float),
        Some("base64") => Ok(Encoding::Base64 { big_endian }),
        Some(f) => Err(bad(format!(
            "encoding_format `{f}` is not served (`float` or `base64`)"
        ))),
    }
}

/// How a response becomes steps: at its step tags, or (when it has none
/// and `untagged` is given) by that segmenter.
struct Cut<'a> {
    limits: &'a Limits,
    untagged: Option<&'a Segmenter>,
}

/// `input`: a string, strings, token ids, or lists of token ids.
fn inputs(
    input: Value,
    cut: &Cut,
    decode: &dyn Fn(&[u32]) -> Result<String, String>,
) -> Result<Vec<Slot>, BadRequest> {
    let limits = cut.limits;
    let items = match input {
        Value::String(s) => return Ok(vec![from_chat_text(&s, cut)]),
        Value::Array(items) => items,
        _ => {
            return Err(bad(
                "`input` must be a string, an array of strings, an array of token ids or an array of those",
            ))
        }
    };
    if items.is_empty() {
        return Err(bad("`input` is empty"));
    }
    if items.iter().all(Value::is_number) {
        // One input given as token ids.
        return Ok(vec![token_input(&items, "input", cut, decode)]);
    }
    count_ok(items.len(), limits)?;
    Ok(items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => from_chat_text(s, cut),
            Value::Array(ids) => token_input(ids, &format!("input[{i}]"), cut, decode),
            _ => Err(row_error(
                "input",
                format!("input[{i}] is neither a string nor a list of token ids"),
            )),
        })
        .collect())
}

fn token_input(
    ids: &[Value],
    name: &str,
    cut: &Cut,
    decode: &dyn Fn(&[u32]) -> Result<String, String>,
) -> Slot {
    let mut out = Vec::with_capacity(ids.len());
    for (j, v) in ids.iter().enumerate() {
        match v.as_u64().and_then(|x| u32::try_from(x).ok()) {
            Some(id) => out.push(id),
            None => {
                return Err(row_error(
                    "input",
                    format!("{name}[{j}] is not a token id (an integer from 0 to 4294967295): {v}"),
                ))
            }
        }
    }
    let text = decode(&out).map_err(|e| row_error("tokenizer", format!("{name}: {e}")))?;
    from_chat_text(&text, cut)
}

/// Text less the end-of-turn markup that may follow the last step.
fn without_turn_end(text: &str) -> &str {
    text.trim()
        .trim_end_matches("<|endoftext|>")
        .trim_end()
        .trim_end_matches(END_TURN)
        .trim()
}

/// The trace of a problem and a response: the response's steps end at its
/// step tags, or (untagged, where `cut` allows it) are cut by a segmenter.
fn trace(problem: String, response: &str, cut: &Cut) -> Slot {
    let steps = match cut.untagged {
        Some(seg) if !response.contains(STEP_TAG) => {
            let t = segment_response(&problem, without_turn_end(response), seg);
            if t.steps.is_empty() {
                return Err(row_error("input", "the response has no steps"));
            }
            t.steps
        }
        _ => tagged_steps(response)?,
    };
    sized(
        Trace {
            problem,
            steps,
            ..Default::default()
        },
        cut.limits,
    )
}

/// Steps of `response`: the text before each step tag. Text after the
/// last tag may only be end-of-turn markup, or it would go unscored.
fn tagged_steps(response: &str) -> Result<Vec<Step>, RowError> {
    let mut parts: Vec<&str> = response.split(STEP_TAG).collect();
    let tail = parts.pop().unwrap_or_default();
    let rest = without_turn_end(tail);
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

fn from_chat_text(text: &str, cut: &Cut) -> Slot {
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
    trace(problem.to_string(), response, cut)
}

/// A message's text: its string, or its text parts joined in order.
fn text_of(m: &Message, index: usize) -> Result<String, RowError> {
    match &m.content {
        Content::Text(s) => Ok(s.clone()),
        Content::Parts(parts) => {
            let mut out = String::new();
            for (j, p) in parts.iter().enumerate() {
                match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => out.push_str(t),
                    ("text", None) => {
                        return Err(row_error(
                            "input",
                            format!("messages[{index}].content[{j}] is a text part with no `text`"),
                        ))
                    }
                    (kind, _) => {
                        return Err(row_error(
                            "input",
                            format!("messages[{index}].content[{j}] is a `{kind}` part: only text is scored"),
                        ))
                    }
                }
            }
            Ok(out)
        }
    }
}

fn from_messages(messages: &[Message], cut: &Cut) -> Slot {
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
    trace(text_of(&messages[u], u)?, &text_of(&messages[a], a)?, cut)
}

/// The log-odds of a probability. An f64 probability within 2^-53 of 0 or
/// 1 is 0 or 1 itself, so the log-odds it can carry are within ±53 ln 2
/// (36.7); the ends map there instead of to an infinity JSON cannot hold.
pub fn log_odds(p: f64) -> f64 {
    const END: f64 = 53.0 * std::f64::consts::LN_2;
    if p <= 0.0 {
        -END
    } else if p >= 1.0 {
        END
    } else {
        (p.ln() - (-p).ln_1p()).clamp(-END, END)
    }
}

/// The `[incorrect, correct]` pair of a probability `p`: the probabilities,
/// or with `activation` off the log-odds pair whose softmax they are.
pub fn pair(p: f64, activation: bool) -> [f64; 2] {
    if activation {
        [1.0 - p, p]
    } else {
        [0.0, log_odds(p)]
    }
}

/// Base64 of the values as float32 in the chosen byte order (vLLM's
/// `encoding_format: base64`, `embed_dtype: float32`).
pub fn base64_f32(values: &[f64], big_endian: bool) -> String {
    use base64::Engine;
    let mut bytes = Vec::with_capacity(values.len() * 4);
    for &v in values {
        let v = v as f32;
        bytes.extend_from_slice(&if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// vLLM's error body: `{"error": {"message", "type", "param", "code"}}`,
/// `code` the HTTP status; stepscore's stable code rides along as
/// `stepscore_code` (vLLM's models allow extra fields).
pub fn error_body(status: u16, code: &str, message: &str) -> Value {
    let kind = match status {
        400 => "BadRequestError",
        401 => "AuthenticationError",
        403 => "PermissionDeniedError",
        404 => "NotFoundError",
        413 => "RequestEntityTooLarge",
        422 => "UnprocessableEntityError",
        429 => "RateLimitError",
        500 => "InternalServerError",
        501 => "NotImplementedError",
        503 => "ServiceUnavailableError",
        504 => "TimeoutError",
        _ => "Error",
    };
    json!({"error": {
        "message": message,
        "type": kind,
        "param": Value::Null,
        "code": status,
        "stepscore_code": code,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_traces: 8,
        max_trace_bytes: 1 << 16,
    };

    const TEXT: &str = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n1+1=2<extra_0>So 2.<extra_0><|im_end|><|endoftext|>";

    /// A stand-in tokenizer: each id is one character's code point.
    fn chars(ids: &[u32]) -> Result<String, String> {
        ids.iter()
            .map(|&i| char::from_u32(i).ok_or_else(|| format!("no token {i}")))
            .collect()
    }

    fn pooling(body: &Value) -> Result<VllmRequest, BadRequest> {
        read(
            body.to_string().as_bytes(),
            Route::Pooling,
            &LIMITS,
            &Segmenter::Auto,
            &chars,
        )
    }

    fn classify(body: &Value) -> Result<VllmRequest, BadRequest> {
        read(
            body.to_string().as_bytes(),
            Route::Classify,
            &LIMITS,
            &Segmenter::Auto,
            &chars,
        )
    }

    fn steps(s: &Slot) -> Vec<&str> {
        s.as_ref()
            .unwrap()
            .steps
            .iter()
            .map(|s| s.text.as_str())
            .collect()
    }

    #[test]
    fn chat_text_strings_token_ids_and_messages() {
        let r = pooling(&json!({"model": "m", "input": [TEXT, "no markup<extra_0>"]})).unwrap();
        assert_eq!(r.model.as_deref(), Some("m"));
        assert_eq!(r.slots[0].as_ref().unwrap().problem, "What is 1+1?");
        assert_eq!(steps(&r.slots[0]), ["1+1=2", "So 2."]);
        assert!(r.slots[1].is_err());
        assert_eq!((r.pooled, r.activation), (Pooled::PerStep, true));
        // Token ids, one input and a batch of them, read back into the same text.
        let ids: Vec<u32> = TEXT.chars().map(|c| c as u32).collect();
        let r = pooling(&json!({"input": ids.clone()})).unwrap();
        assert_eq!(steps(&r.slots[0]), ["1+1=2", "So 2."]);
        let r = pooling(&json!({"input": [ids, [-1]]})).unwrap();
        assert_eq!(steps(&r.slots[0]), ["1+1=2", "So 2."]);
        let e = r.slots[1].as_ref().unwrap_err();
        assert!(e.message.contains("input[1][0] is not a token id"), "{e:?}");
        // Content as a list of text parts.
        let r = pooling(&json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "1+1?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "1+1=2<extra_0>So 2.<extra_0>"}]}]}))
        .unwrap();
        assert_eq!(r.slots[0].as_ref().unwrap().problem, "What is 1+1?");
        assert_eq!(steps(&r.slots[0]), ["1+1=2", "So 2."]);
        let r = pooling(&json!({"messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": "a<extra_0>"}]}))
        .unwrap();
        let e = r.slots[0].as_ref().unwrap_err();
        assert!(
            e.message
                .contains("messages[0].content[0] is a `image_url` part"),
            "{e:?}"
        );
        // Untagged text after the last step is refused, not dropped.
        let r = pooling(&json!({"messages": [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "a<extra_0>b"}]}))
        .unwrap();
        let e = r.slots[0].as_ref().unwrap_err();
        assert!(e.message.contains("after the last"), "{e:?}");
    }

    #[test]
    fn every_field_is_honoured_or_refused_by_name() {
        let ok = |extra: Value| {
            let mut body = json!({"input": TEXT});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            pooling(&body)
        };
        let r = ok(
            json!({"use_activation": false, "encoding_format": "base64", "endianness": "big",
            "request_id": "r1", "task": "classify", "user": "u", "cache_salt": "salt",
            "priority": 0, "truncate_prompt_tokens": -1, "padding": "do_not_pad",
            "add_special_tokens": false, "chat_template_kwargs": {}, "embed_dtype": "float32"}),
        )
        .unwrap();
        assert!(!r.activation);
        assert_eq!(r.encoding, Encoding::Base64 { big_endian: true });
        assert_eq!(r.request_id.as_deref(), Some("r1"));
        assert_eq!(r.pooled, Pooled::PerInput);
        for (extra, named) in [
            (
                json!({"truncate_prompt_tokens": 8}),
                "truncate_prompt_tokens",
            ),
            (json!({"priority": 2}), "priority 2"),
            (json!({"padding": "max_length"}), "padding `max_length`"),
            (json!({"dimensions": 8}), "`dimensions`"),
            (json!({"normalize": true}), "`normalize`"),
            (json!({"task": "embed"}), "task `embed`"),
            (
                json!({"encoding_format": "bytes"}),
                "encoding_format `bytes`",
            ),
            (json!({"embed_dtype": "float16"}), "embed_dtype `float16`"),
            (json!({"endianness": "middle"}), "endianness `middle`"),
            (json!({"chat_template": "{{x}}"}), "`chat_template`"),
            (
                json!({"chat_template_kwargs": {"a": 1}}),
                "`chat_template_kwargs`",
            ),
            (
                json!({"mm_processor_kwargs": {"a": 1}}),
                "`mm_processor_kwargs`",
            ),
        ] {
            let e = ok(extra.clone()).unwrap_err();
            assert!(e.message.contains(named), "{extra}: {e:?}");
        }
        let e = classify(&json!({"input": TEXT, "task": "classify"})).unwrap_err();
        assert!(e.message.contains("not a /classify field"), "{e:?}");
    }

    /// verl's reward-model path sends the plain chat: /classify cuts an
    /// untagged response with the server's segmenter; /pooling refuses it.
    #[test]
    fn classify_cuts_an_untagged_response() {
        let plain = "<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n1+1=2.\n\nSo 2.<|im_end|>\n";
        let r = classify(&json!({"input": plain})).unwrap();
        assert_eq!(r.pooled, Pooled::PerInput);
        assert_eq!(steps(&r.slots[0]), ["1+1=2.", "So 2."]);
        let r = pooling(&json!({"input": plain})).unwrap();
        assert!(r.slots[0].is_err());
        let r = classify(&json!({"input": TEXT})).unwrap();
        assert_eq!(steps(&r.slots[0]), ["1+1=2", "So 2."]);
    }

    #[test]
    fn pairs_log_odds_and_base64() {
        assert_eq!(pair(0.25, true), [0.75, 0.25]);
        let [a, z] = pair(0.25, false);
        assert_eq!(a, 0.0);
        assert!((z - (1.0f64 / 3.0).ln()).abs() < 1e-12);
        assert_eq!(log_odds(1.0), 53.0 * std::f64::consts::LN_2);
        assert_eq!(log_odds(0.0), -53.0 * std::f64::consts::LN_2);
        assert_eq!(base64_f32(&[1.0], false), "AACAPw==");
        assert_eq!(base64_f32(&[1.0], true), "P4AAAA==");
    }
}
