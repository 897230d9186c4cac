//! Step features for training heads: the final-normed hidden state at the
//! position a family's head reads for each step, taken from the same
//! encode + forward path that scoring runs, so a head trained on them sees
//! at training time exactly what it sees at inference.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::backend::block_on;
use super::head::{is_digit_token, step_token_logprobs, DigitConfidence, StepConfidence};
use super::scorer::{Forward, HeadMode, Scorer, ScorerOptions};
use crate::error::{Error, Result};

/// Which features [`Scorer::step_features_with`] extracts.
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

impl Scorer {
    /// Opens a model as a backbone for feature extraction: the family gives
    /// the prompt layout and marker positions, but its head tensors are not
    /// read (a checkpoint without `v_head.*` or `score.*` loads), and the
    /// vocabulary projection is kept when present so confidence statistics
    /// can be computed. Such a scorer cannot score.
    pub fn open_backbone(path: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer> {
        Scorer::open_with(path.as_ref(), options, HeadMode::Skip)
    }

    /// The hidden state at each step's marker.
    pub fn step_features(&self, problem: &str, steps: &[&str]) -> Result<StepFeatures> {
        self.step_features_with(problem, steps, &FeatureOptions::default())
    }

    /// [`Scorer::step_features`] plus the confidence statistics of each
    /// step's tokens; the model must have its vocabulary projection.
    pub fn step_features_with_confidence(
        &self,
        problem: &str,
        steps: &[&str],
    ) -> Result<StepFeatures> {
        let options = FeatureOptions {
            confidence: true,
            ..FeatureOptions::default()
        };
        self.step_features_with(problem, steps, &options)
    }

    /// The features `options` asks for: the hidden state of a chosen layer
    /// at each step's marker, with or without the confidence statistics.
    pub fn step_features_with(
        &self,
        problem: &str,
        steps: &[&str],
        options: &FeatureOptions,
    ) -> Result<StepFeatures> {
        let n_layers = self.model().config().n_layers;
        if let Some(l) = options.layer.filter(|&l| l > n_layers) {
            return Err(Error::InvalidArgument(format!(
                "layer {l} does not exist: the model has {n_layers} layers (0 is the embeddings)"
            )));
        }
        let confidence = options.confidence;
        if confidence && !self.model().has_lm_head() {
            return Err(Error::model(
                "lm_head.weight",
                "confidence features need the vocabulary projection, which this model does not carry",
            ));
        }
        let Forward {
            enc,
            hidden,
            truncated_steps,
        } = self.forward_steps(problem, steps, options.layer.filter(|&l| l < n_layers))?;
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
        let (confidence, digit_confidence) = if confidence {
            // The confidence head's own statistics, over this family's
            // prompt layout (its step token ranges), on the CPU engine.
            let per_token = block_on(step_token_logprobs(self.model(), &hidden.last, &enc))?;
            let digits = per_token
                .iter()
                .zip(&enc.step_tokens)
                .map(|(lps, range)| {
                    DigitConfidence::of(&enc.tokens[range.clone()], lps, |id| {
                        is_digit_token(self.tokenizer(), id)
                    })
                })
                .collect::<Result<Vec<_>>>()?;
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
}
