//! Choosing among N candidate responses to one problem: best-of-N by PRM
//! score, majority vote over final answers, and PRM-weighted vote; and the
//! accuracy of each choice over many problems.
//!
//! Scores: a candidate's score is its steps' scores aggregated with
//! [`aggregate`]; it has none when any step is unscored or it has no steps
//! ([`select_with`] and [`Unscored::Prefix`] aggregate the scored prefix of
//! a truncated candidate instead, see [`crate::validate`]). Only usable
//! scores count: a candidate whose step scores are not all probabilities
//! (NaN, infinite, outside [0, 1]) never wins best-of-N and adds nothing to
//! a vote's weight, and neither does a missing score.
//!
//! Answers: [`Trace::answer`], normalized with [`normalize_answer`]; answers
//! that are equal under [`normalized_equal`] share one vote. Candidates
//! without an answer (or whose answer normalizes to nothing) don't vote.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::aggregate::{aggregate, Aggregation};
use crate::answer::{normalize_answer, normalized_equal};
use crate::trace::Trace;
use crate::validate::{scored_steps, Unscored};

/// One distinct answer and the candidates that gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    /// The normalized answer.
    pub answer: String,
    /// The raw form of the answer as its first member wrote it.
    pub display: String,
    /// How many candidates gave this answer.
    pub count: usize,
    /// The sum of the members' finite scores.
    pub weight: f64,
    /// The members' candidate indices, ascending.
    pub members: Vec<usize>,
}

/// What selection saw of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateSummary {
    pub index: usize,
    pub id: Option<String>,
    /// The normalized answer.
    pub answer: Option<String>,
    /// The answer as the trace states or contains it.
    pub raw_answer: Option<String>,
    /// The aggregate score (may be NaN when a step score is NaN).
    pub score: Option<f64>,
    /// Whether `score` takes part in selection: every step score used is a
    /// probability in [0, 1].
    #[serde(default)]
    pub usable: bool,
    /// Unscored last steps left out of `score` ([`Unscored::Prefix`]).
    #[serde(default)]
    pub unscored_steps: usize,
}

/// The outcome of [`select`] for one problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub aggregation: Aggregation,
    pub candidates: Vec<CandidateSummary>,
    /// Best-of-N: the index of the candidate with the highest finite score;
    /// ties go to the lowest index. `None` when no candidate has one.
    pub best: Option<usize>,
    /// The answer given by the most candidates. Ties go to the answer whose
    /// members have the larger total score ([`Vote::weight`]), then to the
    /// answer that appeared first. `None` when no candidate has an answer.
    pub majority: Option<Vote>,
    /// The answer with the largest total score; ties go to the answer that
    /// appeared first. `None` when no candidate with an answer has a finite
    /// score (the weights would all be an empty sum).
    pub weighted: Option<Vote>,
}

/// A candidate's score when it may take part in selection.
fn usable(c: &CandidateSummary) -> Option<f64> {
    c.score.filter(|s| c.usable && s.is_finite())
}

/// Scores, answers and the three choices for one problem's candidates; a
/// candidate with an unscored step has no score.
pub fn select(candidates: &[Trace], how: Aggregation) -> Selection {
    select_with(candidates, how, Unscored::Reject)
}

/// [`select`], with `unscored` deciding what a candidate whose last steps
/// are unscored (truncated) is worth: the aggregate of its scored prefix,
/// or no score.
pub fn select_with(candidates: &[Trace], how: Aggregation, unscored: Unscored) -> Selection {
    let summaries: Vec<CandidateSummary> = candidates
        .iter()
        .enumerate()
        .map(|(index, trace)| {
            let raw_answer = trace.answer();
            let answer = raw_answer
                .as_deref()
                .map(normalize_answer)
                .filter(|a| !a.is_empty());
            let (score, usable, unscored_steps) = match scored_steps(trace, unscored) {
                Ok(s) => (aggregate(&s.scores, how), true, s.unscored),
                // Not usable, but shown: the aggregate of a complete set of
                // scores, NaN or out of range ones included.
                Err(_) => (trace.scores().and_then(|s| aggregate(&s, how)), false, 0),
            };
            CandidateSummary {
                index,
                id: trace.id.clone(),
                answer,
                raw_answer,
                score,
                usable,
                unscored_steps,
            }
        })
        .collect();

    let mut best: Option<(usize, f64)> = None;
    for c in &summaries {
        if let Some(s) = usable(c) {
            // Strictly greater: an equal later score does not displace the earlier.
            if best.is_none_or(|(_, b)| s > b) {
                best = Some((c.index, s));
            }
        }
    }

    let votes = tally(&summaries);
    let mut majority: Option<&Vote> = None;
    for v in &votes {
        let wins = majority
            .is_none_or(|m| v.count > m.count || (v.count == m.count && v.weight > m.weight));
        if wins {
            majority = Some(v);
        }
    }
    let any_weight = summaries
        .iter()
        .any(|c| c.answer.is_some() && usable(c).is_some());
    let mut weighted: Option<&Vote> = None;
    if any_weight {
        for v in &votes {
            if weighted.is_none_or(|w| v.weight > w.weight) {
                weighted = Some(v);
            }
        }
    }

    Selection {
        aggregation: how,
        best: best.map(|(i, _)| i),
        majority: majority.cloned(),
        weighted: weighted.cloned(),
        candidates: summaries,
    }
}

