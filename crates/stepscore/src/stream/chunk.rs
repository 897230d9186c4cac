//! One event of an OpenAI-compatible streaming completion, as llama.cpp's
//! server, vLLM, llama-cpp-python, WebLLM and wllama send it:
//! `{"choices": [{"index": 0, "delta": {"content": "..."}, "finish_reason": null}], ...}`
//! (chat), `choices[0].text` (the older completions endpoint), a last chunk
//! with `choices: []` and `usage` (`stream_options.include_usage`), the
//! `[DONE]` marker, and a failure as `{"error": {"message", "type", "code"}}`
//! (llama.cpp, vLLM) or an `error` event. Other fields (`id`, `model`,
//! `timings`, `logprobs`, `role`) carry nothing to verify and are not read.
//! A duplicated key is refused, named by its path, by the trace reader's
//! parser (`crate::io`): `"content":"2 + 3 = 5.","content":"EVIL"` had
//! scored "EVIL" (issue 44, D15).

use serde_json::{Map, Value};

use super::sse::{preview, SseEvent};
use crate::{Error, Result};

/// What one event says.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// `data: [DONE]`: the stream is complete.
    Done,
    /// Generated text and what came with it.
    Delta {
        content: String,
        /// `delta.reasoning_content` / `delta.reasoning` (vLLM's and
        /// llama.cpp's reasoning parsers): a separate channel, not scored.
        reasoning: String,
        finish_reason: Option<String>,
        usage: Option<Value>,
    },
}

/// Reads one event; errors name the event's line and the field.
pub fn parse(source: &str, ev: &SseEvent) -> Result<Chunk> {
    let err = |field: Option<&str>, message: String| Error::input(source, ev.line, field, message);
    let data = ev.data.trim();
    if data == "[DONE]" {
        return Ok(Chunk::Done);
    }
    let value: Value =
        crate::io::parse_unique_keys(data.as_bytes()).map_err(|(field, e)| match field {
            Some(field) => err(Some(field.as_str()), e.to_string()),
            None => err(
                None,
                format!(
                    "not JSON (column {}: {e}): {}",
                    e.column(),
                    preview(&ev.data)
                ),
            ),
        })?;
    if ev.event.as_deref() == Some("error") {
        return Err(err(
            None,
            server_error(value.get("error").unwrap_or(&value)),
        ));
    }
    let Value::Object(obj) = value else {
        return Err(err(
            None,
            format!("a chunk must be a JSON object: {}", preview(data)),
        ));
    };
    if let Some(e) = obj.get("error").filter(|e| !e.is_null()) {
        return Err(err(Some("error"), server_error(e)));
    }
    let usage = obj.get("usage").filter(|u| !u.is_null()).cloned();
    if usage.as_ref().is_some_and(|u| !u.is_object()) {
        return Err(err(Some("usage"), "must be an object".into()));
    }
    let choices = match obj.get("choices") {
        Some(Value::Array(c)) => c.as_slice(),
        None if usage.is_some() => &[],
        None => {
            return Err(err(
                None,
                format!(
                    "neither `choices` nor `usage`: not a completion chunk: {}",
                    preview(data)
                ),
            ))
        }
        Some(_) => return Err(err(Some("choices"), "must be an array".into())),
    };
    let mut chunk = Chunk::Delta {
        content: String::new(),
        reasoning: String::new(),
        finish_reason: None,
        usage,
    };
    for (k, choice) in choices.iter().enumerate() {
        let field = |name: &str| format!("choices[{k}]{name}");
        let Value::Object(choice) = choice else {
            return Err(err(Some(&field("")), "must be an object".into()));
        };
        match choice.get("index") {
            None | Some(Value::Null) => {}
            Some(i) if i.as_u64() == Some(0) => {}
            Some(i) => {
                return Err(err(
                    Some(&field(".index")),
                    format!(
                        "choice {i}: only a single-choice stream (n = 1) can be verified \
                         step by step"
                    ),
                ))
            }
        }
        let Chunk::Delta {
            content,
            reasoning,
            finish_reason,
            ..
        } = &mut chunk
        else {
            unreachable!("built as a delta above")
        };
        match choice.get("delta") {
            Some(Value::Object(delta)) => {
                content.push_str(text_field(delta, "content", |f| {
                    err(
                        Some(&field(&format!(".delta.{f}"))),
                        "must be a string or null".into(),
                    )
                })?);
                for name in ["reasoning_content", "reasoning"] {
                    reasoning.push_str(text_field(delta, name, |f| {
                        err(
                            Some(&field(&format!(".delta.{f}"))),
                            "must be a string or null".into(),
                        )
                    })?);
                }
            }
            None | Some(Value::Null) => {}
            Some(_) => return Err(err(Some(&field(".delta")), "must be an object".into())),
        }
        content.push_str(text_field(choice, "text", |f| {
            err(
                Some(&field(&format!(".{f}"))),
                "must be a string or null".into(),
            )
        })?);
        match choice.get("finish_reason") {
            None | Some(Value::Null) => {}
            Some(Value::String(r)) => *finish_reason = Some(r.clone()),
            Some(_) => {
                return Err(err(
                    Some(&field(".finish_reason")),
                    "must be a string or null".into(),
                ))
            }
        }
    }
    Ok(chunk)
}

