//! RLHFlow PRMs (plain Llama causal LMs: nothing in the files says so, the
//! family is chosen by name): each step a user turn, the first prefixed by
//! the problem, answered "+" by the assistant; softmax over the "+"/"-"
//! logits just before each "+", probability of "+".

use super::{plus_minus, reads_no_features, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::chat::{ChatFormat, Message};
use crate::prm::head::Kind;
use crate::prm::template::Encoded;
use crate::{Error, Result};

/// The special tokens a Llama-3 conversation is written with.
const LLAMA3_MARKUP: [&str; 4] = [
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
];

pub(super) const SPEC: Spec = Spec {
    names: &["rlhflow"],
    needs_lm_head: true,
    scores_each_step: true,
    writes_critique: false,
    detect: None,
    head_file_tensors: &[],
    prepare,
    encode,
    head,
};

fn prepare(p: &mut Protocol, tokenizer: &Tokenizer) -> Result<()> {
    p.plus_minus = Some((p.last_token(tokenizer, "+")?, p.last_token(tokenizer, "-")?));
    let chat = p.chat.get_or_insert(ChatFormat::Llama31);
    // Without these as single tokens the conversation would be tokenized as
    // plain text: a prompt the model never saw, and scores that look fine.
    let turn = [
        Message {
            role: "user",
            content: "1 + 1 = 2",
        },
        Message {
            role: "assistant",
            content: "+",
        },
    ];
    let rendered = chat.render(&turn, false)?;
    for t in LLAMA3_MARKUP {
        if rendered.contains(t) && tokenizer.token_to_id(t).is_none() {
            return Err(p.missing(&format!(
                "the Llama-3 chat token `{t}` (its turns are Llama-3 conversations)"
            )));
        }
    }
    Ok(())
}

fn encode(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    // The reference scores step i on the conversation up to its answer, at
    // position -3 (the token before "+"). One pass over the whole
    // conversation gives the same logits, since the model is causal.
    let chat = p.chat.as_ref().unwrap_or(&ChatFormat::Llama31);
    let first = format!("{problem} {}", steps[0]);
    let contents: Vec<&str> = std::iter::once(first.as_str())
        .chain(steps[1..].iter().copied())
        .collect();
    let messages: Vec<Message> = contents
        .iter()
        .flat_map(|c| {
            [
                Message {
                    role: "user",
                    content: c,
                },
                Message {
                    role: "assistant",
                    content: "+",
                },
            ]
        })
        .collect();
    let text = chat.render(&messages, false)?;
    let mut markers = Vec::with_capacity(steps.len());
    for k in 1..=contents.len() {
        let prefix = chat.render(&messages[..2 * k], false)?;
        if !text.starts_with(&prefix) {
            return Err(Error::Tokenizer(
                "chat template: it renders the conversation up to a step differently from the \
                 start of the whole conversation, and RLHFlow's one pass needs them equal"
                    .into(),
            ));
        }
        let prefix = tok.encode(&prefix, false)?;
        if prefix.len() < 3 {
            return Err(Error::Tokenizer(
                "the RLHFlow prompt tokenized to fewer than 3 tokens".into(),
            ));
        }
        markers.push(prefix.len() - 3);
    }
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
    let texts = steps.iter().map(|s| s.trim().to_string()).collect();
    Ok(Encoded::of_prompt(enc, markers, &spans, texts))
}

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    reads_no_features(load)?;
    plus_minus(load)
}
