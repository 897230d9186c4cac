//! ProcessBench F1 and threshold calibration, against hand-worked values.

use proptest::prelude::*;
use stepscore::aggregate::first_error;
use stepscore::metrics::{
    calibrate_threshold, calibrate_threshold_from_traces, processbench_f1,
    processbench_from_traces, ProcessBenchSample,
};
use stepscore::{Error, Step, Trace};

fn sample(split: &str, label: i64, prediction: i64) -> ProcessBenchSample {
    ProcessBenchSample {
        split: split.into(),
        label,
        prediction,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// A trace with the given step scores, ProcessBench label and split.
fn trace(id: &str, scores: &[f64], label: i64, split: Option<&str>) -> Trace {
    let mut t = Trace {
        id: Some(id.into()),
        problem: "p".into(),
        steps: scores
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let mut step = Step::new(format!("step {i}"));
                step.score = Some(s);
                step
            })
            .collect(),
        ..Default::default()
    };
    t.set_first_error_label(label);
    if let Some(split) = split {
        t.metadata.insert("split".into(), split.into());
    }
    t
}

#[test]
fn f1_worked_example_two_splits() {
    let samples = vec![
        // gsm8k: 4 erroneous samples, 2 predicted exactly (labels 2 and 0);
        // one predicted too early (3 vs 1), one missed (1 vs -1).
        sample("gsm8k", 2, 2),
        sample("gsm8k", 0, 0),
        sample("gsm8k", 3, 1),
        sample("gsm8k", 1, -1),
        // 3 correct samples, 2 predicted correct, 1 flagged at step 4.
        sample("gsm8k", -1, -1),
        sample("gsm8k", -1, -1),
        sample("gsm8k", -1, 4),
        // math: 1 erroneous hit, 1 correct sample flagged.
        sample("math", 0, 0),
        sample("math", -1, 2),
    ];
    let r = processbench_f1(&samples, 0.5);
    assert_eq!(r.threshold, 0.5);
    assert_eq!(r.splits.len(), 2);

    // gsm8k: acc_err = 2/4 = 0.5, acc_cor = 2/3,
    // F1 = 2 * 0.5 * (2/3) / (0.5 + 2/3) = (2/3) / (7/6) = 4/7.
    let g = &r.splits[0];
    assert_eq!(g.split, "gsm8k");
    assert_eq!((g.n_erroneous, g.n_correct), (4, 3));
    assert!(close(g.acc_erroneous.unwrap(), 0.5));
    assert!(close(g.acc_correct.unwrap(), 2.0 / 3.0));
    assert!(close(g.f1.unwrap(), 4.0 / 7.0));

    // math: acc_err = 1, acc_cor = 0, F1 = 2*1*0/(1+0) = 0.
    let m = &r.splits[1];
    assert_eq!(m.split, "math");
    assert_eq!(m.acc_erroneous, Some(1.0));
    assert_eq!(m.acc_correct, Some(0.0));
    assert_eq!(m.f1, Some(0.0));

    // Pooled: 3 of 5 erroneous = 0.6, 2 of 4 correct = 0.5,
    // F1 = 2 * 0.6 * 0.5 / 1.1 = 0.6 / 1.1 = 6/11.
    assert_eq!(r.overall.split, "overall");
    assert_eq!((r.overall.n_erroneous, r.overall.n_correct), (5, 4));
    assert!(close(r.overall.f1.unwrap(), 6.0 / 11.0));

    // Mean over splits: (4/7 + 0) / 2 = 2/7.
    assert!(close(r.mean_f1.unwrap(), 2.0 / 7.0));
}

#[test]
fn both_accuracies_zero_give_zero_f1() {
    let r = processbench_f1(&[sample("a", 1, 0), sample("a", -1, 0)], 0.5);
    assert_eq!(r.overall.acc_erroneous, Some(0.0));
    assert_eq!(r.overall.acc_correct, Some(0.0));
    assert_eq!(r.overall.f1, Some(0.0));
}