/// Distinct answers in order of first appearance.
fn tally(summaries: &[CandidateSummary]) -> Vec<Vote> {
    let mut votes: Vec<Vote> = Vec::new();
    for c in summaries {
        let Some(answer) = &c.answer else { continue };
        let weight = usable(c).unwrap_or(0.0);
        match votes
            .iter_mut()
            .find(|v| normalized_equal(&v.answer, answer))
        {
            Some(v) => {
                v.count += 1;
                v.weight += weight;
                v.members.push(c.index);
            }
            None => votes.push(Vote {
                answer: answer.clone(),
                display: c.raw_answer.clone().unwrap_or_else(|| answer.clone()),
                count: 1,
                weight,
                members: vec![c.index],
            }),
        }
    }
    votes
}

/// Splits a flat list of candidates into problems, in order of first
/// appearance: by the metadata field `group` (a string or a number) when a
/// trace has one, else by its problem text. Traces keep their order.
pub fn group_candidates(traces: Vec<Trace>) -> Vec<(String, Vec<Trace>)> {
    let mut groups: Vec<(String, Vec<Trace>)> = Vec::new();
    // Keyed by (has a group field, key) so a group id never merges with a
    // problem whose text happens to read the same.
    let mut index: HashMap<(bool, String), usize> = HashMap::new();
    for trace in traces {
        let key = match trace.metadata.get("group") {
            Some(serde_json::Value::String(s)) => (true, s.clone()),
            Some(serde_json::Value::Number(n)) => (true, n.to_string()),
            _ => (false, trace.problem.clone()),
        };
        match index.get(&key) {
            Some(&i) => {
                if let Some(group) = groups.get_mut(i) {
                    group.1.push(trace);
                }
            }
            None => {
                index.insert(key.clone(), groups.len());
                groups.push((key.1, vec![trace]));
            }
        }
    }
    groups
}

/// How often each selection rule picks a correct answer over many problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BestOfNReport {
    /// Problems seen, with or without a reference answer.
    pub groups: usize,
    /// Problems with a reference answer: the denominator of every accuracy.
    pub with_reference: usize,
    pub best_of_n_correct: usize,
    pub majority_correct: usize,
    pub weighted_correct: usize,
    /// Problems where at least one candidate is right (the ceiling).
    pub oracle_correct: usize,
}

impl BestOfNReport {
    fn rate(&self, correct: usize) -> Option<f64> {
        (self.with_reference > 0).then(|| correct as f64 / self.with_reference as f64)
    }

    /// `None` when no problem has a reference answer.
    pub fn best_of_n_accuracy(&self) -> Option<f64> {
        self.rate(self.best_of_n_correct)
    }

    pub fn majority_accuracy(&self) -> Option<f64> {
        self.rate(self.majority_correct)
    }

    pub fn weighted_accuracy(&self) -> Option<f64> {
        self.rate(self.weighted_correct)
    }

    pub fn oracle_accuracy(&self) -> Option<f64> {
        self.rate(self.oracle_correct)
    }
}

/// Runs [`select`] on every problem and checks each choice against the
/// problem's reference answer (the first candidate's non-blank one). Problems
/// without a reference are counted in `groups` and otherwise skipped. A rule
/// that makes no choice (no scores, no answers) counts as wrong.
pub fn best_of_n_accuracy(groups: &[Vec<Trace>], how: Aggregation) -> BestOfNReport {
    best_of_n_accuracy_with(groups, how, Unscored::Reject)
}

/// [`best_of_n_accuracy`] with [`select_with`]'s policy for truncated candidates.
pub fn best_of_n_accuracy_with(
    groups: &[Vec<Trace>],
    how: Aggregation,
    unscored: Unscored,
) -> BestOfNReport {
    let mut report = BestOfNReport {
        groups: groups.len(),
        ..Default::default()
    };
    for group in groups {
        let reference = group
            .iter()
            .filter_map(|t| t.reference_answer.as_deref())
            .map(normalize_answer)
            .find(|r| !r.is_empty());
        let Some(reference) = reference else { continue };
        report.with_reference += 1;
        let right = |answer: Option<&str>| answer.is_some_and(|a| normalized_equal(a, &reference));
        let sel = select_with(group, how, unscored);
        let best_answer = sel
            .best
            .and_then(|i| sel.candidates.get(i))
            .and_then(|c| c.answer.as_deref());
        report.best_of_n_correct += usize::from(right(best_answer));
        report.majority_correct +=
            usize::from(right(sel.majority.as_ref().map(|v| v.answer.as_str())));
        report.weighted_correct +=
            usize::from(right(sel.weighted.as_ref().map(|v| v.answer.as_str())));
        report.oracle_correct +=
            usize::from(sel.candidates.iter().any(|c| right(c.answer.as_deref())));
    }
    report
}
