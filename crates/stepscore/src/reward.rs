//! RL rewards from step scores: placing step rewards on tokens, progress
//! (difference) rewards, the bounded Clip and Delta transforms, and
//! outcome-gated process advantages for group-based policy optimisation.
//!
//! Why bounded transforms: a policy trained on raw PRM step scores learns to
//! emit many cheap, high-scoring steps, since every extra step adds positive
//! reward. Gao et al. (2024, "On Designing Effective RL Reward at Training
//! Time for LLM Reasoning") make the return bounded whatever the number of
//! steps: Clip makes every step reward non-positive, Delta makes the sum
//! telescope to the first step's score.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::trace::Span;
use crate::{Error, Result};

/// Where a step's reward lands among the step's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum DenseMode {
    /// All of it on the step's last token, where the step is complete.
    #[default]
    LastToken,
    /// Split evenly over the step's tokens.
    Spread,
}

impl DenseMode {
    pub const ALL: [DenseMode; 2] = [DenseMode::LastToken, DenseMode::Spread];

    pub fn name(&self) -> &'static str {
        match self {
            DenseMode::LastToken => "last-token",
            DenseMode::Spread => "spread",
        }
    }
}

impl fmt::Display for DenseMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DenseMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "last-token" | "last" => Ok(DenseMode::LastToken),
            "spread" => Ok(DenseMode::Spread),
            _ => Err(Error::InvalidArgument(format!(
                "unknown dense reward mode `{s}` (expected last-token or spread)"
            ))),
        }
    }
}

/// Per-token rewards for a response of `n_tokens` tokens whose step `k`
/// covers tokens `[step_token_ends[k-1], step_token_ends[k])` (the first step
/// starts at token 0). Tokens after the last step get 0.
///
/// A step that covers no tokens (its end equals the previous end) has its
/// reward added to the token just before that end, the previous step's last
/// token: that is where the empty step "ends", and crediting a later token
/// would reward text written after the step. An empty first step (end 0)
/// has no such token and is an error. Either way the rewards' total equals
/// the step rewards' total (up to rounding).
///
/// Errors (`InvalidArgument`): lengths differ, a reward is not finite, ends
/// decrease, or an end exceeds `n_tokens`.
pub fn dense_token_rewards(
    step_rewards: &[f64],
    step_token_ends: &[usize],
    n_tokens: usize,
    mode: DenseMode,
) -> Result<Vec<f64>> {
    if step_rewards.len() != step_token_ends.len() {
        return Err(Error::InvalidArgument(format!(
            "dense_token_rewards: {} step rewards but {} step ends",
            step_rewards.len(),
            step_token_ends.len()
        )));
    }
    let mut start = 0usize;
    for (k, (&r, &end)) in step_rewards.iter().zip(step_token_ends).enumerate() {
        if !r.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "dense_token_rewards: step {k} reward is {r}"
            )));
        }
        if end < start {
            return Err(Error::InvalidArgument(format!(
                "dense_token_rewards: step {k} ends at token {end}, before step {}'s end {start}",
                k.saturating_sub(1)
            )));
        }
        if end > n_tokens {
            return Err(Error::InvalidArgument(format!(
                "dense_token_rewards: step {k} ends at token {end}, past the {n_tokens} tokens"
            )));
        }
        if end == 0 {
            return Err(Error::InvalidArgument(format!(
                "dense_token_rewards: step {k} covers no tokens and no token precedes it"
            )));
        }
        start = end;
    }

    // Validation above bounds every index below by n_tokens.
    let mut out = vec![0.0; n_tokens];
    let mut start = 0usize;
    for (&r, &end) in step_rewards.iter().zip(step_token_ends) {
        let len = end - start;
        match mode {
            DenseMode::Spread if len > 0 => {
                let share = r / len as f64;
                for t in &mut out[start..end] {
                    *t += share;
                }
            }
            // LastToken, and Spread over an empty step: the token before `end`.
            _ => out[end - 1] += r,
        }
        start = end;
    }
    Ok(out)
}

