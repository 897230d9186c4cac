//! Chat prompt formats. A checkpoint's own Jinja chat template (its
//! tokenizer_config.json or GGUF metadata) is rendered by minijinja the way
//! transformers' `apply_chat_template` renders it with Jinja2: trim_blocks and
//! lstrip_blocks, loop controls, `raise_exception`, a `tojson` that writes
//! Python's `json.dumps` (non-ASCII kept), Python's string and dict methods,
//! `bos_token`/`eos_token`, `tools` and `documents` none. Checked against
//! Jinja2 on real templates (Qwen2.5, SmolLM2, Qwen3, DeepSeek-R1-Distill,
//! Gemma 3) by tests/chat_template.rs. The two written-out formats are the
//! layouts families fall back to on checkpoints that carry no template.

use minijinja::value::{Kwargs, Value};
use minijinja::{context, Environment, ErrorKind};

use crate::{Error, Result};

/// A chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// How a conversation becomes prompt text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatFormat {
    /// `<|im_start|>{role}\n{content}<|im_end|>\n` per message, nothing else:
    /// Qwen2.5-Math-PRM's layout when the checkpoint carries no template.
    ChatMl,
    /// Llama 3.1's layout: `<|begin_of_text|>`, the default system block
    /// ("Cutting Knowledge Date: December 2023 / Today Date: 26 Jul 2024",
    /// then the conversation's own system message), then
    /// `<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>`
    /// per message, content trimmed: RLHFlow's layout when the checkpoint
    /// carries no template.
    Llama31,
    /// The checkpoint's own Jinja template.
    Template(Box<JinjaTemplate>),
}

/// A checkpoint's Jinja chat template and the special-token texts it may
/// write (`{{ bos_token }}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JinjaTemplate {
    source: String,
    bos_token: Option<String>,
    eos_token: Option<String>,
}

/// The assistant text `ChatFormat::end_of_turn` looks for in a rendering.
const PROBE: &str = "stepscore-end-of-turn-probe";

impl ChatFormat {
    /// The checkpoint's template, checked to parse (the error names the line).
    pub fn from_template(
        source: &str,
        bos_token: Option<String>,
        eos_token: Option<String>,
    ) -> Result<ChatFormat> {
        environment()
            .template_from_str(source)
            .map_err(template_error)?;
        Ok(ChatFormat::Template(Box::new(JinjaTemplate {
            source: source.to_string(),
            bos_token,
            eos_token,
        })))
    }

