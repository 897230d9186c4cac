//! Qwen2.5-Math-PRM (`Qwen2ForProcessRewardModel`): a chat prompt whose
//! assistant turn is the steps, each followed by `<extra_0>`; the head
//! `score.0` Linear(h,h) -> ReLU -> `score.2` Linear(h,2) at each marker,
//! softmax, probability of class 1.

use super::{Clues, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::chat::{locate, ChatFormat, Message};
use crate::prm::head::{require, Kind, SCORE_0_BIAS, SCORE_0_WEIGHT, SCORE_2_BIAS, SCORE_2_WEIGHT};
use crate::prm::template::{forbid, marker_positions, Encoded};
use crate::{Error, Result};

/// Qwen2.5-Math-PRM's system prompt.
const SYSTEM: &str = "Please reason step by step, and put your final answer within \\boxed{}.";
/// Its step separator token.
const MARKER: &str = "<extra_0>";

pub(super) const SPEC: Spec = Spec {
    names: &["score-head", "qwen-prm", "qwen2.5-math-prm"],
    needs_lm_head: false,
    scores_each_step: true,
    writes_critique: false,
    detect: Some(detect),
    head_file_tensors: &[SCORE_0_WEIGHT],
    prepare,
    encode,
    head,
};

fn detect(c: &Clues<'_>) -> bool {
    c.architecture("ForProcessRewardModel") || (c.has_tensor)(SCORE_2_WEIGHT)
}

fn prepare(p: &mut Protocol, tokenizer: &Tokenizer) -> Result<()> {
    p.marker_id = Some(
        tokenizer
            .token_to_id(MARKER)
            .ok_or_else(|| p.missing("the `<extra_0>` token"))?,
    );
    p.chat.get_or_insert(ChatFormat::ChatMl);
    Ok(())
}

fn encode(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    forbid(steps, MARKER)?;
    let mut answer = String::new();
    let mut spans = Vec::with_capacity(steps.len());
    for s in steps {
        spans.push(answer.len()..answer.len() + s.len());
        answer.push_str(s);
        answer.push_str(MARKER);
    }
    let chat = p.chat.as_ref().unwrap_or(&ChatFormat::ChatMl);
    let messages = [
        Message {
            role: "system",
            content: SYSTEM,
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
    let text = chat.render(&messages, false)?;
    let answer_at = locate(&text, &answer)?;
    let spans: Vec<_> = spans
        .iter()
        .map(|r| answer_at + r.start..answer_at + r.end)
        .collect();
    let enc = tok.encode_with_offsets(&text, false)?;
    let markers = marker_positions(&enc.ids, p.marker_id.unwrap_or(u32::MAX), steps.len())?;
    let texts = steps.iter().map(|s| s.to_string()).collect();
    Ok(Encoded::of_prompt(enc, markers, &spans, texts))
}

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    if load.input.layers.len() > 1 {
        return Err(Error::model(
            "stepscore.layer",
            "a 2-class score head reads one layer; several are for value heads",
        ));
    }
    if !load.input.stats.is_empty() {
        return Err(Error::model(
            "stepscore.step_stats",
            "only value heads join the confidence statistics to the hidden state",
        ));
    }
    let (get, h) = (load.get, load.hidden());
    let b2 = require(get, SCORE_2_BIAS, &[2])?;
    Ok(Kind::Score {
        w0: Matrix::from_f32(h, h, require(get, SCORE_0_WEIGHT, &[h, h])?)?,
        b0: require(get, SCORE_0_BIAS, &[h])?,
        w2: Matrix::from_f32(2, h, require(get, SCORE_2_WEIGHT, &[2, h])?)?,
        b2: [b2[0], b2[1]],
    })
}
