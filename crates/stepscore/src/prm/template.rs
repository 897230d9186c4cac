//! From a problem and its steps to token ids and marker positions, following
//! each family's reference code exactly: how the prompt is laid out, how it
//! is tokenized (whole or piece by piece), and which position scores a step.

use std::ops::Range;

use super::chat::{ChatFormat, Message};
use super::family::Family;
use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;

/// Qwen2.5-Math-PRM's system prompt.
pub(crate) const QWEN_PRM_SYSTEM: &str =
    "Please reason step by step, and put your final answer within \\boxed{}.";
/// Qwen2.5-Math-PRM's step separator token.
pub(crate) const QWEN_PRM_MARKER: &str = "<extra_0>";
/// Math-Shepherd's step tag.
pub(crate) const SHEPHERD_TAG: &str = "ки";

/// Everything about a checkpoint that the prompt layout depends on.
#[derive(Debug, Clone)]
pub struct Protocol {
    pub family: Family,
    /// The chat format, for the families that use one.
    pub chat: Option<ChatFormat>,
    /// The tokenizer's BOS token text (Skywork writes it into the prompt).
    pub bos_text: Option<String>,
    /// The token id that marks a step (`<extra_0>`, `ки`).
    pub marker_id: Option<u32>,
    /// The ids of "+" and "-" (LM-head families).
    pub plus_minus: Option<(u32, u32)>,
}

/// The special tokens a Llama-3 conversation is written with.
const LLAMA3_MARKUP: [&str; 4] = [
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
];

impl Protocol {
    /// Resolves the family's special tokens in `tokenizer`; errors name the
    /// token the checkpoint lacks.
    pub fn new(
        family: Family,
        tokenizer: &Tokenizer,
        chat: Option<ChatFormat>,
        bos_text: Option<String>,
    ) -> Result<Self> {
        let missing = |what: &str| {
            Error::Tokenizer(format!(
                "the {family} family needs {what}, which this vocabulary lacks"
            ))
        };
        let last = |text: &str| -> Result<u32> {
            tokenizer
                .encode(text, true)?
                .last()
                .copied()
                .ok_or_else(|| missing(&format!("a token for {text:?}")))
        };
        let mut p = Protocol {
            family,
            chat,
            bos_text,
            marker_id: None,
            plus_minus: None,
        };
        match family {
            Family::ScoreHead => {
                p.marker_id = Some(
                    tokenizer
                        .token_to_id(QWEN_PRM_MARKER)
                        .ok_or_else(|| missing("the `<extra_0>` token"))?,
                );
                p.chat.get_or_insert(ChatFormat::ChatMl {
                    default_system: None,
                });
            }
            Family::ValueHead => {
                if p.bos_text.is_none() {
                    return Err(missing("a BOS token (bos_token in tokenizer_config.json)"));
                }
            }
            Family::MathShepherd => {
                // The reference takes `encode("ки")[-1]` and `encode("+ -")[1:]`.
                p.marker_id = Some(last(SHEPHERD_TAG)?);
                let ids = tokenizer.encode("+ -", true)?;
                match ids.as_slice() {
                    [.., plus, minus] => p.plus_minus = Some((*plus, *minus)),
                    _ => return Err(missing("tokens for \"+\" and \"-\"")),
                }
            }
            Family::Rlhflow => {
                p.plus_minus = Some((last("+")?, last("-")?));
                let chat = p.chat.get_or_insert(ChatFormat::Llama31).clone();
                // Without these as single tokens the conversation would be
                // tokenized as plain text: a prompt the model never saw, and
                // scores that look fine.
                if matches!(chat, ChatFormat::Llama3 | ChatFormat::Llama31) {
                    for t in LLAMA3_MARKUP {
                        if tokenizer.token_to_id(t).is_none() {
                            return Err(missing(&format!(
                                "the Llama-3 chat token `{t}` (its turns are Llama-3 conversations)"
                            )));
                        }
                    }
                }
            }
            Family::Confidence => {}
        }
        Ok(p)
    }
}