    /// The prompt text for `messages`; with `add_generation_prompt`, followed
    /// by what opens the assistant's next turn. A template that refuses the
    /// conversation (`raise_exception`, e.g. roles that do not alternate) or
    /// fails to render gives `Error::Tokenizer` with its message.
    pub fn render(&self, messages: &[Message<'_>], add_generation_prompt: bool) -> Result<String> {
        match self {
            ChatFormat::ChatMl => {
                let mut out = String::new();
                for m in messages {
                    out.push_str("<|im_start|>");
                    out.push_str(m.role);
                    out.push('\n');
                    out.push_str(m.content);
                    out.push_str("<|im_end|>\n");
                }
                if add_generation_prompt {
                    out.push_str("<|im_start|>assistant\n");
                }
                Ok(out)
            }
            ChatFormat::Llama31 => {
                let mut out = String::from("<|begin_of_text|>");
                let (system, rest) = match messages.split_first() {
                    Some((first, rest)) if first.role == "system" => (first.content.trim(), rest),
                    _ => ("", messages),
                };
                header(&mut out, "system");
                out.push_str("Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
                out.push_str(system);
                out.push_str("<|eot_id|>");
                for m in rest {
                    header(&mut out, m.role);
                    out.push_str(m.content.trim());
                    out.push_str("<|eot_id|>");
                }
                if add_generation_prompt {
                    header(&mut out, "assistant");
                }
                Ok(out)
            }
            ChatFormat::Template(t) => t.render(messages, add_generation_prompt),
        }
    }

    /// The text that ends an assistant turn (generation stops at its
    /// token): what the format writes after an assistant message, trimmed;
    /// empty when it writes nothing there.
    pub fn end_of_turn(&self) -> Result<String> {
        match self {
            ChatFormat::ChatMl => Ok("<|im_end|>".into()),
            ChatFormat::Llama31 => Ok("<|eot_id|>".into()),
            ChatFormat::Template(t) => {
                let text = t.render(
                    &[
                        Message {
                            role: "user",
                            content: "Hi",
                        },
                        Message {
                            role: "assistant",
                            content: PROBE,
                        },
                    ],
                    false,
                )?;
                let at = text.rfind(PROBE).ok_or_else(|| {
                    Error::Tokenizer(
                        "chat template: it does not write the assistant's message".into(),
                    )
                })?;
                Ok(text[at + PROBE.len()..].trim().to_string())
            }
        }
    }
}

impl JinjaTemplate {
    fn render(&self, messages: &[Message<'_>], add_generation_prompt: bool) -> Result<String> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| context! { role => m.role, content => m.content })
            .collect();
        let context = context! {
            messages,
            add_generation_prompt,
            bos_token => self.bos_token.as_deref(),
            eos_token => self.eos_token.as_deref(),
            tools => (),
            documents => (),
        };
        environment()
            .render_str(&self.source, context)
            .map_err(template_error)
    }
}

/// The environment transformers renders chat templates in.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> std::result::Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_filter("tojson", tojson);
    env
}

/// transformers' `tojson`: `json.dumps(value, ensure_ascii=False,
/// indent=indent)` (minijinja's own escapes `<`, `>`, `&` and `'` for HTML).
fn tojson(value: Value, kwargs: Kwargs) -> std::result::Result<String, minijinja::Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let written = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            serde::Serialize::serialize(
                &value,
                &mut serde_json::Serializer::with_formatter(&mut out, fmt),
            )
        }
        None => serde::Serialize::serialize(
            &value,
            &mut serde_json::Serializer::with_formatter(&mut out, PythonSeparators),
        ),
    };
    written
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))?;
    String::from_utf8(out)
        .map_err(|e| minijinja::Error::new(ErrorKind::InvalidOperation, format!("tojson: {e}")))
}

/// `json.dumps`'s default separators: `", "` between items, `": "` after keys.
struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// A template's parse or render error, with minijinja's line and reason.
fn template_error(e: minijinja::Error) -> Error {
    let mut message = format!("chat template: {}", e.detail().unwrap_or("cannot render"));
    if let Some(line) = e.line() {
        message.push_str(&format!(" (line {line})"));
    }
    if e.kind() != ErrorKind::InvalidOperation {
        message.push_str(&format!(" [{}]", e.kind()));
    }
    Error::Tokenizer(message)
}

/// Where `content`, a message's text, starts in `text`, its rendering (the
/// last place it appears). Step spans are counted from there, so a
/// template that rewrites message text (cuts a `<think>` block, strips
/// whitespace) is refused rather than scored at guessed positions.
pub(crate) fn locate(text: &str, content: &str) -> Result<usize> {
    text.rfind(content).ok_or_else(|| {
        Error::Tokenizer(
            "chat template: it rewrites the message text (a `</think>` in it, or whitespace at \
             its ends), so the steps cannot be placed in the prompt"
                .into(),
        )
    })
}

