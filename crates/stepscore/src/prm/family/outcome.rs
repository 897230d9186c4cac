//! Outcome reward models of the `*ForSequenceClassification` layout
//! (Skywork-Reward-V2 on Qwen3 and Llama, and the reward models TRL's
//! `RewardTrainer` writes): the conversation (the problem as the user's turn,
//! the steps joined by blank lines as the assistant's) in the checkpoint's
//! chat format, and `score.weight` Linear(h,1) on the last token's final
//! hidden state. One score for the whole solution, sigmoid of that logit,
//! shown on the last step; the earlier steps are not scored. The raw logit
//! (what Bradley-Terry reward models are trained to compare) is kept beside
//! it.
//!
//! Transformers pools at the last token that is not the pad token; chat
//! templates end a conversation with their end-of-turn text, so that is the
//! last token here.

use super::{Clues, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::chat::{locate, Message};
use crate::prm::head::{optional_bias, Kind, OUTCOME_BIAS, OUTCOME_WEIGHT};
use crate::prm::template::Encoded;
use crate::{Error, Result};

/// Between steps in the assistant's turn: the blank line the segmenter splits
/// responses at, so a segmented response is scored as it was written.
const STEP_JOIN: &str = "\n\n";

pub(super) const SPEC: Spec = Spec {
    names: &["outcome", "orm", "sequence-classification"],
    needs_lm_head: false,
    scores_each_step: false,
    writes_critique: false,
    detect: Some(detect),
    head_file_tensors: &[],
    prepare,
    encode,
    head,
};

fn detect(c: &Clues<'_>) -> bool {
    c.architecture("ForSequenceClassification") && (c.has_tensor)(OUTCOME_WEIGHT)
}

fn prepare(p: &mut Protocol, _: &Tokenizer) -> Result<()> {
    if p.chat.is_none() {
        return Err(p.missing_chat("it lays out the conversation the reward model was trained on"));
    }
    Ok(())
}

fn encode(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    let chat = p.chat.clone().ok_or_else(|| {
        p.missing_chat("it lays out the conversation the reward model was trained on")
    })?;
    let answer = steps.join(STEP_JOIN);
    let messages = [
        Message {
            role: "user",
            content: problem,
        },
        Message {
            role: "assistant",
            content: &answer,
        },
    ];
    let text = chat.render(&messages, false)?;
    // The assistant's turn is the last place the answer appears (some
    // formats trim it: find the trimmed text, and count from where the
    // untrimmed one would start).
    let shown = answer.trim();
    let lead = answer.len() - answer.trim_start().len();
    let at = locate(&text, shown)?.saturating_sub(lead);
    let mut spans = Vec::with_capacity(steps.len());
    let mut from = at;
    for s in steps {
        spans.push(from..from + s.len());
        from += s.len() + STEP_JOIN.len();
    }
    let enc = tok.encode_with_offsets(&text, false)?;
    if enc.ids.is_empty() {
        return Err(Error::Tokenizer(
            "the conversation tokenized to nothing".into(),
        ));
    }
    let last = enc.ids.len() - 1;
    let texts = steps.iter().map(|s| s.to_string()).collect();
    let mut encoded = Encoded::of_prompt(enc, Vec::new(), &spans, texts);
    // Each step's own last token marks it (what `features` reads); the last
    // step's score is the whole conversation's, read at its last token.
    encoded.markers = encoded
        .step_tokens
        .iter()
        .map(|r| r.end.saturating_sub(1))
        .collect();
    if let Some(m) = encoded.markers.last_mut() {
        *m = last;
    }
    Ok(encoded)
}

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    if !load.input.layers.is_empty() || !load.input.stats.is_empty() {
        return Err(Error::model(
            "stepscore.layer",
            "an outcome reward model's head reads the last token's final state: it has no layer or \
             step statistics to choose",
        ));
    }
    let h = load.hidden();
    let weight = match (load.get)(OUTCOME_WEIGHT)? {
        Some((s, w)) if s == [1, h] => w,
        Some((s, _)) if s.len() == 2 && s[1] == h => {
            return Err(Error::model(
                OUTCOME_WEIGHT,
                format!(
                "has {} labels ({s:?}); a reward model has one (num_labels = 1): this checkpoint \
                     is a classifier, not a reward model",
                s[0]
            ),
            ))
        }
        Some((s, _)) => {
            return Err(Error::model(
                OUTCOME_WEIGHT,
                format!("head tensor has shape {s:?}, expected [1, {h}]"),
            ))
        }
        None => {
            return Err(Error::model(
                OUTCOME_WEIGHT,
                format!("missing head tensor (expected shape [1, {h}])"),
            ))
        }
    };
    let bias = optional_bias(load.get, OUTCOME_BIAS)?;
    Ok(Kind::Outcome {
        weight: Matrix::from_f32(1, h, weight)?,
        bias,
    })
}
