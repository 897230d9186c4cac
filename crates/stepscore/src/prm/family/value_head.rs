//! Skywork-o1-Open-PRM's layout, and every head stepscore trains: bos +
//! problem + "\n", then each step + "\n"; `v_head.summary` (linear or MLP)
//! -> sigmoid at each step's "\n", over the hidden state of one or more
//! layers, joined with the step's token statistics when the head file
//! names them, and capped by a guard head when it names one.

use super::{Clues, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::head::{
    guard_head, value_head, Kind, StepStat, V_HEAD_MLP_0_WEIGHT, V_HEAD_WEIGHT,
};
use crate::prm::template::{clamped, Encoded};
use crate::prm::token_classes::OperatorRows;
use crate::{Error, Result};

pub(super) const SPEC: Spec = Spec {
    names: &["value-head", "skywork"],
    needs_lm_head: false,
    scores_each_step: true,
    writes_critique: false,
    detect: Some(detect),
    head_file_tensors: &[V_HEAD_WEIGHT, V_HEAD_MLP_0_WEIGHT],
    prepare,
    encode,
    head,
};

fn detect(c: &Clues<'_>) -> bool {
    (c.has_tensor)(V_HEAD_WEIGHT)
        || (c.has_tensor)(V_HEAD_MLP_0_WEIGHT)
        || c.architecture("PrmModel")
}

fn prepare(p: &mut Protocol, _: &Tokenizer) -> Result<()> {
    if p.bos_text.is_none() {
        return Err(p.missing("a BOS token (bos_token in tokenizer_config.json)"));
    }
    Ok(())
}

fn encode(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
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

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    let input = load.input;
    if input.stats_only && input.stats.is_empty() {
        return Err(Error::model(
            "stepscore.stats_only",
            "a head over the step statistics alone must name them in `stepscore.step_stats`",
        ));
    }
    let reads = if input.stats_only {
        0
    } else {
        load.hidden() * input.layers.len().max(1)
    };
    let mut v = value_head(load.get, reads + input.stats.len(), &input.stats)?;
    v.stats_only = input.stats_only;
    v.guard = match &input.min_with {
        Some(m) => Some(guard_head(m, load.guard)?),
        None => None,
    };
    let all: Vec<StepStat> = v.read_stats().collect();
    v.reads_digits = all.iter().any(|s| s.reads_digit_confidence());
    let operators = if all.iter().any(|s| s.reads_operations()) {
        Some(OperatorRows::load(load.model, load.tokenizer)?)
    } else {
        None
    };
    Ok(Kind::Value(v, operators))
}
