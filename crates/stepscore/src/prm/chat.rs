//! Chat prompt formats, rendered exactly as the checkpoints' own Jinja
//! templates render the message lists PRMs use (a system message, then
//! user/assistant turns, no generation prompt).

use serde::{Deserialize, Serialize};

/// A chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: &'a str,
    pub content: &'a str,
}

/// The chat formats of the supported PRM families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChatFormat {
    /// Qwen2 / SmolLM: `<|im_start|>{role}\n{content}<|im_end|>\n` per message.
    ChatMl,
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
            Some(ChatFormat::ChatMl)
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

    /// The prompt text for `messages`, without a generation prompt.
    pub fn render(&self, messages: &[Message<'_>]) -> String {
        let mut out = String::new();
        match self {
            ChatFormat::ChatMl => {
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
            ChatFormat::ChatMl.render(&m),
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
            Some(ChatFormat::ChatMl)
        );
        assert_eq!(
            ChatFormat::from_template("<|start_header_id|>"),
            Some(ChatFormat::Llama3)
        );
        assert_eq!(ChatFormat::from_template("x"), None);
    }
}