/// A prompt ready for the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub tokens: Vec<u32>,
    /// Per step, the position whose output gives the step's score.
    pub markers: Vec<usize>,
    /// Per step, the positions of the step's own text tokens.
    pub step_tokens: Vec<Range<usize>>,
    /// Per step, for each of its `step_tokens`, the byte range of the
    /// step's text the token covers (clamped to the step: a token that
    /// straddles the step's edge covers only its part inside).
    pub step_spans: Vec<Vec<(usize, usize)>>,
    /// Per step, the text its `step_spans` index (the step as given; for
    /// RLHFlow, trimmed as its template trims it).
    pub step_texts: Vec<String>,
}

impl Encoded {
    /// The first position whose output the steps from `from` on read (the
    /// token before a step's first token gives its first log-prob; the
    /// marker its score): a cache may hold the positions before it.
    /// `self.tokens.len()` when there is no step `from`.
    pub(crate) fn first_needed(&self, from: usize) -> usize {
        match self.markers.get(from) {
            Some(&m) => self.step_tokens[from].start.saturating_sub(1).min(m),
            None => self.tokens.len(),
        }
    }

    /// The steps from `from` on, with positions counted from `keep` (at
    /// most [`Encoded::first_needed`]): what a head reads of a forward over
    /// `tokens[keep..]` that continues a cache of the first `keep`.
    pub(crate) fn tail(&self, from: usize, keep: usize) -> Encoded {
        Encoded {
            tokens: self.tokens[keep..].to_vec(),
            markers: self.markers[from..].iter().map(|&m| m - keep).collect(),
            step_tokens: self.step_tokens[from..]
                .iter()
                .map(|r| r.start.saturating_sub(keep)..r.end.saturating_sub(keep))
                .collect(),
            step_spans: self.step_spans[from..].to_vec(),
            step_texts: self.step_texts[from.min(self.step_texts.len())..].to_vec(),
        }
    }
}

/// Lays out and tokenizes `problem` and `steps` the way `protocol`'s family does.
pub fn encode(
    protocol: &Protocol,
    tokenizer: &Tokenizer,
    problem: &str,
    steps: &[&str],
) -> Result<Encoded> {
    if steps.is_empty() {
        return Err(Error::InvalidArgument(
            "a trace needs at least one step to score".into(),
        ));
    }
    // Blank steps (whitespace or invisible characters only) are refused like empty
    // ones, in every family: there is nothing in them to score.
    if let Some(i) = crate::validate::first_blank(steps.iter().copied()) {
        return Err(Error::InvalidArgument(format!(
            "step {i} is empty (nothing but whitespace or invisible characters)"
        )));
    }
    match protocol.family {
        Family::ScoreHead => score_head(protocol, tokenizer, problem, steps),
        Family::ValueHead => value_head(protocol, tokenizer, problem, steps),
        Family::MathShepherd => math_shepherd(protocol, tokenizer, problem, steps),
        Family::Rlhflow => rlhflow(protocol, tokenizer, problem, steps),
        Family::Confidence => confidence(tokenizer, problem, steps),
    }
}

/// Steps must not contain the text that marks step ends, or markers would
/// not line up with steps.
fn forbid(steps: &[&str], marker: &str) -> Result<()> {
    match steps.iter().position(|s| s.contains(marker)) {
        Some(i) => Err(Error::InvalidArgument(format!(
            "step {i} contains the step marker {marker:?}"
        ))),
        None => Ok(()),
    }
}

/// Positions of `id` in `tokens`, which must be one per step.
fn marker_positions(tokens: &[u32], id: u32, n_steps: usize) -> Result<Vec<usize>> {
    let found: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == id)
        .map(|(i, _)| i)
        .collect();
    if found.len() != n_steps {
        return Err(Error::InvalidArgument(format!(
            "the prompt holds {} step markers for {n_steps} steps (a step or the problem contains the marker token)",
            found.len()
        )));
    }
    Ok(found)
}

/// Token ranges of byte ranges of `text`, from the tokenizer's offsets.
/// Token offsets of a step encoded on its own, clamped to its `len` bytes.
fn clamped(offsets: &[(usize, usize)], len: usize) -> Vec<(usize, usize)> {
    offsets
        .iter()
        .map(|&(a, b)| (a.min(len), b.min(len)))
        .collect()
}

