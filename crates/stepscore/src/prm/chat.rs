//! Chat prompt formats, rendered exactly as the checkpoints' own Jinja
//! templates render the message lists PRMs use (an optional system message,
//! then user/assistant turns, no generation prompt). Checked against Jinja2
//! on the Qwen2.5 and SmolLM2 GGUFs' templates by tests/chat_template.rs.

use serde::{Deserialize, Serialize};

/// A chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// The chat formats of the supported PRM families.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChatFormat {
    /// Qwen2 / SmolLM: `<|im_start|>{role}\n{content}<|im_end|>\n` per message,
    /// preceded by `default_system` as a system message when the
    /// conversation does not start with one (Qwen2.5's "You are Qwen, ...",
    /// SmolLM2's "You are a helpful AI assistant named SmolLM, ...").
    ChatMl { default_system: Option<String> },
    /// Llama 3: `<|begin_of_text|>` then
    /// `<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>`
    /// per message (content trimmed, as the template does).
    Llama3,
    /// Llama 3.1: as Llama 3, with the template's default system block
    /// ("Cutting Knowledge Date: December 2023 / Today Date: 26 Jul 2024")
    /// when the conversation has no system message of its own.
    Llama31,
}

impl ChatFormat {
    /// Tells the format from a checkpoint's Jinja chat template text.
    pub fn from_template(template: &str) -> Option<ChatFormat> {
        if template.contains("<|im_start|>") {
            Some(ChatFormat::ChatMl {
                default_system: chatml_default_system(template),
            })
        } else if template.contains("<|start_header_id|>") {
            if template.contains("Cutting Knowledge Date") {
                Some(ChatFormat::Llama31)
            } else {
                Some(ChatFormat::Llama3)
            }
        } else {
            None
        }
    }

    /// What the template appends for the assistant's next turn
    /// (`add_generation_prompt`).
    pub fn generation_prompt(&self) -> &'static str {
        match self {
            ChatFormat::ChatMl { .. } => "<|im_start|>assistant\n",
            ChatFormat::Llama3 | ChatFormat::Llama31 => {
                "<|start_header_id|>assistant<|end_header_id|>\n\n"
            }
        }
    }

    /// The token text that ends a turn: generation stops there.
    pub fn end_of_turn(&self) -> &'static str {
        match self {
            ChatFormat::ChatMl { .. } => "<|im_end|>",
            ChatFormat::Llama3 | ChatFormat::Llama31 => "<|eot_id|>",
        }
    }

    /// The prompt text for `messages`, without a generation prompt.
    pub fn render(&self, messages: &[Message<'_>]) -> String {
        let mut out = String::new();
        match self {
            ChatFormat::ChatMl { default_system } => {
                let has_system = messages.first().is_some_and(|m| m.role == "system");
                if let (Some(system), false) = (default_system, has_system) {
                    out.push_str("<|im_start|>system\n");
                    out.push_str(system);
                    out.push_str("<|im_end|>\n");
                }
                for m in messages {
                    out.push_str("<|im_start|>");
                    out.push_str(m.role);
                    out.push('\n');
                    out.push_str(m.content);
                    out.push_str("<|im_end|>\n");
                }
            }
            ChatFormat::Llama3 | ChatFormat::Llama31 => {
                out.push_str("<|begin_of_text|>");
                let has_system = messages.first().is_some_and(|m| m.role == "system");
                if *self == ChatFormat::Llama31 {
                    let system = if has_system {
                        messages[0].content.trim()
                    } else {
                        ""
                    };
                    header(&mut out, "system");
                    out.push_str(
                        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n",
                    );
                    out.push_str(system);
                    out.push_str("<|eot_id|>");
                }
                let skip = usize::from(has_system && *self == ChatFormat::Llama31);
                for m in &messages[skip..] {
                    header(&mut out, m.role);
                    out.push_str(m.content.trim());
                    out.push_str("<|eot_id|>");
                }
            }
        }
        out
    }
}

/// The system prompt a ChatML template writes when the conversation has
/// none: the first string literal in it that reads
/// `<|im_start|>system\n{text}<|im_end|>` with `text` written out (not
/// `' + messages[0]['content'] + '`). Jinja escapes in the literal are undone.
fn chatml_default_system(template: &str) -> Option<String> {
    const OPEN: &str = "<|im_start|>system";
    const END: &str = "<|im_end|>";
    let mut from = 0;
    while let Some(k) = template[from..].find(OPEN) {
        let at = from + k;
        from = at + OPEN.len();
        // The opening quote of the literal this marker starts.
        let quote = match template[..at].chars().next_back() {
            Some(q @ ('\'' | '"')) => q,
            _ => continue,
        };
        let text = unescape_literal(&template[from..], quote);
        let Some(body) = text.strip_prefix('\n') else {
            continue;
        };
        if let Some(end) = body.find(END) {
            return Some(body[..end].to_string());
        }
    }
    None
}

/// The rest of a Jinja string literal delimited by `quote`, escapes undone,
/// up to its closing quote (or the end of the input).
fn unescape_literal(rest: &str, quote: char) -> String {
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => break,
            },
            c if c == quote => break,
            c => out.push(c),
        }
    }
    out
}

fn header(out: &mut String, role: &str) {
    out.push_str("<|start_header_id|>");
    out.push_str(role);
    out.push_str("<|end_header_id|>\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_matches_the_qwen_template() {
        let m = [
            Message {
                role: "system",
                content: "S",
            },
            Message {
                role: "user",
                content: "Q",
            },
            Message {
                role: "assistant",
                content: "a<extra_0>",
            },
        ];
        assert_eq!(
            ChatFormat::ChatMl {
                default_system: Some("unused: a system message is given".into())
            }
            .render(&m),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\na<extra_0><|im_end|>\n"
        );
    }

    #[test]
    fn llama31_adds_the_date_block() {
        let m = [
            Message {
                role: "user",
                content: " hi ",
            },
            Message {
                role: "assistant",
                content: "+",
            },
        ];
        assert_eq!(
            ChatFormat::Llama31.render(&m),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n\
             Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n+<|eot_id|>"
        );
        assert_eq!(
            ChatFormat::Llama3.render(&m),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>\
             <|start_header_id|>assistant<|end_header_id|>\n\n+<|eot_id|>"
        );
    }

    #[test]
    fn detection() {
        assert_eq!(
            ChatFormat::from_template("{{'<|im_start|>' + role}}"),
            Some(ChatFormat::ChatMl {
                default_system: None
            })
        );
        // The literal after the one that splices in the caller's system
        // message; `\\` and `\n` escapes undone.
        let t = r"{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
            {%- else %}{{- '<|im_start|>system\nSay \\boxed{} and \'hi\'.<|im_end|>\n' }}";
        assert_eq!(
            ChatFormat::from_template(t),
            Some(ChatFormat::ChatMl {
                default_system: Some("Say \\boxed{} and 'hi'.".into())
            })
        );
        assert_eq!(
            ChatFormat::from_template("<|start_header_id|>"),
            Some(ChatFormat::Llama3)
        );
        assert_eq!(ChatFormat::from_template("x"), None);
    }
}