#[test]
fn one_sided_split_has_no_f1_and_no_mean() {
    // Split "b" has only erroneous samples: acc_correct and F1 are undefined,
    // and so is the mean over splits, though the pooled F1 exists.
    let r = processbench_f1(
        &[sample("a", 1, 1), sample("a", -1, -1), sample("b", 2, 2)],
        0.5,
    );
    assert_eq!(r.splits[0].f1, Some(1.0));
    assert_eq!(r.splits[1].acc_correct, None);
    assert_eq!(r.splits[1].acc_erroneous, Some(1.0));
    assert_eq!(r.splits[1].f1, None);
    assert_eq!(r.mean_f1, None);
    assert_eq!(r.overall.f1, Some(1.0));
}

#[test]
fn empty_input() {
    let r = processbench_f1(&[], 0.5);
    assert!(r.splits.is_empty());
    assert_eq!(r.overall.n_erroneous + r.overall.n_correct, 0);
    assert_eq!(r.overall.f1, None);
    assert_eq!(r.mean_f1, None);
}

#[test]
fn negative_labels_all_mean_no_error() {
    // -2 is treated like -1 on both sides.
    let r = processbench_f1(
        &[sample("a", -2, -1), sample("a", -1, -7), sample("a", 0, 0)],
        0.5,
    );
    assert_eq!(r.overall.acc_correct, Some(1.0));
}

#[test]
fn report_serializes() {
    let r = processbench_f1(&[sample("a", 1, 1), sample("b", 0, 0)], 0.5);
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["splits"][0]["split"], "a");
    assert_eq!(v["splits"][0]["f1"], serde_json::Value::Null);
    assert_eq!(v["overall"]["acc_erroneous"], 1.0);
}

/// The dev set used by the trace and calibration tests.
fn dev_traces() -> Vec<Trace> {
    vec![
        trace("A", &[0.9, 0.3, 0.8], 1, Some("math")),
        trace("B", &[0.7, 0.6], -1, Some("math")),
        trace("C", &[0.4, 0.9], -1, None),
        trace("D", &[0.8, 0.7, 0.2], 2, None),
    ]
}

#[test]
fn from_traces_worked_example() {
    // At 0.5: A predicts 1 (= label, hit), B predicts -1 (hit), C predicts 0
    // (label -1, miss), D predicts 2 (= label, hit).
    // default split: C miss, D hit -> acc_err 1, acc_cor 0, F1 0.
    // math split: A hit, B hit -> F1 1.
    // overall: acc_err 2/2 = 1, acc_cor 1/2 -> F1 = 2 * 0.5 / 1.5 = 2/3.
    let r = processbench_from_traces(&dev_traces(), 0.5).unwrap();
    assert_eq!(r.splits[0].split, "default");
    assert_eq!(r.splits[0].f1, Some(0.0));
    assert_eq!(r.splits[1].split, "math");
    assert_eq!(r.splits[1].f1, Some(1.0));
    assert!(close(r.overall.f1.unwrap(), 2.0 / 3.0));
    assert!(close(r.mean_f1.unwrap(), 0.5));
}

#[test]
fn a_solution_score_predicts_its_last_step() {
    // Outcome reward models score the last step alone: flagged, the
    // prediction is that step; an error labelled earlier is never hit.
    let solution = |id: &str, score: f64, label: i64| {
        let mut t = trace(id, &[0.0, 0.0, score], label, None);
        t.steps[0].score = None;
        t.steps[1].score = None;
        t
    };
    let traces = [
        solution("last", 0.2, 2),   // flagged at its labelled step: hit
        solution("early", 0.2, 0),  // flagged, but the error is step 0: miss
        solution("right", 0.9, -1), // not flagged, correct: hit
        solution("wrong", 0.2, -1), // flagged, correct: miss
    ];
    let r = processbench_from_traces(&traces, 0.5).unwrap();
    assert!(close(r.overall.f1.unwrap(), 0.5), "{:?}", r.overall);
}

