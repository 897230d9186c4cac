//! Step features for training heads: the final-normed hidden state at the
//! position a family's head reads for each step, taken from the same
//! encode + forward path that scoring runs, so a head trained on them sees
//! at training time exactly what it sees at inference.

use serde::{Deserialize, Serialize};

use super::engine::{block_on, keep_shared, EngineCache};
use super::head::{step_token_logprobs, StepConfidence};
use super::template::Encoded;
use super::token_classes::{operation_logprobs, DigitConfidence, OperatorRows};
use crate::engine::{Hidden, Taps, Transformer};
use crate::{Error, Result};

/// Which features [`Scorer::step_features_with`](super::Scorer::step_features_with) extracts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureOptions {
    /// The layers whose hidden states are read, strictly ascending; a
    /// step's row is their states at its marker, concatenated in this
    /// order (empty: the final layer alone). See
    /// [`Transformer::forward_tapped`](crate::engine::Transformer::forward_tapped)
    /// for what the hidden state of a layer is.
    pub layers: Vec<usize>,
    /// Also the confidence statistics of each step's tokens.
    pub confidence: bool,
}

/// Features of one trace's scored steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFeatures {
    /// The length of every row of `hidden`: the hidden size times the
    /// number of layers read.
    pub width: usize,
    /// The index of the step of `hidden`'s first row (0 unless the
    /// extraction started later: [`Scorer::step_features_cached`](super::Scorer::step_features_cached)).
    #[serde(default)]
    pub first_step: usize,
    /// One row per scored step from `first_step` on: the final-normed
    /// hidden states of the layers read, at the step's marker (the
    /// position the family's head reads). Steps dropped by truncation have
    /// no row.
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

/// The layers a forward pass must tap for `options` (empty: the final
/// states suffice), after checking that the model can give what is asked.
pub(super) fn forward_taps(model: &Transformer, options: &FeatureOptions) -> Result<Vec<usize>> {
    let n_layers = model.config().n_layers;
    if let Some(&l) = options.layers.iter().find(|&&l| l > n_layers) {
        return Err(Error::InvalidArgument(format!(
            "layer {l} does not exist: the model has {n_layers} layers (0 is the embeddings)"
        )));
    }
    if options.layers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::InvalidArgument(format!(
            "feature layers {:?} must be strictly ascending",
            options.layers
        )));
    }
    if options.confidence && !model.has_lm_head() {
        return Err(Error::model(
            "lm_head.weight",
            "confidence features need the vocabulary projection, which this model does not carry",
        ));
    }
    // The final layer alone is the forward's own output.
    Ok(if options.layers == [n_layers] {
        Vec::new()
    } else {
        options.layers.clone()
    })
}

/// A KV cache kept between feature extractions of traces that share a
/// prefix (the alternatives PRM800K's labellers rated after one shared
/// solution prefix), with the tokens it holds.
#[derive(Debug, Clone)]
pub struct FeatureCache {
    pub(super) cache: EngineCache,
    pub(super) tokens: Vec<u32>,
}

impl FeatureCache {
    pub(super) fn new(cache: EngineCache) -> FeatureCache {
        FeatureCache {
            cache,
            tokens: Vec::new(),
        }
    }

    /// Tokens whose keys and values the cache holds.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Keeps the cache as far as it agrees with `tokens` and stays before
    /// `first_needed` (the first position whose output the features
    /// read); returns the positions kept, which need no forward.
    pub(super) fn reuse(&mut self, tokens: &[u32], first_needed: usize, valid: usize) -> usize {
        keep_shared(
            &mut self.cache,
            &mut self.tokens,
            tokens,
            first_needed,
            valid,
        )
    }
}

/// One trace of [`Scorer::step_features_batch`](super::Scorer::step_features_batch):
/// the features of `steps[from..]`, after what `cache` holds.
#[derive(Debug)]
pub struct FeatureJob<'a> {
    pub cache: &'a mut FeatureCache,
    pub problem: &'a str,
    pub steps: &'a [&'a str],
    pub from: usize,
}

/// The features of one forward pass over `enc` (tapped as [`forward_taps`] says), its rows
/// numbered from step `first_step`.
pub(super) fn collect(
    model: &Transformer,
    operators: Option<&OperatorRows>,
    enc: &Encoded,
    hidden: &Taps<Hidden>,
    first_step: usize,
    truncated_steps: usize,
    options: &FeatureOptions,
) -> Result<StepFeatures> {
    let states: Vec<&Hidden> = if hidden.layers.is_empty() {
        vec![&hidden.last]
    } else {
        hidden.layers.iter().collect()
    };
    let width = states.iter().map(|s| s.width).sum();
    let rows = enc
        .markers
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let mut row = Vec::with_capacity(width);
            for s in &states {
                row.extend_from_slice(s.row(p).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the marker of step {} (position {p}) is past the prompt",
                        first_step + i
                    ))
                })?);
            }
            Ok(row)
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
        width,
        first_step,
        hidden: rows,
        confidence,
        digit_confidence,
        tokens: enc.tokens.len(),
        truncated_steps,
    })
}
