//! Step-level AUROC and expected calibration error, against hand-worked
//! values and a brute-force pair count.

use proptest::prelude::*;
use stepscore::metrics::{
    auroc, calibration, step_auroc_from_traces, step_calibration_from_traces,
};
use stepscore::{Error, Step, Trace};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// Independent reference: count (positive, negative) pairs, ties as 1/2.
fn auroc_by_pairs(scores: &[f64], labels: &[bool]) -> Option<f64> {
    let pos: Vec<f64> = scores
        .iter()
        .zip(labels)
        .filter(|p| *p.1)
        .map(|p| *p.0)
        .collect();
    let neg: Vec<f64> = scores
        .iter()
        .zip(labels)
        .filter(|p| !*p.1)
        .map(|p| *p.0)
        .collect();
    if pos.is_empty() || neg.is_empty() {
        return None;
    }
    let mut wins = 0.0;
    for &p in &pos {
        for &n in &neg {
            wins += if p > n {
                1.0
            } else if p == n {
                0.5
            } else {
                0.0
            };
        }
    }
    Some(wins / (pos.len() * neg.len()) as f64)
}

#[test]
fn auroc_worked_example() {
    // Positives (correct steps) 0.9 0.7 0.4; negatives 0.5 0.7.
    // Pairs: 0.9>0.5 win, 0.9>0.7 win, 0.7>0.5 win, 0.7=0.7 half,
    // 0.4<0.5 loss, 0.4<0.7 loss -> 3.5 of 6 = 0.58333...
    // By ranks: 0.4 -> 1, 0.5 -> 2, the two 0.7s share 3.5, 0.9 -> 5;
    // positives' rank sum 1 + 3.5 + 5 = 9.5, U = 9.5 - 3*4/2 = 3.5.
    let scores = [0.9, 0.5, 0.7, 0.4, 0.7];
    let labels = [true, false, true, true, false];
    let a = auroc(&scores, &labels).unwrap().unwrap();
    assert!(close(a, 3.5 / 6.0), "{a}");
}

#[test]
fn auroc_extremes_and_ties() {
    // Perfect separation, perfect inversion, everything tied.
    assert_eq!(
        auroc(&[0.9, 0.8, 0.1], &[true, true, false]).unwrap(),
        Some(1.0)
    );
    assert_eq!(
        auroc(&[0.1, 0.8, 0.9], &[true, false, false]).unwrap(),
        Some(0.0)
    );
    assert_eq!(
        auroc(&[0.5; 4], &[true, false, true, false]).unwrap(),
        Some(0.5)
    );
    // -0.0 and 0.0 tie.
    assert_eq!(auroc(&[-0.0, 0.0], &[true, false]).unwrap(), Some(0.5));
    // Infinities rank like any score.
    assert_eq!(
        auroc(&[f64::INFINITY, f64::NEG_INFINITY], &[true, false]).unwrap(),
        Some(1.0)
    );
}

#[test]
fn auroc_undefined_and_invalid() {
    assert_eq!(auroc(&[], &[]).unwrap(), None);
    assert_eq!(auroc(&[0.1, 0.9], &[true, true]).unwrap(), None);
    assert_eq!(auroc(&[0.1], &[false]).unwrap(), None);
    let e = auroc(&[0.1, 0.2], &[true]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)));
    let e = auroc(&[0.1, f64::NAN], &[true, false])
        .unwrap_err()
        .to_string();
    assert!(e.contains("score 1 is NaN"), "{e}");
}

