//! Training-free: any causal LM's own confidence in each step's tokens
//! (mean/min log-probability and entropy) over a plain prompt, problem and
//! steps each followed by a blank line; the step score is the geometric-mean
//! token probability, exp(mean log-prob). A checkpoint no other family
//! claims is scored this way.

use super::{reads_no_features, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::head::Kind;
use crate::prm::template::{clamped, Encoded};
use crate::{Error, Result};

pub(super) const SPEC: Spec = Spec {
    names: &["confidence"],
    needs_lm_head: true,
    scores_each_step: true,
    writes_critique: false,
    detect: None,
    head_file_tensors: &[],
    prepare: |_, _| Ok(()),
    encode,
    head,
};

/// Separator between the problem and steps, and after every step.
const SEPARATOR: &str = "\n\n";

fn encode(_: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    let mut tokens = tok.encode(&format!("{problem}{SEPARATOR}"), true)?;
    let sep = tok.encode(SEPARATOR, false)?;
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

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    reads_no_features(load)?;
    Ok(Kind::Confidence)
}