/// Per-token rewards on the *policy's* tokens of a response, from the byte
/// spans of its steps and the byte offsets of each policy token in the same
/// response text (any tokenizer: the caller passes its offsets, e.g. a
/// Hugging Face tokenizer's `offset_mapping` converted to bytes).
///
/// A token belongs to the step in which it starts, and a step is complete at
/// the last token that starts before the step's end: a token straddling a
/// step boundary carries the earlier step's reward, since that step is only
/// finished once the token is emitted. An empty token (`start == end`, such
/// as a special token reported as `(0, 0)`) sits where the previous token
/// ended, so a trailing end-of-sequence token gets no step reward. Tokens
/// after the last step get 0. The placement within a step is
/// [`dense_token_rewards`]'s, so the rewards' total equals the step rewards'
/// total (up to rounding), and a step with no token of its own is credited
/// to the previous step's last token.
///
/// Errors (`InvalidArgument`): lengths differ, a span ends past
/// `response_len` or before it starts, step ends decrease, a token's offsets
/// are reversed or past `response_len`, token starts decrease, the first
/// step starts no token, or a reward is not finite.
pub fn dense_rewards_at_offsets(
    step_rewards: &[f64],
    step_spans: &[Span],
    token_offsets: &[(usize, usize)],
    response_len: usize,
    mode: DenseMode,
) -> Result<Vec<f64>> {
    let bad = |m: String| Err(Error::InvalidArgument(format!("dense rewards: {m}")));
    if step_rewards.len() != step_spans.len() {
        return bad(format!(
            "{} step rewards but {} step spans",
            step_rewards.len(),
            step_spans.len()
        ));
    }
    let mut prev_end = 0usize;
    for (k, span) in step_spans.iter().enumerate() {
        if span.start > span.end || span.end > response_len {
            return bad(format!(
                "step {k} span {}..{} is not within the {response_len}-byte response",
                span.start, span.end
            ));
        }
        if span.end < prev_end {
            return bad(format!(
                "step {k} ends at byte {}, before the previous step's end {prev_end}",
                span.end
            ));
        }
        prev_end = span.end;
    }
    // Each token's position: its start, or for an empty token the previous
    // token's end.
    let mut positions = Vec::with_capacity(token_offsets.len());
    let mut last = (0usize, 0usize);
    for (t, &(start, end)) in token_offsets.iter().enumerate() {
        if start > end || end > response_len {
            return bad(format!(
                "token {t} offsets {start}..{end} are not within the {response_len}-byte response"
            ));
        }
        let pos = if start == end { last.1 } else { start };
        if pos < last.0 {
            return bad(format!(
                "token {t} starts at byte {pos}, before token {}'s start {}",
                t.saturating_sub(1),
                last.0
            ));
        }
        last = (pos, if start == end { last.1 } else { end });
        positions.push(pos);
    }
    // Positions are sorted: step k ends after the tokens starting before its end.
    let ends: Vec<usize> = step_spans
        .iter()
        .map(|s| positions.partition_point(|&p| p < s.end))
        .collect();
    dense_token_rewards(step_rewards, &ends, token_offsets.len(), mode)
}

/// Progress rewards `r_k = v_k - v_{k-1}` with `v_{-1} = baseline`: each step
/// is paid for how much it moved the value (e.g. the PRM's estimate of
/// success). The sum telescopes to `v_last - baseline`, so the return does
/// not grow with the number of steps.
pub fn progress_rewards(values: &[f64], baseline: f64) -> Vec<f64> {
    let mut prev = baseline;
    values
        .iter()
        .map(|&v| {
            let r = v - prev;
            prev = v;
            r
        })
        .collect()
}

/// Gao et al.'s Clip: `r'_k = min(r_k - eta, 0)`. Every reward is at most 0,
/// so extra steps can only lower the return; steps scoring at least `eta`
/// are neutral and worse ones are penalised by how far they fall short.
pub fn clip_rewards(r: &[f64], eta: f64) -> Vec<f64> {
    r.iter().map(|&x| (x - eta).min(0.0)).collect()
}