fn scored_trace(id: &str, steps: &[(Option<f64>, Option<bool>)]) -> Trace {
    Trace {
        id: Some(id.into()),
        problem: "p".into(),
        steps: steps
            .iter()
            .map(|&(score, label)| {
                let mut s = Step::new("s");
                s.score = score;
                s.label = label;
                s
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn step_auroc_from_traces_skips_incomplete_steps() {
    // Usable steps: (0.9, T) (0.2, F) from t1 and (0.6, T) (0.7, F) from t2;
    // the unlabelled and unscored steps are skipped.
    // Pairs: 0.9>0.2, 0.9>0.7, 0.6>0.2 win; 0.6<0.7 loss -> 3/4.
    let traces = vec![
        scored_trace(
            "t1",
            &[
                (Some(0.9), Some(true)),
                (Some(0.2), Some(false)),
                (Some(0.0), None),
            ],
        ),
        scored_trace(
            "t2",
            &[
                (Some(0.6), Some(true)),
                (None, Some(false)),
                (Some(0.7), Some(false)),
            ],
        ),
    ];
    assert_eq!(step_auroc_from_traces(&traces).unwrap(), Some(0.75));
    assert_eq!(step_auroc_from_traces(&[]).unwrap(), None);

    let bad = vec![scored_trace(
        "bad",
        &[(Some(0.5), Some(true)), (Some(f64::NAN), Some(false))],
    )];
    let e = step_auroc_from_traces(&bad).unwrap_err().to_string();
    assert!(e.contains("trace `bad`") && e.contains("step 1"), "{e}");
}

#[test]
fn ece_worked_example_six_points_three_bins() {
    // Bins [0, 1/3), [1/3, 2/3), [2/3, 1].
    //   bin 0: 0.1 F, 0.2 F -> confidence 0.15, accuracy 0   -> gap 0.15
    //   bin 1: 0.5 T, 0.6 F -> confidence 0.55, accuracy 0.5 -> gap 0.05
    //   bin 2: 0.9 T, 1.0 T -> confidence 0.95, accuracy 1   -> gap 0.05
    //     (1.0 falls in the closed last bin)
    // ECE = 2/6 * (0.15 + 0.05 + 0.05) = 0.25 / 3 = 0.08333...
    let probs = [0.1, 0.2, 0.5, 0.6, 0.9, 1.0];
    let labels = [false, false, true, false, true, true];
    let c = calibration(&probs, &labels, 3).unwrap().unwrap();
    assert!(close(c.ece, 0.25 / 3.0), "{}", c.ece);
    assert_eq!(c.bins.len(), 3);
    let expect = [
        (0.0, 1.0 / 3.0, 0.15, 0.0),
        (1.0 / 3.0, 2.0 / 3.0, 0.55, 0.5),
        (2.0 / 3.0, 1.0, 0.95, 1.0),
    ];
    for (bin, (lo, hi, conf, acc)) in c.bins.iter().zip(expect) {
        assert_eq!(bin.count, 2);
        assert!(close(bin.lo, lo) && close(bin.hi, hi));
        assert!(close(bin.mean_confidence, conf), "{bin:?}");
        assert!(close(bin.accuracy, acc), "{bin:?}");
    }
}

#[test]
fn ece_keeps_only_nonempty_bins_and_edges_go_up() {
    // 10 bins: 0.5 sits on an edge and belongs to [0.5, 0.6); 0.05 to [0, 0.1).
    // Bin [0, 0.1): confidence 0.05, accuracy 0 -> gap 0.05, weight 1/3.
    // Bin [0.5, 0.6): 0.5 T and 0.5 F -> confidence 0.5, accuracy 0.5 -> gap 0.
    // ECE = 0.05 / 3.
    let c = calibration(&[0.5, 0.05, 0.5], &[true, false, false], 10)
        .unwrap()
        .unwrap();
    assert_eq!(c.bins.len(), 2);
    assert!(close(c.bins[0].lo, 0.0) && close(c.bins[0].hi, 0.1));
    assert!(close(c.bins[1].lo, 0.5) && close(c.bins[1].hi, 0.6));
    assert_eq!(c.bins[1].count, 2);
    assert!(close(c.ece, 0.05 / 3.0));
    // One bin: ECE = |share of true - mean probability| = |2/4 - 0.4| = 0.1.
    let c = calibration(&[0.1, 0.3, 0.5, 0.7], &[true, true, false, false], 1)
        .unwrap()
        .unwrap();
    assert!(close(c.ece, 0.1));
}

#[test]
fn ece_undefined_and_invalid() {
    assert!(calibration(&[], &[], 10).unwrap().is_none());
    assert!(calibration(&[0.5], &[true], 0).is_err());
    assert!(calibration(&[0.5], &[true, false], 10).is_err());
    let e = calibration(&[0.5, 1.2], &[true, false], 10)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("probability 1") && e.contains("outside [0, 1]"),
        "{e}"
    );
    assert!(calibration(&[f64::NAN], &[true], 10).is_err());
    assert!(calibration(&[-0.1], &[true], 10).is_err());
    // A huge bin count allocates per sample, not per bin.
    let c = calibration(&[0.25, 0.75], &[false, true], usize::MAX / 2)
        .unwrap()
        .unwrap();
    assert_eq!(c.bins.len(), 2);
}

#[test]
fn step_calibration_from_traces_uses_labelled_steps() {
    // (0.8, T) and (0.4, F) in 2 bins: gaps |1 - 0.8| and |0 - 0.4|, ECE = 0.3.
    let traces = vec![scored_trace(
        "t",
        &[
            (Some(0.8), Some(true)),
            (Some(0.4), Some(false)),
            (Some(0.9), None),
        ],
    )];
    let c = step_calibration_from_traces(&traces, 2).unwrap().unwrap();
    assert!(close(c.ece, 0.3));
}

fn scores_and_labels() -> impl Strategy<Value = (Vec<f64>, Vec<bool>)> {
    // Scores on a grid of 21 values so ties are common.
    prop::collection::vec(
        ((0u8..=20).prop_map(|k| k as f64 / 20.0), any::<bool>()),
        0..40,
    )
    .prop_map(|v| v.into_iter().unzip())
}

proptest! {
    #[test]
    fn auroc_matches_pair_count((s, l) in scores_and_labels()) {
        let a = auroc(&s, &l).unwrap();
        let b = auroc_by_pairs(&s, &l);
        prop_assert_eq!(a.is_some(), b.is_some());
        if let (Some(a), Some(b)) = (a, b) {
            prop_assert!((a - b).abs() < 1e-12, "{} vs {}", a, b);
            prop_assert!((0.0..=1.0).contains(&a));
        }
    }

    #[test]
    fn auroc_of_negated_scores_is_complement((s, l) in scores_and_labels()) {
        let neg: Vec<f64> = s.iter().map(|x| -x).collect();
        if let (Some(a), Some(b)) = (auroc(&s, &l).unwrap(), auroc(&neg, &l).unwrap()) {
            prop_assert!((a + b - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn auroc_invariant_under_monotone_maps((s, l) in scores_and_labels()) {
        // exp and a logit-like map are strictly increasing on the grid.
        let e: Vec<f64> = s.iter().map(|x| (3.0 * x).exp()).collect();
        let g: Vec<f64> = s.iter().map(|x| (x + 0.01).ln() - (1.01 - x).ln()).collect();
        let a = auroc(&s, &l).unwrap();
        prop_assert_eq!(a, auroc(&e, &l).unwrap());
        prop_assert_eq!(a, auroc(&g, &l).unwrap());
    }

    #[test]
    fn ece_bounded_and_bins_consistent(
        (s, l) in scores_and_labels(),
        extra in prop::collection::vec(0.0f64..=1.0, 0..10),
        n_bins in 1usize..25,
    ) {
        let mut probs = s;
        let mut labels = l;
        labels.extend(extra.iter().map(|&p| p > 0.5));
        probs.extend(extra);
        match calibration(&probs, &labels, n_bins).unwrap() {
            None => prop_assert!(probs.is_empty()),
            Some(c) => {
                prop_assert!((0.0..=1.0).contains(&c.ece));
                prop_assert_eq!(c.bins.iter().map(|b| b.count).sum::<usize>(), probs.len());
                for b in &c.bins {
                    // Each bin's mean confidence lies inside its edges.
                    prop_assert!(b.mean_confidence >= b.lo - 1e-12 && b.mean_confidence <= b.hi + 1e-12);
                    prop_assert!((0.0..=1.0).contains(&b.accuracy));
                }
                // Bins are disjoint and ordered.
                for w in c.bins.windows(2) {
                    prop_assert!(w[0].hi <= w[1].lo + 1e-12);
                }
            }
        }
    }
}
