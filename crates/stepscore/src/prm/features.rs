//! Step features for training heads: the final-normed hidden state at the
//! position a family's head reads for each step, taken from the same
//! encode + forward path that scoring runs, so a head trained on them sees
//! at training time exactly what it sees at inference.

use serde::{Deserialize, Serialize};

use super::arithmetic::{operation_logprobs, DigitConfidence, OperatorRows};
use super::engine::block_on;
use super::head::{step_token_logprobs, StepConfidence};
use super::template::Encoded;
use crate::error::{Error, Result};
use crate::model::{Hidden, Taps, Transformer};

/// Which features [`Scorer::step_features_with`](super::Scorer::step_features_with) extracts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeatureOptions {
    /// The layer whose hidden state is read (`None`: the final one); see
    /// [`Transformer::forward_tapped`](crate::model::Transformer::forward_tapped)
    /// for what the hidden state of a layer is.
    pub layer: Option<usize>,
    /// Also the confidence statistics of each step's tokens.
    pub confidence: bool,
}

/// Features of one trace's scored steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFeatures {
    /// Hidden size: the length of every row of `hidden`.
    pub width: usize,
    /// One final-normed hidden state per scored step, read at the step's
    /// marker (the position the family's head reads). Steps dropped by
    /// truncation have no row.
    pub hidden: Vec<Vec<f32>>,
    /// Per scored step, the log-probability statistics of the step's own
    /// tokens under the model's LM head, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Vec<StepConfidence>>,
    /// With `confidence`, per scored step the statistics of its digit tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digit_confidence: Option<Vec<DigitConfidence>>,
    /// Tokens the engine processed.
    pub tokens: usize,
    /// Steps dropped because the trace was over the token limit.
    pub truncated_steps: usize,
}

/// The layer a forward pass must also return for `options` (`None`: the
/// final states suffice), after checking that the model can give what is asked.
pub(super) fn forward_layer(
    model: &Transformer,
    options: &FeatureOptions,
) -> Result<Option<usize>> {
    let n_layers = model.config().n_layers;
    if let Some(l) = options.layer.filter(|&l| l > n_layers) {
        return Err(Error::InvalidArgument(format!(
            "layer {l} does not exist: the model has {n_layers} layers (0 is the embeddings)"
        )));
    }
    if options.confidence && !model.has_lm_head() {
        return Err(Error::model(
            "lm_head.weight",
            "confidence features need the vocabulary projection, which this model does not carry",
        ));
    }
    Ok(options.layer.filter(|&l| l < n_layers))
}

/// The features of one forward pass over `enc` (from [`forward_layer`]'s layer).
pub(super) fn collect(
    model: &Transformer,
    operators: Option<&OperatorRows>,
    enc: &Encoded,
    hidden: &Taps<Hidden>,
    truncated_steps: usize,
    options: &FeatureOptions,
) -> Result<StepFeatures> {
    let states = hidden.head_input();
    let rows = enc
        .markers
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            states.row(p).map(<[f32]>::to_vec).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "the marker of step {i} (position {p}) is past the prompt"
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let (confidence, digit_confidence) = if options.confidence {
        // The confidence head's own statistics, over this family's
        // prompt layout (its step token ranges), on the CPU engine.
        let per_token = block_on(step_token_logprobs(model, &hidden.last, enc))?;
        let operations = match operators {
            Some(ops) => Some(block_on(operation_logprobs(model, &hidden.last, ops, enc))?),
            None => None,
        };
        let digits = per_token
            .iter()
            .zip(enc.step_texts.iter().zip(&enc.step_spans))
            .enumerate()
            .map(|(i, (lps, (text, spans)))| {
                let ops = operations
                    .as_ref()
                    .and_then(|o| o.get(i))
                    .map(Vec::as_slice);
                DigitConfidence::of(text, spans, lps, ops)
            })
            .collect();
        let stats = per_token.iter().map(|t| StepConfidence::of(t)).collect();
        (Some(stats), Some(digits))
    } else {
        (None, None)
    };
    Ok(StepFeatures {
        width: states.width,
        hidden: rows,
        confidence,
        digit_confidence,
        tokens: enc.tokens.len(),
        truncated_steps,
    })
}
