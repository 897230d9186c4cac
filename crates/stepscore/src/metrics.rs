//! How good are the step scores? ProcessBench F1 (does the PRM find the
//! first wrong step?), step-level AUROC (does it rank good steps above bad
//! ones?) and expected calibration error (are its probabilities honest?).
//!
//! Conventions, chosen once here:
//! - ProcessBench: a label or prediction is the index of the first wrong step,
//!   and any negative value means "no wrong step" (the data uses -1).
//! - A metric that is undefined on the given data (a class is absent, the
//!   set is empty) is `None`; data that cannot be scored at all (lengths
//!   differ, NaN scores, probabilities outside [0, 1]) is an `Err` naming the
//!   offending index, trace or step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::aggregate::first_error_label;
use crate::trace::Trace;
use crate::{Error, Result};

/// One ProcessBench sample after scoring: its split (dataset), the index of
/// its first wrong step (`-1`: none) and the PRM's predicted index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessBenchSample {
    pub split: String,
    pub label: i64,
    pub prediction: i64,
}

/// ProcessBench accuracy and F1 over one group of samples.
///
/// `acc_erroneous` is the share of samples with a wrong step whose predicted
/// index equals the label exactly; `acc_correct` the share of all-correct
/// samples predicted as all-correct. Each is `None` when its group is empty,
/// and then `f1` is `None` too: the harmonic mean needs both. When both
/// accuracies are 0 the F1 is 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitF1 {
    pub split: String,
    pub n_erroneous: usize,
    pub n_correct: usize,
    pub acc_erroneous: Option<f64>,
    pub acc_correct: Option<f64>,
    pub f1: Option<f64>,
}

/// ProcessBench results at one threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessBenchReport {
    pub threshold: f64,
    /// One entry per split, sorted by name.
    pub splits: Vec<SplitF1>,
    /// All samples pooled into one group (named `overall`).
    pub overall: SplitF1,
    /// The unweighted mean of the splits' F1, like the "Avg." column of the
    /// ProcessBench paper; `None` when there are no splits or any split's F1
    /// is undefined (averaging only some splits would silently change its
    /// meaning).
    pub mean_f1: Option<f64>,
}

/// The split name used for traces without a `split` metadata string.
pub(crate) const DEFAULT_SPLIT: &str = "default";

/// Tally of one group of samples, before the ratios.
#[derive(Default)]
struct Tally {
    n_erroneous: usize,
    hit_erroneous: usize,
    n_correct: usize,
    hit_correct: usize,
}

impl Tally {
    fn add(&mut self, label: i64, prediction: i64) {
        if label < 0 {
            self.n_correct += 1;
            if prediction < 0 {
                self.hit_correct += 1;
            }
        } else {
            self.n_erroneous += 1;
            if prediction == label {
                self.hit_erroneous += 1;
            }
        }
    }

    fn finish(&self, split: &str) -> SplitF1 {
        let acc_erroneous = ratio(self.hit_erroneous, self.n_erroneous);
        let acc_correct = ratio(self.hit_correct, self.n_correct);
        SplitF1 {
            split: split.to_string(),
            n_erroneous: self.n_erroneous,
            n_correct: self.n_correct,
            acc_erroneous,
            acc_correct,
            f1: harmonic_mean(acc_erroneous, acc_correct),
        }
    }
}

fn ratio(hits: usize, n: usize) -> Option<f64> {
    (n > 0).then(|| hits as f64 / n as f64)
}

fn harmonic_mean(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    Some(if a + b == 0.0 {
        0.0
    } else {
        2.0 * a * b / (a + b)
    })
}

/// ProcessBench accuracies and F1 per split, pooled, and averaged over splits.
/// `threshold` is only recorded: the predictions are already made.
pub fn processbench_f1(samples: &[ProcessBenchSample], threshold: f64) -> ProcessBenchReport {
    let mut by_split: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut overall = Tally::default();
    for s in samples {
        by_split
            .entry(s.split.as_str())
            .or_default()
            .add(s.label, s.prediction);
        overall.add(s.label, s.prediction);
    }
    let splits: Vec<SplitF1> = by_split.iter().map(|(name, t)| t.finish(name)).collect();
    let mean_f1 = if splits.is_empty() {
        None
    } else {
        splits
            .iter()
            .map(|s| s.f1)
            .sum::<Option<f64>>()
            .map(|sum| sum / splits.len() as f64)
    };
    ProcessBenchReport {
        threshold,
        splits,
        overall: overall.finish("overall"),
        mean_f1,
    }
}

/// How error messages name a trace: its id when it has one, else its index.
fn trace_name(trace: &Trace, index: usize) -> String {
    match &trace.id {
        Some(id) => format!("trace `{id}` (#{index})"),
        None => format!("trace #{index}"),
    }
}

