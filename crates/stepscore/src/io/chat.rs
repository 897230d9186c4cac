//! OpenAI-style chat rows (`messages`) -> an agent trajectory.
//!
//! The problem is everything said before the first assistant message. From
//! there on, each message becomes steps: assistant text, one step per tool
//! call, tool results, later user or system turns. The trace's `response` is
//! a transcript in the [`Segmenter::ChatTurns`](crate::segment::Segmenter)
//! format (`Assistant: ...`, `Tool call (name): ...`), each step's span
//! pointing at its text in it.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::fields::{type_name, wrong_type, FieldError, RowResult};
use crate::segment::role_prefix;
use crate::trace::{Span, Step, StepRole, Trace};

pub(crate) fn chat_row(row: &mut Map<String, Value>) -> RowResult<Trace> {
    let messages = match row.remove("messages") {
        None => return Err(FieldError::at("messages", "missing field `messages`")),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(wrong_type("messages", "an array", &v)),
    };
    let mut problem_parts: Vec<String> = Vec::new();
    // (text, role, tool) of every step, in order.
    let mut steps: Vec<(String, StepRole, Option<String>)> = Vec::new();
    let mut seen_assistant = false;
    let mut call_names: HashMap<String, String> = HashMap::new();

    for (i, msg) in messages.iter().enumerate() {
        let field = format!("messages[{i}]");
        let Value::Object(m) = msg else {
            return Err(wrong_type(&field, "an object", msg));
        };
        let role_name = match m.get("role") {
            Some(Value::String(r)) => r.to_ascii_lowercase(),
            Some(v) => return Err(wrong_type(&format!("{field}.role"), "a string", v)),
            None => {
                return Err(FieldError::at(
                    format!("{field}.role"),
                    "missing field `role`",
                ))
            }
        };
        let role = match role_name.as_str() {
            "system" | "developer" => StepRole::System,
            "user" | "human" => StepRole::User,
            "assistant" => StepRole::Assistant,
            "tool" | "function" | "ipython" => StepRole::ToolResult,
            other => {
                return Err(FieldError::at(
                    format!("{field}.role"),
                    format!("unknown role `{other}` (expected system, user, assistant or tool)"),
                ))
            }
        };
        let content = content_text(m.get("content"), &format!("{field}.content"))?;
        let name = match m.get("name") {
            Some(Value::String(n)) => Some(n.clone()),
            _ => None,
        };

        if role == StepRole::Assistant {
            seen_assistant = true;
        }
        if !seen_assistant {
            // Context before the model speaks is the problem.
            if !content.trim().is_empty() {
                problem_parts.push(content.trim().to_string());
            }
            continue;
        }
        match role {
            StepRole::Assistant => {
                push(&mut steps, &content, StepRole::Assistant, None);
                for (name, args, id) in tool_calls(m, &field)? {
                    if let Some(id) = id {
                        call_names.insert(id, name.clone());
                    }
                    push(
                        &mut steps,
                        &format!("{name}({args})"),
                        StepRole::ToolCall,
                        Some(name),
                    );
                }
            }
            StepRole::ToolResult => {
                let tool = name.or_else(|| match m.get("tool_call_id") {
                    Some(Value::String(id)) => call_names.get(id).cloned(),
                    _ => None,
                });
                push(&mut steps, &content, StepRole::ToolResult, tool);
            }
            other => push(&mut steps, &content, other, None),
        }
    }
    if !seen_assistant {
        return Err(FieldError::at(
            "messages",
            "no assistant message: nothing to score",
        ));
    }
    if steps.is_empty() {
        return Err(FieldError::at(
            "messages",
            "empty step list: the assistant turns have no text or tool calls",
        ));
    }

    // Render the transcript, recording where each step's text lands.
    let mut response = String::new();
    let mut out = Vec::with_capacity(steps.len());
    for (text, role, tool) in steps {
        if !response.is_empty() {
            response.push_str("\n\n");
        }
        response.push_str(&role_prefix(Some(role), tool.as_deref()));
        let start = response.len();
        response.push_str(&text);
        out.push(Step {
            span: Some(Span::new(start, response.len())),
            text,
            role: Some(role),
            tool,
            ..Default::default()
        });
    }
    Ok(Trace {
        problem: problem_parts.join("\n\n"),
        response: Some(response),
        steps: out,
        ..Default::default()
    })
}