/// Per step, the byte ranges of `ranges`' tokens relative to the step's
/// `span` of the prompt text, clamped to it.
fn token_spans(
    offsets: &[(usize, usize)],
    ranges: &[Range<usize>],
    spans: &[Range<usize>],
) -> Vec<Vec<(usize, usize)>> {
    ranges
        .iter()
        .zip(spans)
        .map(|(r, span)| {
            let rel = |x: usize| x.clamp(span.start, span.end) - span.start;
            offsets
                .get(r.clone())
                .unwrap_or(&[])
                .iter()
                .map(|&(a, b)| (rel(a), rel(b)))
                .collect()
        })
        .collect()
}

fn token_ranges(offsets: &[(usize, usize)], spans: &[Range<usize>]) -> Vec<Range<usize>> {
    spans
        .iter()
        .map(|span| {
            let start = offsets
                .iter()
                .position(|&(s, e)| e > span.start && s < span.end && e > s);
            match start {
                Some(a) => {
                    let b = offsets[a..]
                        .iter()
                        .position(|&(s, _)| s >= span.end)
                        .map_or(offsets.len(), |k| a + k);
                    a..b
                }
                None => 0..0,
            }
        })
        .collect()
}

fn score_head(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    forbid(steps, QWEN_PRM_MARKER)?;
    let mut answer = String::new();
    let mut spans = Vec::with_capacity(steps.len());
    for s in steps {
        spans.push(answer.len()..answer.len() + s.len());
        answer.push_str(s);
        answer.push_str(QWEN_PRM_MARKER);
    }
    let chat = p.chat.clone().unwrap_or(ChatFormat::ChatMl {
        default_system: None,
    });
    let messages = [
        Message {
            role: "system",
            content: QWEN_PRM_SYSTEM,
        },
        Message {
            role: "user",
            content: problem,
        },
        Message {
            role: "assistant",
            content: &answer,
        },
    ];
    let text = chat.render(&messages);
    // The assistant content is the last place the answer text appears.
    let answer_at = text.rfind(&answer).unwrap_or(0);
    let spans: Vec<_> = spans
        .iter()
        .map(|r| answer_at + r.start..answer_at + r.end)
        .collect();
    let enc = tok.encode_with_offsets(&text, false)?;
    let markers = marker_positions(&enc.ids, p.marker_id.unwrap_or(u32::MAX), steps.len())?;
    let step_tokens = token_ranges(&enc.offsets, &spans);
    Ok(Encoded {
        step_spans: token_spans(&enc.offsets, &step_tokens, &spans),
        step_tokens,
        tokens: enc.ids,
        markers,
        step_texts: steps.iter().map(|s| s.to_string()).collect(),
    })
}

fn value_head(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    // Skywork's prepare_input: encode(bos + problem + "\n"), then per step
    // encode(step) + the "\n" id; each step's reward sits on its "\n".
    let bos = p.bos_text.as_deref().unwrap_or("");
    let mut tokens = tok.encode(&format!("{bos}{problem}\n"), true)?;
    let newline = tok.encode("\n", true)?.last().copied().ok_or_else(|| {
        Error::Tokenizer("the value-head family needs a token for \"\\n\"".into())
    })?;
    let mut markers = Vec::with_capacity(steps.len());
    let mut step_tokens = Vec::with_capacity(steps.len());
    let mut step_spans = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        if s.is_empty() {
            return Err(Error::InvalidArgument(format!("step {i} is empty")));
        }
        let start = tokens.len();
        let e = tok.encode_with_offsets(s, true)?;
        tokens.extend(e.ids);
        step_tokens.push(start..tokens.len());
        step_spans.push(clamped(&e.offsets, s.len()));
        tokens.push(newline);
        markers.push(tokens.len() - 1);
    }
    Ok(Encoded {
        tokens,
        markers,
        step_tokens,
        step_spans,
        step_texts: steps.iter().map(|s| s.to_string()).collect(),
    })
}