/// A trace's step scores and ProcessBench label, or an error naming what is
/// missing or out of range ([`crate::validate`]: every step scored, each
/// score in [0, 1], a label).
///
/// For a solution scored on its last step alone (the `outcome` family) the
/// scores are that one score and the label is counted from that step: an
/// error labelled before it can never be the predicted one (it stays an
/// erroneous trace, labelled [`UNREACHABLE`]).
fn scores_and_label(trace: &Trace, index: usize) -> Result<(Vec<f64>, i64)> {
    let named = |p: crate::validate::FieldError| {
        Error::InvalidArgument(format!("{}: {p}", trace_name(trace, index)))
    };
    let label = crate::validate::first_error_label(trace).map_err(named)?;
    let scored =
        crate::validate::scored_steps(trace, crate::validate::Unscored::Reject).map_err(named)?;
    let first = scored.first as i64;
    let label = match label {
        l if l < 0 => l,
        l if l < first => UNREACHABLE,
        l => l - first,
    };
    Ok((scored.scores, label))
}

/// The relative label of an error before a trace's first scored step.
const UNREACHABLE: i64 = i64::MAX;

/// ProcessBench F1 of scored, labelled traces. The split is the `split`
/// metadata string, else [`DEFAULT_SPLIT`]; the label comes from the step
/// labels ([`Trace::first_error_label`]); the prediction is the first step
/// scoring below `threshold` (NaN scores fail). Errors name the first trace
/// without labels or with an unscored step, or a NaN threshold.
pub fn processbench_from_traces(traces: &[Trace], threshold: f64) -> Result<ProcessBenchReport> {
    if threshold.is_nan() {
        return Err(Error::InvalidArgument(
            "ProcessBench threshold is NaN".into(),
        ));
    }
    let mut samples = Vec::with_capacity(traces.len());
    for (i, trace) in traces.iter().enumerate() {
        let (scores, label) = scores_and_label(trace, i)?;
        samples.push(ProcessBenchSample {
            split: trace.meta_str("split").unwrap_or(DEFAULT_SPLIT).to_string(),
            label,
            prediction: first_error_label(&scores, threshold),
        });
    }
    Ok(processbench_f1(&samples, threshold))
}

/// The threshold maximising pooled ProcessBench F1 on a dev set of
/// (step scores, label) pairs, for "0.5 unless calibrated".
///
/// Candidates are the smallest finite score (nothing but NaN fails) and the
/// midpoints between consecutive distinct finite scores: every threshold
/// yields the same predictions as one of these, and a midpoint leaves a
/// margin on both sides for unseen data. (A threshold above every score
/// fails every sample at step 0, so its F1 is 0 and it never wins.) Ties go
/// to the candidate closest to 0.5, then the smaller one.
///
/// Errors: lengths differ, no erroneous or no correct sample (F1 undefined),
/// or no finite score at all.
pub fn calibrate_threshold<S: AsRef<[f64]>>(scores: &[S], labels: &[i64]) -> Result<f64> {
    if scores.len() != labels.len() {
        return Err(Error::InvalidArgument(format!(
            "calibrate_threshold: {} score lists but {} labels",
            scores.len(),
            labels.len()
        )));
    }
    let n_correct = labels.iter().filter(|&&l| l < 0).count();
    let n_erroneous = labels.len() - n_correct;
    if n_correct == 0 || n_erroneous == 0 {
        return Err(Error::InvalidArgument(format!(
            "calibrate_threshold: F1 needs both kinds of sample; dev set has {n_erroneous} \
             erroneous and {n_correct} correct"
        )));
    }

    let mut distinct: Vec<f64> = scores
        .iter()
        .flat_map(|s| s.as_ref().iter().copied())
        .filter(|s| s.is_finite())
        .collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup_by(|a, b| a == b);
    let Some(&lowest) = distinct.first() else {
        return Err(Error::InvalidArgument(
            "calibrate_threshold: no finite step score".into(),
        ));
    };
    let mut candidates = Vec::with_capacity(distinct.len());
    candidates.push(lowest);
    candidates.extend(distinct.windows(2).map(|w| w[0] / 2.0 + w[1] / 2.0));

    // Each sample is predicted right for one interval (lo, hi] of thresholds;
    // sweep those intervals over the sorted candidates with difference arrays.
    let mut d_err = vec![0i64; candidates.len() + 1];
    let mut d_cor = vec![0i64; candidates.len() + 1];
    for (s, &label) in scores.iter().zip(labels) {
        if let Some((lo, hi)) = right_interval(s.as_ref(), label) {
            let start = candidates.partition_point(|&c| c <= lo);
            let end = candidates.partition_point(|&c| c <= hi);
            if start < end {
                let d = if label < 0 { &mut d_cor } else { &mut d_err };
                d[start] += 1;
                d[end] -= 1;
            }
        }
    }

    let (mut hit_err, mut hit_cor) = (0i64, 0i64);
    let mut best: Option<(f64, f64)> = None; // (f1, threshold)
    for (j, &t) in candidates.iter().enumerate() {
        hit_err += d_err[j];
        hit_cor += d_cor[j];
        let f1 = harmonic_mean(
            ratio(hit_err.max(0) as usize, n_erroneous),
            ratio(hit_cor.max(0) as usize, n_correct),
        )
        .unwrap_or(0.0);
        let better = match best {
            None => true,
            Some((bf, bt)) => f1 > bf || (f1 == bf && (t - 0.5).abs() < (bt - 0.5).abs()),
        };
        if better {
            best = Some((f1, t));
        }
    }
    // `candidates` is non-empty, so `best` was set.
    Ok(best.map_or(lowest, |(_, t)| t))
}