#[test]
fn from_traces_errors_name_the_trace() {
    let mut ts = dev_traces();
    ts[2].steps[1].score = None;
    let e = processbench_from_traces(&ts, 0.5).unwrap_err().to_string();
    assert!(e.contains("trace `C` (#2)") && e.contains("step 1"), "{e}");

    let mut ts = dev_traces();
    ts[1].id = None;
    for s in &mut ts[1].steps {
        s.label = None;
    }
    let e = processbench_from_traces(&ts, 0.5).unwrap_err().to_string();
    assert!(
        e.contains("trace #1") && e.contains("no step carries a label"),
        "{e}"
    );

    assert!(matches!(
        processbench_from_traces(&dev_traces(), f64::NAN),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn calibration_worked_example() {
    // Distinct scores 0.2 0.3 0.4 0.6 0.7 0.8 0.9, so the candidates are
    // 0.2 and the midpoints 0.25 0.35 0.5 0.65 0.75 0.85.
    // Thresholds at which each sample is predicted right:
    //   A (label 1, step 1 = 0.3 a new minimum below 0.9): (0.3, 0.9]
    //   B (correct, min 0.6): t <= 0.6;  C (correct, min 0.4): t <= 0.4
    //   D (label 2, 0.2 a new minimum below 0.7): (0.2, 0.7]
    // F1 per candidate: 0.2: err 0/2 -> 0; 0.25: err 1/2, cor 2/2 -> 2/3;
    // 0.35: err 2/2, cor 2/2 -> 1; 0.5: cor 1/2 -> 2/3; 0.65 and up: cor 0 -> 0.
    let t = calibrate_threshold_from_traces(&dev_traces()).unwrap();
    assert!(close(t, 0.35), "{t}");
    let r = processbench_from_traces(&dev_traces(), t).unwrap();
    assert_eq!(r.overall.f1, Some(1.0));
}

#[test]
fn calibration_ties_go_to_nearest_half() {
    // One correct sample [0.9] and one erroneous sample [0.1] (label 0): any
    // threshold in (0.1, 0.9] is perfect. Candidates 0.1 (F1 0) and 0.5 (F1 1).
    let t = calibrate_threshold(&[vec![0.9], vec![0.1]], &[-1, 0]).unwrap();
    assert!(close(t, 0.5), "{t}");
    // Erroneous [0.8, 0.6, 0.1, 0.4] (label 2): right for t in (0.1, 0.6].
    // Correct [0.9, 0.7]: right for t <= 0.7.
    // Distinct 0.1 0.4 0.6 0.7 0.8 0.9 -> candidates 0.1 0.25 0.5 0.65 0.75 0.85;
    // 0.25 and 0.5 are both perfect, and 0.5 is nearer 0.5.
    let t = calibrate_threshold(&[vec![0.8, 0.6, 0.1, 0.4], vec![0.9, 0.7]], &[2, -1]).unwrap();
    assert!(close(t, 0.5), "{t}");
    // Erroneous [0.5, 0.3, 0.0] (label 2): (0.0, 0.3]; correct [0.6]: t <= 0.6.
    // Distinct 0.0 0.3 0.5 0.6 -> candidates 0.0 0.15 0.4 0.55. Only 0.15 is
    // perfect (0.4 predicts step 1 for the erroneous one): the winner is 0.15
    // although 0.4 and 0.55 are nearer 0.5.
    let t = calibrate_threshold(&[vec![0.5, 0.3, 0.0], vec![0.6]], &[2, -1]).unwrap();
    assert!(close(t, 0.15), "{t}");
}

#[test]
fn calibration_errors() {
    assert!(calibrate_threshold(&[vec![0.5]], &[]).is_err());
    // Only correct samples: F1 is undefined for every threshold.
    assert!(calibrate_threshold(&[vec![0.5], vec![0.7]], &[-1, -1]).is_err());
    // No finite score.
    assert!(calibrate_threshold(&[vec![f64::NAN], vec![]], &[0, -1]).is_err());
}

/// Random dev sets: each sample is a score list (values on a coarse grid, so
/// ties happen) and a label within range or -1.
fn dev_set() -> impl Strategy<Value = Vec<(Vec<f64>, i64)>> {
    prop::collection::vec(
        prop::collection::vec((0u8..=10).prop_map(|k| k as f64 / 10.0), 1..6).prop_flat_map(|s| {
            let n = s.len() as i64;
            (Just(s), -1..n)
        }),
        2..12,
    )
}

proptest! {
    /// The calibrated threshold reaches the best pooled F1 that any threshold
    /// reaches, found by brute force over every distinct score and one value
    /// above them all.
    #[test]
    fn calibration_is_optimal(dev in dev_set()) {
        let scores: Vec<Vec<f64>> = dev.iter().map(|d| d.0.clone()).collect();
        let labels: Vec<i64> = dev.iter().map(|d| d.1).collect();
        let f1_at = |t: f64| {
            let samples: Vec<ProcessBenchSample> = dev
                .iter()
                .map(|(s, l)| sample("x", *l, first_error(s, t).map_or(-1, |i| i as i64)))
                .collect();
            processbench_f1(&samples, t).overall.f1
        };
        match calibrate_threshold(&scores, &labels) {
            Err(_) => {
                prop_assert!(labels.iter().all(|&l| l < 0) || labels.iter().all(|&l| l >= 0));
            }
            Ok(t) => {
                let mut grid: Vec<f64> = scores.iter().flatten().copied().collect();
                grid.push(2.0);
                let best = grid.iter().map(|&g| f1_at(g).unwrap()).fold(0.0, f64::max);
                prop_assert!((f1_at(t).unwrap() - best).abs() < 1e-12, "t={} best={}", t, best);
            }
        }
    }

    /// A PRM that scores every step before the first error high and the
    /// erroneous step low gets F1 1 at threshold 0.5, whatever follows.
    #[test]
    fn perfect_predictor_scores_one(
        cases in prop::collection::vec(
            (1usize..8).prop_flat_map(|n| (Just(n), -1..n as i64, prop::collection::vec(0.0f64..=1.0, n))),
            1..20,
        )
    ) {
        let traces: Vec<Trace> = cases
            .iter()
            .enumerate()
            .map(|(i, (n, label, tail))| {
                let scores: Vec<f64> = (0..*n as i64)
                    .map(|k| if label.is_negative() || k < *label {
                        0.9
                    } else if k == *label {
                        0.1
                    } else {
                        tail[k as usize]
                    })
                    .collect();
                trace(&format!("t{i}"), &scores, *label, None)
            })
            .collect();
        let r = processbench_from_traces(&traces, 0.5).unwrap();
        prop_assert_eq!(r.overall.acc_erroneous.unwrap_or(1.0), 1.0);
        prop_assert_eq!(r.overall.acc_correct.unwrap_or(1.0), 1.0);
        if let Some(f1) = r.overall.f1 {
            prop_assert_eq!(f1, 1.0);
        }
    }

    /// F1 lies between 0 and 1 and below both accuracies' maximum, above their minimum.
    #[test]
    fn f1_between_accuracies(
        pairs in prop::collection::vec((-1i64..4, -1i64..4), 0..30)
    ) {
        let samples: Vec<_> = pairs.iter().map(|&(l, p)| sample("s", l, p)).collect();
        let r = processbench_f1(&samples, 0.5);
        if let (Some(a), Some(b), Some(f)) = (r.overall.acc_erroneous, r.overall.acc_correct, r.overall.f1) {
            prop_assert!((0.0..=1.0).contains(&f));
            prop_assert!(f <= a.max(b) + 1e-12 && f >= a.min(b) - 1e-12);
        }
        prop_assert_eq!(r.overall.n_erroneous + r.overall.n_correct, samples.len());
    }
}