fn header(out: &mut String, role: &str) {
    out.push_str("<|start_header_id|>");
    out.push_str(role);
    out.push_str("<|end_header_id|>\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<'a>(role: &'a str, content: &'a str) -> Message<'a> {
        Message { role, content }
    }

    fn template(source: &str) -> ChatFormat {
        ChatFormat::from_template(source, Some("<s>".into()), Some("</s>".into())).unwrap()
    }

    #[test]
    fn chatml_writes_the_turns_only() {
        let m = [
            msg("system", "S"),
            msg("user", "Q"),
            msg("assistant", "a<extra_0>"),
        ];
        assert_eq!(
            ChatFormat::ChatMl.render(&m, false).unwrap(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\na<extra_0><|im_end|>\n"
        );
        assert!(ChatFormat::ChatMl
            .render(&m[..2], true)
            .unwrap()
            .ends_with("Q<|im_end|>\n<|im_start|>assistant\n"));
    }

    #[test]
    fn llama31_adds_the_date_block() {
        let m = [msg("user", " hi "), msg("assistant", "+")];
        assert_eq!(
            ChatFormat::Llama31.render(&m, false).unwrap(),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n\
             Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n+<|eot_id|>"
        );
        // The conversation's own system message goes into the block.
        let m = [msg("system", " be brief "), msg("user", "hi")];
        let text = ChatFormat::Llama31.render(&m, true).unwrap();
        assert!(
            text.contains("Today Date: 26 Jul 2024\n\nbe brief<|eot_id|><|start_header_id|>user")
        );
        assert!(text.ends_with("hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"));
    }

    #[test]
    fn templates_render_as_transformers_does() {
        // trim_blocks and lstrip_blocks, bos_token, Python's string methods.
        let t = template(
            "{{ bos_token }}\n{% for m in messages %}\n  {% if m.content.startswith(' ') %}\n\
             [{{ m.role.upper() }}:{{ m.content.strip() }}]\n  {% else %}\n{{ m.content.split('|')[-1] }}\n  {% endif %}\n\
             {% endfor %}\n{% if add_generation_prompt %}>{% endif %}",
        );
        let m = [msg("user", " padded "), msg("assistant", "a|b")];
        // (Expected strings are Jinja2 3.1.6's renderings.)
        assert_eq!(t.render(&m, false).unwrap(), "<s>\n[USER:padded]\nb\n");
        assert_eq!(t.render(&m, true).unwrap(), "<s>\n[USER:padded]\nb\n>");
    }

    #[test]
    fn tojson_writes_python_json() {
        let t =
            template("{{ {'a': [1, 'x<y'], 'b': 'é'} | tojson }}|{{ [1, 2] | tojson(indent=2) }}");
        assert_eq!(
            t.render(&[], false).unwrap(),
            "{\"a\": [1, \"x<y\"], \"b\": \"é\"}|[\n  1,\n  2\n]"
        );
    }

    #[test]
    fn template_errors_are_typed_and_name_the_reason() {
        let t = template(
            "{% for m in messages %}{% if m.role == 'system' %}\
             {{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}",
        );
        let e = t.render(&[msg("system", "s")], false).unwrap_err();
        assert!(matches!(e, Error::Tokenizer(_)), "{e:?}");
        assert!(e.to_string().contains("System role not supported"), "{e}");
        let e = ChatFormat::from_template("line one\n{% if %}", None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("tokenizer: chat template: "),
            "{e}"
        );
        assert!(e.to_string().contains("line 2"), "{e}");
        // transformers' `strftime_now` (Llama 3.2's date line) is not given:
        // the prompt would change with the day. The error names it.
        let e = template("{{ strftime_now('%d %b %Y') }}")
            .render(&[], false)
            .unwrap_err();
        assert!(e.to_string().contains("strftime_now"), "{e}");
    }

    #[test]
    fn end_of_turn_is_what_follows_an_assistant_message() {
        assert_eq!(ChatFormat::ChatMl.end_of_turn().unwrap(), "<|im_end|>");
        let t = template("{% for m in messages %}<{{ m.role }}>{{ m.content }}<end>\n{% endfor %}");
        assert_eq!(t.end_of_turn().unwrap(), "<end>");
        let t = template("{% for m in messages %}{{ m.role }}{% endfor %}");
        assert!(t.end_of_turn().is_err());
    }
}