/// The thresholds `t` in `(lo, hi]` for which predicting "first step with
/// score < t" gets this sample right, or `None` when no threshold does.
///
/// The prediction only changes at the running minima of the scores: it is
/// the earliest step whose score is a new strict minimum below `t`. So an
/// erroneous sample is right exactly when its labelled step sets a new
/// minimum and `t` lies above that minimum but not above the previous one;
/// a correct sample is right when `t` does not exceed the lowest score.
fn right_interval(scores: &[f64], label: i64) -> Option<(f64, f64)> {
    let mut prev_min = f64::INFINITY;
    for (i, &s) in scores.iter().enumerate() {
        // NaN always fails, like a score of minus infinity.
        let s = if s.is_nan() { f64::NEG_INFINITY } else { s };
        if label >= 0 && i as i64 == label {
            return (s < prev_min).then_some((s, prev_min));
        }
        prev_min = prev_min.min(s);
    }
    // All-correct label: right while nothing fails. An erroneous label past
    // the last step can never be predicted.
    (label < 0).then_some((f64::NEG_INFINITY, prev_min))
}

/// [`calibrate_threshold`] on scored, labelled traces (pooled over splits).
pub fn calibrate_threshold_from_traces(traces: &[Trace]) -> Result<f64> {
    let mut scores = Vec::with_capacity(traces.len());
    let mut labels = Vec::with_capacity(traces.len());
    for (i, trace) in traces.iter().enumerate() {
        let (s, l) = scores_and_label(trace, i)?;
        scores.push(s);
        labels.push(l);
    }
    calibrate_threshold(&scores, &labels)
}

/// Area under the ROC curve of `scores` for telling correct steps (`true`,
/// the positive class) from wrong ones: the probability that a random
/// correct step outscores a random wrong one, ties counting one half
/// (Mann-Whitney U from average ranks).
///
/// `Ok(None)` when either class is absent (including empty input); `Err`
/// when the lengths differ or a score is NaN. Infinite scores rank normally.
pub fn auroc(scores: &[f64], labels: &[bool]) -> Result<Option<f64>> {
    check_lengths("auroc", scores.len(), labels.len())?;
    if let Some(i) = scores.iter().position(|s| s.is_nan()) {
        return Err(Error::InvalidArgument(format!("auroc: score {i} is NaN")));
    }
    let n_pos = labels.iter().filter(|&&l| l).count();
    let n_neg = labels.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return Ok(None);
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    // Sum of the positives' 1-based ranks, tied runs sharing their mean rank.
    let mut rank_sum_pos = 0.0;
    let mut start = 0;
    while start < order.len() {
        let value = scores[order[start]];
        // `==` (not total_cmp) so that -0.0 and 0.0 tie; they sort adjacent.
        let len = order[start..]
            .iter()
            .take_while(|&&k| scores[k] == value)
            .count();
        let mean_rank = start as f64 + (len as f64 + 1.0) / 2.0;
        let pos_in_run = order[start..start + len]
            .iter()
            .filter(|&&k| labels[k])
            .count();
        rank_sum_pos += mean_rank * pos_in_run as f64;
        start += len;
    }
    let (p, n) = (n_pos as f64, n_neg as f64);
    let u = rank_sum_pos - p * (p + 1.0) / 2.0;
    Ok(Some(u / (p * n)))
}

fn check_lengths(what: &str, n_scores: usize, n_labels: usize) -> Result<()> {
    if n_scores != n_labels {
        return Err(Error::InvalidArgument(format!(
            "{what}: {n_scores} scores but {n_labels} labels"
        )));
    }
    Ok(())
}

