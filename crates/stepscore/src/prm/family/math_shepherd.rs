//! Math-Shepherd: question + " " + the steps, each ending " ки", joined by
//! "\n"; softmax over the "+"/"-" logits at each `ки`, probability of "+".

use super::{plus_minus, reads_no_features, Clues, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::head::Kind;
use crate::prm::template::{forbid, marker_positions, Encoded};
use crate::Result;

/// Math-Shepherd's step tag.
const TAG: &str = "ки";

pub(super) const SPEC: Spec = Spec {
    names: &["math-shepherd", "shepherd"],
    needs_lm_head: true,
    scores_each_step: true,
    writes_critique: false,
    detect: Some(detect),
    head_file_tensors: &[],
    prepare,
    encode,
    head,
};

/// The tag is an ordinary Cyrillic token of many vocabularies (Gemma's,
/// Llama 3's), so it alone says nothing: Math-Shepherd's checkpoints are
/// Mistral-7B (`MistralForCausalLM`, which llama.cpp converts as a `llama`
/// GGUF with Mistral's 32k SentencePiece vocabulary, not Llama 3's).
fn detect(c: &Clues<'_>) -> bool {
    let tagged = (c.has_token)(TAG) || (c.has_token)("▁ки");
    let mistral = c.architecture("Mistral")
        || (c.architectures == ["llama"] && !(c.has_token)("<|begin_of_text|>"));
    tagged && mistral
}

fn prepare(p: &mut Protocol, tokenizer: &Tokenizer) -> Result<()> {
    // The reference takes `encode("ки")[-1]` and `encode("+ -")[1:]`.
    p.marker_id = Some(p.last_token(tokenizer, TAG)?);
    let ids = tokenizer.encode("+ -", true)?;
    match ids.as_slice() {
        [.., plus, minus] => p.plus_minus = Some((*plus, *minus)),
        _ => return Err(p.missing("tokens for \"+\" and \"-\"")),
    }
    Ok(())
}

fn encode(p: &Protocol, tok: &Tokenizer, problem: &str, steps: &[&str]) -> Result<Encoded> {
    forbid(steps, TAG)?;
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
        text.push_str(TAG);
    }
    let enc = tok.encode_with_offsets(&text, true)?;
    let markers = marker_positions(&enc.ids, p.marker_id.unwrap_or(u32::MAX), steps.len())?;
    let texts = steps.iter().map(|s| s.to_string()).collect();
    Ok(Encoded::of_prompt(enc, markers, &spans, texts))
}

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    reads_no_features(load)?;
    plus_minus(load)
}