fn math_shepherd(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    forbid(steps, SHEPHERD_TAG)?;
    // f"{question} {output}", output = steps each followed by " ки", joined by "\n".
    let mut text = format!("{problem} ");
    let mut spans = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        spans.push(text.len()..text.len() + s.len());
        text.push_str(s);
        text.push(' ');
        text.push_str(SHEPHERD_TAG);
    }
    let enc = tok.encode_with_offsets(&text, true)?;
    let markers = marker_positions(&enc.ids, p.marker_id.unwrap_or(u32::MAX), steps.len())?;
    let step_tokens = token_ranges(&enc.offsets, &spans);
    Ok(Encoded {
        step_spans: token_spans(&enc.offsets, &step_tokens, &spans),
        step_tokens,
        tokens: enc.ids,
        markers,
        step_texts: steps.iter().map(|s| s.to_string()).collect(),
    })
}

fn rlhflow(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    // Each step is a user turn (the first prefixed by the problem) answered
    // "+"; the reference scores step i on the conversation up to its answer,
    // at position -3 (the token before "+"). One pass over the whole
    // conversation gives the same logits, since the model is causal.
    let chat = p.chat.clone().unwrap_or(ChatFormat::Llama31);
    let first = format!("{problem} {}", steps[0]);
    let contents: Vec<&str> = std::iter::once(first.as_str())
        .chain(steps[1..].iter().copied())
        .collect();
    let mut messages = Vec::with_capacity(2 * steps.len());
    let mut markers = Vec::with_capacity(steps.len());
    for c in &contents {
        messages.push(Message {
            role: "user",
            content: c,
        });
        messages.push(Message {
            role: "assistant",
            content: "+",
        });
        let prefix = tok.encode(&chat.render(&messages), false)?;
        if prefix.len() < 3 {
            return Err(Error::Tokenizer(
                "the RLHFlow prompt tokenized to fewer than 3 tokens".into(),
            ));
        }
        markers.push(prefix.len() - 3);
    }
    let text = chat.render(&messages);
    let enc = tok.encode_with_offsets(&text, false)?;
    // Step text spans: each user content (trimmed by the template) in order.
    let mut spans = Vec::with_capacity(steps.len());
    let mut from = 0;
    for (i, s) in steps.iter().enumerate() {
        let needle = if i == 0 { first.trim() } else { s.trim() };
        let at = text[from..].find(needle).map_or(from, |k| from + k);
        let start = if i == 0 {
            at + needle.len() - s.trim().len()
        } else {
            at
        };
        spans.push(start..at + needle.len());
        from = at + needle.len();
    }
    if markers.last().is_some_and(|&m| m >= enc.ids.len()) {
        return Err(Error::Tokenizer(
            "RLHFlow prompt prefixes do not tokenize as prefixes of the whole".into(),
        ));
    }
    let step_tokens = token_ranges(&enc.offsets, &spans);
    Ok(Encoded {
        step_spans: token_spans(&enc.offsets, &step_tokens, &spans),
        step_tokens,
        tokens: enc.ids,
        markers,
        step_texts: steps.iter().map(|s| s.trim().to_string()).collect(),
    })
}

/// Separator between the problem and steps, and after every step, in the
/// confidence family's plain prompt.
pub(crate) const CONFIDENCE_SEPARATOR: &str = "\n\n";

fn confidence(tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    let mut tokens = tok.encode(&format!("{problem}{CONFIDENCE_SEPARATOR}"), true)?;
    let sep = tok.encode(CONFIDENCE_SEPARATOR, false)?;
    let mut markers = Vec::with_capacity(steps.len());
    let mut step_tokens = Vec::with_capacity(steps.len());
    let mut step_spans = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        let e = tok.encode_with_offsets(s, false)?;
        if e.ids.is_empty() {
            return Err(Error::InvalidArgument(format!("step {i} has no tokens")));
        }
        let start = tokens.len();
        tokens.extend(e.ids);
        step_tokens.push(start..tokens.len());
        step_spans.push(clamped(&e.offsets, s.len()));
        markers.push(tokens.len() - 1);
        tokens.extend_from_slice(&sep);
    }
    if step_tokens.first().is_some_and(|r| r.start == 0) {
        return Err(Error::InvalidArgument(
            "the first step's first token has no context to be predicted from".into(),
        ));
    }
    Ok(Encoded {
        tokens,
        markers,
        step_tokens,
        step_spans,
        step_texts: steps.iter().map(|s| s.to_string()).collect(),
    })
}