fn push(
    steps: &mut Vec<(String, StepRole, Option<String>)>,
    text: &str,
    role: StepRole,
    tool: Option<String>,
) {
    let t = text.trim();
    if !t.is_empty() {
        steps.push((t.to_string(), role, tool));
    }
}

/// A message's text: a string, null, or a list of parts of which the
/// `{"type": "text", "text": ...}` ones are joined by newlines (images and
/// other parts carry no text to score).
fn content_text(v: Option<&Value>, field: &str) -> RowResult<String> {
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                let pf = format!("{field}[{j}]");
                match p {
                    Value::String(s) => texts.push(s.as_str()),
                    Value::Object(o) => match (o.get("type"), o.get("text")) {
                        (Some(Value::String(t)), Some(Value::String(s))) if t == "text" => {
                            texts.push(s)
                        }
                        (Some(Value::String(t)), Some(v)) if t == "text" => {
                            return Err(wrong_type(&format!("{pf}.text"), "a string", v))
                        }
                        _ => {}
                    },
                    other => return Err(wrong_type(&pf, "a content part object", other)),
                }
            }
            Ok(texts.join("\n"))
        }
        Some(other) => Err(FieldError::at(
            field,
            format!(
                "expected a string, null or a list of parts, found {}",
                type_name(other)
            ),
        )),
    }
}

/// The `(name, arguments, id)` of an assistant message's tool calls
/// (`tool_calls`, or the older single `function_call`).
fn tool_calls(
    m: &Map<String, Value>,
    field: &str,
) -> RowResult<Vec<(String, String, Option<String>)>> {
    let mut out = Vec::new();
    match m.get("tool_calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (k, call) in calls.iter().enumerate() {
                let cf = format!("{field}.tool_calls[{k}]");
                let Value::Object(c) = call else {
                    return Err(wrong_type(&cf, "an object", call));
                };
                let id = match c.get("id") {
                    Some(Value::String(s)) => Some(s.clone()),
                    _ => None,
                };
                let function = match c.get("function") {
                    Some(Value::Object(f)) => f,
                    Some(v) => return Err(wrong_type(&format!("{cf}.function"), "an object", v)),
                    None => {
                        return Err(FieldError::at(
                            format!("{cf}.function"),
                            "missing field `function`",
                        ))
                    }
                };
                let (name, args) = function_parts(function, &format!("{cf}.function"))?;
                out.push((name, args, id));
            }
        }
        Some(v) => return Err(wrong_type(&format!("{field}.tool_calls"), "an array", v)),
    }
    if let Some(fc) = m.get("function_call").filter(|v| !v.is_null()) {
        let Value::Object(f) = fc else {
            return Err(wrong_type(
                &format!("{field}.function_call"),
                "an object",
                fc,
            ));
        };
        let (name, args) = function_parts(f, &format!("{field}.function_call"))?;
        out.push((name, args, None));
    }
    Ok(out)
}

/// A function's name and its arguments as text (a JSON string, or any other
/// JSON value written compactly).
fn function_parts(f: &Map<String, Value>, field: &str) -> RowResult<(String, String)> {
    let name = match f.get("name") {
        Some(Value::String(n)) => n.clone(),
        Some(v) => return Err(wrong_type(&format!("{field}.name"), "a string", v)),
        None => {
            return Err(FieldError::at(
                format!("{field}.name"),
                "missing field `name`",
            ))
        }
    };
    let args = match f.get("arguments") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    Ok((name, args))
}