/// Gao et al.'s Delta: `r'_k = r_k - r_{k+1}` for `k < K-1`, the last reward
/// unchanged. The return from any step `k` onward telescopes to `r_k`, and
/// the whole return to `r_0`: repeating good steps earns nothing.
pub fn delta_rewards(r: &[f64]) -> Vec<f64> {
    r.iter()
        .enumerate()
        .map(|(k, &x)| match r.get(k + 1) {
            Some(&next) => x - next,
            None => x,
        })
        .collect()
}

/// The floor under a group's standard deviation when normalising.
pub(crate) const ADVANTAGE_STD_FLOOR: f64 = 1e-6;

/// Per-response advantages for one group of responses to a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupAdvantages {
    pub outcome: Vec<f64>,
    pub process: Vec<f64>,
    pub total: Vec<f64>,
}

/// Outcome-gated process advantages (PAPO, "Process-Aware Policy
/// Optimization", Tan et al. 2026), for a group of G responses:
///
/// - `outcome[i] = (o_i - mean(o)) / max(std(o), ADVANTAGE_STD_FLOOR)` with
///   `o_i` = 1 if response `i` is correct else 0, mean and *population*
///   standard deviation over the whole group; all 0 when every `o_i` is equal
///   (no outcome signal).
/// - `process[i]` = the same z-score of `process[i]`, but with mean and std
///   taken over the correct responses only; 0 for incorrect responses, and 0
///   for all when fewer than 2 responses are correct or their scores are all
///   equal. Normalising among correct responses only keeps the process term
///   from reordering correct against incorrect answers: it ranks reasoning
///   quality among responses that already earned the outcome reward.
/// - `total[i] = outcome[i] + lambda * process[i]`.
///
/// Process scores of incorrect responses are ignored (they may be NaN).
/// Errors: lengths differ, `lambda` not finite, or a correct response's
/// process score not finite. An empty group gives empty vectors.
pub fn papo_advantages(correct: &[bool], process: &[f64], lambda: f64) -> Result<GroupAdvantages> {
    if correct.len() != process.len() {
        return Err(Error::InvalidArgument(format!(
            "papo_advantages: {} outcomes but {} process scores",
            correct.len(),
            process.len()
        )));
    }
    if !lambda.is_finite() {
        return Err(Error::InvalidArgument(format!(
            "papo_advantages: lambda is {lambda}"
        )));
    }
    if let Some(i) = (0..correct.len()).find(|&i| correct[i] && !process[i].is_finite()) {
        return Err(Error::InvalidArgument(format!(
            "papo_advantages: response {i} is correct but its process score is {}",
            process[i]
        )));
    }

    let outcomes: Vec<f64> = correct.iter().map(|&c| f64::from(u8::from(c))).collect();
    let outcome = z_scores(&outcomes);

    let correct_scores: Vec<f64> = process
        .iter()
        .zip(correct)
        .filter(|(_, &c)| c)
        .map(|(&p, _)| p)
        .collect();
    let mut process_adv = vec![0.0; correct.len()];
    if correct_scores.len() >= 2 {
        let z = z_scores(&correct_scores);
        let slots = process_adv
            .iter_mut()
            .zip(correct)
            .filter(|(_, &c)| c)
            .map(|(a, _)| a);
        for (slot, zi) in slots.zip(z) {
            *slot = zi;
        }
    }

    let total = outcome
        .iter()
        .zip(&process_adv)
        .map(|(o, p)| o + lambda * p)
        .collect();
    Ok(GroupAdvantages {
        outcome,
        process: process_adv,
        total,
    })
}

/// `(x - mean) / max(population std, floor)`, or all zeros when every value
/// is equal (checked exactly: the computed std of equal values can be a tiny
/// rounding residue, which the floor would blow up into noise).
fn z_scores(xs: &[f64]) -> Vec<f64> {
    let first = xs.first().copied().unwrap_or(0.0);
    if xs.iter().all(|&x| x == first) {
        return vec![0.0; xs.len()];
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    let std = var.sqrt().max(ADVANTAGE_STD_FLOOR);
    xs.iter().map(|x| (x - mean) / std).collect()
}