/// `obj[name]` as text: absent and null are empty.
fn text_field<'a>(
    obj: &'a Map<String, Value>,
    name: &'static str,
    bad: impl Fn(&str) -> Error,
) -> Result<&'a str> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad(name)),
    }
}

/// A server's error object as a message: its `message`, `type` and `code`.
fn server_error(e: &Value) -> String {
    let message = match e.get("message").and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => preview(&e.to_string()),
    };
    let mut extra = Vec::new();
    if let Some(t) = e.get("type").and_then(Value::as_str) {
        extra.push(format!("type `{t}`"));
    }
    if let Some(c) = e.get("code").filter(|c| !c.is_null()) {
        extra.push(format!("code {c}"));
    }
    if extra.is_empty() {
        format!("the server sent an error: {message}")
    } else {
        format!("the server sent an error: {message} ({})", extra.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_data(data: &str) -> Result<Chunk> {
        let ev = SseEvent {
            event: None,
            data: data.into(),
            line: 7,
        };
        parse("s", &ev)
    }

    fn delta(content: &str, finish: Option<&str>) -> Chunk {
        Chunk::Delta {
            content: content.into(),
            reasoning: String::new(),
            finish_reason: finish.map(str::to_string),
            usage: None,
        }
    }

    #[test]
    fn the_shapes_servers_send() {
        assert_eq!(parse_data("[DONE]").unwrap(), Chunk::Done);
        // llama.cpp's first chunk: the role and a null content.
        let first = r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#;
        assert_eq!(parse_data(first).unwrap(), delta("", None));
        let text = r#"{"choices":[{"index":0,"delta":{"content":"2 + 2"},"logprobs":null,"finish_reason":null}]}"#;
        assert_eq!(parse_data(text).unwrap(), delta("2 + 2", None));
        // The last chunk: an empty delta and the reason; llama.cpp adds usage and timings.
        let last = r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"completion_tokens":3,"prompt_tokens":5,"total_tokens":8},"timings":{}}"#;
        let Chunk::Delta {
            finish_reason,
            usage,
            ..
        } = parse_data(last).unwrap()
        else {
            panic!()
        };
        assert_eq!(finish_reason.as_deref(), Some("stop"));
        assert_eq!(usage.unwrap()["total_tokens"], 8);
        // vLLM's usage chunk (`stream_options.include_usage`): no choices.
        let usage_only = r#"{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}"#;
        assert!(matches!(
            parse_data(usage_only).unwrap(),
            Chunk::Delta { usage: Some(_), .. }
        ));
        // The completions endpoint's `text`, and a reasoning channel.
        assert_eq!(
            parse_data(r#"{"choices":[{"index":0,"text":"x","finish_reason":"length"}]}"#).unwrap(),
            delta("x", Some("length"))
        );
        let Chunk::Delta { reasoning, .. } =
            parse_data(r#"{"choices":[{"delta":{"reasoning_content":"hmm"}}]}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(reasoning, "hmm");
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let cases = [
            (
                r#"{"error":{"code":500,"message":"Context size has been exceeded.","type":"exceed_context_size_error"}}"#,
                "s line 7, field `error`: the server sent an error: Context size has been exceeded. (type `exceed_context_size_error`, code 500)",
            ),
            (
                r#"{"choices":[{"delta":{"content":"a"}}"#,
                "s line 7: not JSON (column 37: EOF while parsing a list at line 1 column 37): {\"choices\":[{\"delta\":{\"content\":\"a\"}}",
            ),
            (
                r#"{"choices":[{"delta":{"content":5}}]}"#,
                "s line 7, field `choices[0].delta.content`: must be a string or null",
            ),
            (
                r#"{"choices":[{"index":1,"delta":{"content":"b"}}]}"#,
                "s line 7, field `choices[0].index`: choice 1: only a single-choice stream (n = 1) can be verified step by step",
            ),
            (r#"{"choices":{}}"#, "s line 7, field `choices`: must be an array"),
            (
                r#"{"choices":[{"finish_reason":1}]}"#,
                "s line 7, field `choices[0].finish_reason`: must be a string or null",
            ),
            (r#"[1]"#, "s line 7: a chunk must be a JSON object: [1]"),
            (
                r#"{"choices":[{"delta":{"content":"2 + 3 = 5.\n\n","content":"EVIL"}}]}"#,
                "s line 7, field `choices[0].delta.content`: duplicate key `choices[0].delta.content` at line 1 column 58",
            ),
            (
                r#"{"object":"x"}"#,
                "s line 7: neither `choices` nor `usage`: not a completion chunk: {\"object\":\"x\"}",
            ),
        ];
        for (data, want) in cases {
            assert_eq!(parse_data(data).unwrap_err().to_string(), want, "{data}");
        }
        let ev = SseEvent {
            event: Some("error".into()),
            data: r#"{"message":"overloaded"}"#.into(),
            line: 2,
        };
        assert_eq!(
            parse("s", &ev).unwrap_err().to_string(),
            "s line 2: the server sent an error: overloaded"
        );
    }
}
