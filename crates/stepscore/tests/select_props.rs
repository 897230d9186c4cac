//! Invariants of selection that hold for any candidates.

use proptest::prelude::*;
use stepscore::aggregate::Aggregation;
use stepscore::select::select;
use stepscore::{Step, Trace};

/// A candidate: an answer out of a small pool (so answers repeat, in several
/// spellings) or none, and steps that may be unscored or NaN.
fn candidate() -> impl Strategy<Value = Trace> {
    let answer = prop::option::weighted(
        0.8,
        prop::sample::select(vec![
            "1",
            "1.0",
            "\\frac{2}{2}",
            "2",
            "\\dfrac{4}{2}",
            "x",
            "X",
        ]),
    );
    let score = prop_oneof![
        6 => (0u32..=16).prop_map(|k| Some(k as f64 / 16.0)),
        1 => Just(None),
        1 => Just(Some(f64::NAN)),
    ];
    (answer, prop::collection::vec(score, 0..4)).prop_map(|(a, scores)| Trace {
        problem: "p".into(),
        final_answer: a.map(str::to_string),
        steps: scores
            .into_iter()
            .map(|score| Step {
                score,
                ..Step::new("s")
            })
            .collect(),
        ..Default::default()
    })
}

proptest! {
    #[test]
    fn choices_dominate(cands in prop::collection::vec(candidate(), 0..10), agg in 0usize..5) {
        let how = Aggregation::ALL[agg];
        let sel = select(&cands, how);
        prop_assert_eq!(sel.candidates.len(), cands.len());
        let finite: Vec<(usize, f64)> = sel
            .candidates
            .iter()
            .filter_map(|c| c.score.filter(|s| s.is_finite()).map(|s| (c.index, s)))
            .collect();
        match sel.best {
            Some(b) => {
                let top = finite.iter().map(|&(_, s)| s).fold(f64::NEG_INFINITY, f64::max);
                let first_top = finite.iter().find(|&&(_, s)| s == top).map(|&(i, _)| i);
                prop_assert_eq!(Some(b), first_top);
            }
            None => prop_assert!(finite.is_empty()),
        }

        // Rebuild the votes independently: answers are 1 (= 1.0 = 2/2), 2 (= 4/2),
        // x (= X, text compares case-insensitively).
        let class = |a: &str| match a {
            "1" | "1.0" | "\\frac{2}{2}" => "1",
            "2" | "\\dfrac{4}{2}" => "2",
            _ => "x",
        };
        let mut members: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
        for (i, t) in cands.iter().enumerate() {
            if let Some(a) = &t.final_answer {
                members.entry(class(a)).or_default().push(i);
            }
        }
        let voters: usize = members.values().map(Vec::len).sum();
        match &sel.majority {
            Some(m) => {
                prop_assert_eq!(&members[m.answer.as_str()], &m.members);
                prop_assert!(members.values().all(|v| v.len() <= m.count));
            }
            None => prop_assert_eq!(voters, 0),
        }
        if let Some(w) = &sel.weighted {
            let weight = |ids: &Vec<usize>| -> f64 {
                ids.iter().filter_map(|&i| sel.candidates[i].score.filter(|s| s.is_finite())).sum()
            };
            prop_assert_eq!(weight(&w.members), w.weight);
            prop_assert!(members.values().all(|v| weight(v) <= w.weight));
        }
    }
}
