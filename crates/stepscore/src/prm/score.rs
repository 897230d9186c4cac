//! Scoring a trace: [`TraceScore`], and the [`Scorer`] methods that give one,
//! from the family's head over its prompt, or from the verdicts of a
//! generative verifier's critique, written here or given.

use serde::{Deserialize, Serialize};

use super::blocking::block_on;
use super::critique::{Critique, CritiqueOptions, Reading};
use super::head::{HeadOutput, StepConfidence};
use super::scorer::{Scorer, TokenLogprob};
use super::template::Encoded;
use crate::trace::Trace;
use crate::validate::Scored;
use crate::{Error, Result};

/// Per-step scores of one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceScore {
    /// One entry per step; `None` for steps dropped by truncation, and for
    /// every step but the last under a family that scores the whole solution
    /// (`outcome`).
    pub step_scores: Vec<Option<f64>>,
    /// Tokens the engine processed.
    pub tokens: usize,
    /// Steps dropped because the trace was over the token limit.
    pub truncated_steps: usize,
    /// An outcome reward model's logit for the whole solution (its last
    /// step's score is the sigmoid of it); `None` for the other families.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome_logit: Option<f64>,
    /// Confidence-family statistics per scored step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Vec<StepConfidence>>,
    /// Per scored step, each of its tokens' log-probability under the LM
    /// with the byte range of the step text it covers: from heads that read
    /// the LM's token statistics (confidence family, heads over step
    /// statistics such as the default PRM's), `None` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_logprobs: Option<Vec<Vec<TokenLogprob>>>,
    /// What a generative verifier wrote (its verdicts gave the scores);
    /// `None` for the other families.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub critique: Option<Critique>,
}

impl TraceScore {
    /// The scores that aggregates and first errors read, laid out by
    /// [`crate::validate::scored_steps`]'s rule: the steps scored before any
    /// truncation, or a whole solution's one score on its last step.
    pub fn scored(&self) -> Scored {
        let n = self.step_scores.len();
        let prefix = self.step_scores.iter().take_while(|s| s.is_some()).count();
        if let (0, Some(&Some(s))) = (prefix, self.step_scores.last()) {
            return Scored {
                scores: vec![s],
                first: n - 1,
                unscored: 0,
            };
        }
        Scored {
            scores: self.step_scores[..prefix]
                .iter()
                .flatten()
                .copied()
                .collect(),
            first: 0,
            unscored: n - prefix,
        }
    }
}

impl TraceScore {
    /// A head's output over `enc` for a trace of `n_steps` steps: the steps
    /// without an output (dropped by truncation, or after a critique's last
    /// verdict) are unscored.
    fn of_output(
        out: HeadOutput,
        enc: &Encoded,
        n_steps: usize,
        truncated_steps: usize,
        critique: Option<Critique>,
    ) -> TraceScore {
        let mut step_scores = out.scores;
        step_scores.resize(n_steps, None);
        let token_logprobs = out.token_logprobs.map(|steps| {
            steps
                .iter()
                .zip(&enc.step_spans)
                .map(|(lps, spans)| TokenLogprob::with_spans(lps, spans))
                .collect()
        });
        TraceScore {
            step_scores,
            tokens: enc.tokens.len(),
            truncated_steps,
            outcome_logit: out.outcome_logit,
            confidence: out.confidence,
            token_logprobs,
            critique,
        }
    }

    fn of_reading(r: Reading, n_steps: usize) -> TraceScore {
        let mut score = TraceScore::of_output(r.out, &r.enc, n_steps, 0, Some(r.critique));
        score.tokens += r.written_tokens;
        score
    }
}

impl Scorer {
    /// Scores every step of `trace`.
    pub fn score(&self, trace: &Trace) -> Result<TraceScore> {
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        self.score_steps(&trace.problem, &steps)
    }

    /// Scores `steps` as the response to `problem`.
    pub fn score_steps(&self, problem: &str, steps: &[&str]) -> Result<TraceScore> {
        self.blocking_allowed()?;
        block_on(self.score_steps_async(problem, steps))
    }

    /// [`Scorer::score`], awaited: the only way to score on WebGPU in a
    /// browser; on the CPU engine, or natively, it completes in one poll.
    pub async fn score_async(&self, trace: &Trace) -> Result<TraceScore> {
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        self.score_steps_async(&trace.problem, &steps).await
    }

    /// [`Scorer::score_steps`], awaited. A generative verifier writes its
    /// critique first, with the default [`CritiqueOptions`]
    /// ([`Scorer::critique`]).
    pub async fn score_steps_async(&self, problem: &str, steps: &[&str]) -> Result<TraceScore> {
        self.head()?;
        let family = self.family();
        if family.writes_critique() {
            return self
                .critique_async(problem, steps, &CritiqueOptions::default())
                .await;
        }
        let (enc, truncated_steps) = self.encode_fitted(problem, steps)?;
        if truncated_steps > 0 && !family.scores_each_step() {
            return Err(Error::InvalidArgument(format!(
                "the {family} family scores a whole solution, and this one is over the token limit \
                 of {}: dropping its last {truncated_steps} steps would score another solution \
                 (raise max_tokens)",
                self.max_tokens()
            )));
        }
        let out = self
            .run(&enc.tokens, None, Some(&enc))
            .await?
            .ok_or_else(|| Error::Internal("the head returned no output".into()))?;
        Ok(TraceScore::of_output(
            out,
            &enc,
            steps.len(),
            truncated_steps,
            None,
        ))
    }

    /// Has a generative verifier write a critique of `steps` and scores each
    /// step from its verdict: P(correct) over the `correct`/`incorrect`
    /// tokens where the verdict is written ([`super::family::generative`]).
    /// The steps after the critique's last verdict are unscored. Errors:
    /// another family; a prompt that fills the context; a critique with no
    /// readable verdict for step 1 (the error says why writing stopped).
    pub fn critique(
        &self,
        problem: &str,
        steps: &[&str],
        options: &CritiqueOptions,
    ) -> Result<TraceScore> {
        self.blocking_allowed()?;
        block_on(self.critique_async(problem, steps, options))
    }

    /// [`Scorer::critique`], awaited.
    pub async fn critique_async(
        &self,
        problem: &str,
        steps: &[&str],
        options: &CritiqueOptions,
    ) -> Result<TraceScore> {
        let reading = self.write_critique(problem, steps, options).await?;
        Ok(TraceScore::of_reading(reading, steps.len()))
    }

    /// Scores `steps` from a given `critique`: the text a generative verifier
    /// wrote after the family's prompt (on another server, or by a larger
    /// model), read as [`Scorer::critique`] reads its own.
    pub fn score_critique(
        &self,
        problem: &str,
        steps: &[&str],
        critique: &str,
    ) -> Result<TraceScore> {
        self.blocking_allowed()?;
        block_on(self.score_critique_async(problem, steps, critique))
    }

    /// [`Scorer::score_critique`], awaited.
    pub async fn score_critique_async(
        &self,
        problem: &str,
        steps: &[&str],
        critique: &str,
    ) -> Result<TraceScore> {
        let reading = self.read_critique(problem, steps, critique, None).await?;
        Ok(TraceScore::of_reading(reading, steps.len()))
    }
}