/// The scores and labels of every step that has both, across traces.
/// A score that is not a probability (NaN, outside [0, 1]) is an error
/// naming the trace and step.
fn labelled_step_scores(traces: &[Trace]) -> Result<(Vec<f64>, Vec<bool>)> {
    let mut scores = Vec::new();
    let mut labels = Vec::new();
    for (i, trace) in traces.iter().enumerate() {
        for (k, step) in trace.steps.iter().enumerate() {
            if let (Some(score), Some(label)) = (step.score, step.label) {
                if let Some(problem) = crate::validate::score_problem(score) {
                    return Err(Error::InvalidArgument(format!(
                        "{}: step {k}: {problem}",
                        trace_name(trace, i)
                    )));
                }
                scores.push(score);
                labels.push(label);
            }
        }
    }
    Ok((scores, labels))
}

/// Step-level [`auroc`] over every step (of every trace) that carries both a
/// label and a score; steps lacking either are skipped.
pub fn step_auroc_from_traces(traces: &[Trace]) -> Result<Option<f64>> {
    let (scores, labels) = labelled_step_scores(traces)?;
    auroc(&scores, &labels)
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReliabilityBin {
    /// The bin covers [lo, hi) (the last bin [lo, 1]).
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
    /// Mean predicted probability of the bin's samples.
    pub mean_confidence: f64,
    /// Share of the bin's samples whose label is `true`.
    pub accuracy: f64,
}

/// Expected calibration error and the reliability diagram behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub ece: f64,
    /// Only the non-empty bins, in order; each names its own edges.
    pub bins: Vec<ReliabilityBin>,
}

/// Expected calibration error of probabilities that a step is correct:
/// `n_bins` equal-width bins on [0, 1] (each [lo, hi), the last one closed),
/// ECE = sum over bins of count/N * |accuracy - mean confidence|.
///
/// `Ok(None)` for empty input. `Err` when lengths differ, `n_bins` is 0, or a
/// probability is NaN or outside [0, 1]: those are rejected, not clamped,
/// since they mean the scores are not probabilities (logits, say) and any
/// ECE of them would be meaningless.
pub fn calibration(probs: &[f64], labels: &[bool], n_bins: usize) -> Result<Option<Calibration>> {
    check_lengths("calibration", probs.len(), labels.len())?;
    if n_bins == 0 {
        return Err(Error::InvalidArgument(
            "calibration: n_bins must be at least 1".into(),
        ));
    }
    if let Some(i) = probs.iter().position(|p| !(0.0..=1.0).contains(p)) {
        return Err(Error::InvalidArgument(format!(
            "calibration: probability {i} is {}, outside [0, 1]",
            probs[i]
        )));
    }
    if probs.is_empty() {
        return Ok(None);
    }
    // bin index -> (count, sum of probabilities, number of true labels);
    // a map so memory follows the data, not `n_bins`.
    let mut acc: BTreeMap<usize, (usize, f64, usize)> = BTreeMap::new();
    let nb = n_bins as f64;
    for (&p, &l) in probs.iter().zip(labels) {
        let b = bin_index(p, n_bins);
        let e = acc.entry(b).or_insert((0, 0.0, 0));
        e.0 += 1;
        e.1 += p;
        e.2 += usize::from(l);
    }
    let total = probs.len() as f64;
    let mut ece = 0.0;
    let bins = acc
        .into_iter()
        .map(|(b, (count, sum_p, n_true))| {
            let c = count as f64;
            let bin = ReliabilityBin {
                lo: b as f64 / nb,
                hi: (b + 1) as f64 / nb,
                count,
                mean_confidence: sum_p / c,
                accuracy: n_true as f64 / c,
            };
            ece += c / total * (bin.accuracy - bin.mean_confidence).abs();
            bin
        })
        .collect();
    Ok(Some(Calibration { ece, bins }))
}

/// The bin of `p` in [0, 1]: `floor(p * n_bins)`, corrected by one where the
/// product rounded across an edge, and 1.0 kept in the last bin.
fn bin_index(p: f64, n_bins: usize) -> usize {
    let nb = n_bins as f64;
    let mut b = ((p * nb) as usize).min(n_bins - 1);
    if b > 0 && p < b as f64 / nb {
        b -= 1;
    } else if b + 1 < n_bins && p >= (b + 1) as f64 / nb {
        b += 1;
    }
    b
}

/// Step-level [`calibration`] over every step with both a label and a score.
pub fn step_calibration_from_traces(
    traces: &[Trace],
    n_bins: usize,
) -> Result<Option<Calibration>> {
    let (scores, labels) = labelled_step_scores(traces)?;
    calibration(&scores, &labels, n_bins)
}
