//! Best-of-N, majority and PRM-weighted selection over candidates.

use stepscore::aggregate::Aggregation;
use stepscore::select::{best_of_n_accuracy, group_candidates, select, BestOfNReport};
use stepscore::{Step, Trace};

/// A candidate stating `answer`, with one step per score.
fn cand(answer: Option<&str>, scores: &[Option<f64>]) -> Trace {
    Trace {
        problem: "p".into(),
        final_answer: answer.map(str::to_string),
        steps: scores
            .iter()
            .enumerate()
            .map(|(i, &score)| Step {
                score,
                ..Step::new(format!("step {i}"))
            })
            .collect(),
        ..Default::default()
    }
}

fn scored(answer: &str, scores: &[f64]) -> Trace {
    let s: Vec<Option<f64>> = scores.iter().map(|&x| Some(x)).collect();
    cand(Some(answer), &s)
}

/// Five candidates whose three rules disagree (dyadic scores keep sums exact).
///
/// | # | answer        | steps        | min   | prod   |
/// |---|---------------|--------------|-------|--------|
/// | 0 | 5             | 0.875, 0.5   | 0.5   | 0.4375 |
/// | 1 | \frac{10}{2}  | 0.25, 0.75   | 0.25  | 0.1875 |
/// | 2 | 7             | 0.75, 1.0    | 0.75  | 0.75   |
/// | 3 | 7.0           | 0.25         | 0.25  | 0.25   |
/// | 4 | 5             | 0.125, 0.5   | 0.125 | 0.0625 |
///
/// `5` has 3 votes (0, 1, 4: 10/2 = 5) and `7` has 2 (2, 3: 7.0 = 7).
fn disagreeing() -> Vec<Trace> {
    vec![
        scored("5", &[0.875, 0.5]),
        scored("\\frac{10}{2}", &[0.25, 0.75]),
        scored("7", &[0.75, 1.0]),
        scored("7.0", &[0.25]),
        scored("5", &[0.125, 0.5]),
    ]
}

#[test]
fn rules_disagree_min() {
    let sel = select(&disagreeing(), Aggregation::Min);
    let scores: Vec<Option<f64>> = sel.candidates.iter().map(|c| c.score).collect();
    assert_eq!(
        scores,
        vec![Some(0.5), Some(0.25), Some(0.75), Some(0.25), Some(0.125)]
    );
    let answers: Vec<Option<&str>> = sel.candidates.iter().map(|c| c.answer.as_deref()).collect();
    assert_eq!(
        answers,
        vec![Some("5"), Some("5"), Some("7"), Some("7"), Some("5")]
    );
    assert_eq!(
        sel.candidates[1].raw_answer.as_deref(),
        Some("\\frac{10}{2}")
    );

    // Best-of-N: candidate 2 has the highest min, 0.75.
    assert_eq!(sel.best, Some(2));

    // Majority: `5`, 3 votes to 2; weight 0.5 + 0.25 + 0.125 = 0.875.
    let m = sel.majority.expect("majority");
    assert_eq!(m.answer, "5");
    assert_eq!(m.display, "5");
    assert_eq!(m.count, 3);
    assert_eq!(m.members, vec![0, 1, 4]);
    assert_eq!(m.weight, 0.875);

    // Weighted: `7` has 0.75 + 0.25 = 1.0 > 0.875.
    let w = sel.weighted.expect("weighted");
    assert_eq!(w.answer, "7");
    assert_eq!(w.display, "7");
    assert_eq!(w.count, 2);
    assert_eq!(w.members, vec![2, 3]);
    assert_eq!(w.weight, 1.0);
}

#[test]
fn rules_disagree_prod() {
    let sel = select(&disagreeing(), Aggregation::Prod);
    assert_eq!(sel.aggregation, Aggregation::Prod);
    // 0.875 * 0.5 = 0.4375, 0.25 * 0.75 = 0.1875, 0.75 * 1 = 0.75, 0.25, 0.125 * 0.5 = 0.0625.
    assert_eq!(sel.candidates[0].score, Some(0.4375));
    assert_eq!(sel.best, Some(2));
    // `5`: 0.4375 + 0.1875 + 0.0625 = 0.6875; `7`: 0.75 + 0.25 = 1.0.
    assert_eq!(
        sel.majority.as_ref().map(|v| (v.answer.as_str(), v.weight)),
        Some(("5", 0.6875))
    );
    assert_eq!(
        sel.weighted.as_ref().map(|v| (v.answer.as_str(), v.weight)),
        Some(("7", 1.0))
    );
}

#[test]
fn rules_disagree_last_changes_best() {
    // Last step only: 0.5, 0.75, 1.0, 0.25, 0.5 -> candidate 2 still, and now
    // candidates 0 and 4 tie at 0.5 without mattering.
    let sel = select(&disagreeing(), Aggregation::Last);
    assert_eq!(sel.best, Some(2));
    // `5`: 0.5 + 0.75 + 0.5 = 1.75 beats `7`: 1.0 + 0.25 = 1.25.
    assert_eq!(sel.weighted.map(|v| v.answer), Some("5".to_string()));
}

#[test]
fn display_is_first_raw_form() {
    let sel = select(
        &[scored("\\dfrac{1}{2}", &[0.5]), scored("0.5", &[0.5])],
        Aggregation::Min,
    );
    let m = sel.majority.expect("majority");
    assert_eq!(m.answer, "0.5");
    assert_eq!(m.display, "\\dfrac{1}{2}");
    assert_eq!(m.count, 2);
}

#[test]
fn best_ties_go_to_lowest_index() {
    let sel = select(
        &[
            scored("1", &[0.25]),
            scored("2", &[0.5]),
            scored("3", &[0.5]),
        ],
        Aggregation::Min,
    );
    assert_eq!(sel.best, Some(1));
}

#[test]
fn majority_count_tie_goes_to_heavier_answer() {
    // One vote each; `2` weighs 0.75 against `1`'s 0.25.
    let sel = select(
        &[scored("1", &[0.25]), scored("2", &[0.75])],
        Aggregation::Min,
    );
    assert_eq!(sel.majority.map(|v| v.answer), Some("2".to_string()));
}

#[test]
fn majority_full_tie_goes_to_first_appearance() {
    // `b` appears first (candidate 0); both have 2 votes and weight 0.75.
    let sel = select(
        &[
            scored("b", &[0.5]),
            scored("a", &[0.5]),
            scored("a", &[0.25]),
            scored("b", &[0.25]),
        ],
        Aggregation::Min,
    );
    let m = sel.majority.expect("majority");
    assert_eq!((m.answer.as_str(), m.count, m.weight), ("b", 2, 0.75));
    // The weighted vote ties as well, and also goes to `b`.
    assert_eq!(sel.weighted.map(|v| v.answer), Some("b".to_string()));
}

#[test]
fn weighted_tie_goes_to_first_appearance() {
    // `x`: 0.5 from one vote; `y`: 0.25 + 0.25 = 0.5 from two.
    let sel = select(
        &[
            scored("x", &[0.5]),
            scored("y", &[0.25]),
            scored("y", &[0.25]),
        ],
        Aggregation::Min,
    );
    assert_eq!(sel.weighted.map(|v| v.answer), Some("x".to_string()));
    assert_eq!(sel.majority.map(|v| v.answer), Some("y".to_string()));
}

#[test]
fn missing_scores() {
    // Candidate 0 lacks a score on its second step, so it has no aggregate;
    // the one-step candidate 2 (0.25) is the only scored one.
    let cands = vec![
        cand(Some("1"), &[Some(0.99), None]),
        cand(Some("1"), &[None]),
        cand(Some("2"), &[Some(0.25)]),
    ];
    let sel = select(&cands, Aggregation::Min);
    assert_eq!(sel.candidates[0].score, None);
    assert_eq!(sel.best, Some(2));
    // `1` has 2 votes but weighs 0; `2` has 1 vote weighing 0.25.
    let m = sel.majority.expect("majority");
    assert_eq!((m.answer.as_str(), m.count, m.weight), ("1", 2, 0.0));
    assert_eq!(sel.weighted.map(|v| v.answer), Some("2".to_string()));
}

#[test]
fn no_scores_at_all() {
    let cands = vec![
        cand(Some("1"), &[None]),
        cand(Some("2"), &[]),
        cand(Some("2"), &[None]),
    ];
    let sel = select(&cands, Aggregation::Mean);
    // No steps means no aggregate either.
    assert_eq!(sel.candidates[1].score, None);
    assert_eq!(sel.best, None);
    assert_eq!(sel.weighted, None);
    assert_eq!(
        sel.majority.map(|v| (v.answer, v.count)),
        Some(("2".to_string(), 2))
    );
}

#[test]
fn missing_answers_do_not_vote() {
    let no_answer = Trace {
        problem: "p".into(),
        steps: vec![Step {
            score: Some(0.9),
            ..Step::new("I am not sure.")
        }],
        ..Default::default()
    };
    let sel = select(&[no_answer.clone(), scored("4", &[0.25])], Aggregation::Min);
    assert_eq!(sel.candidates[0].answer, None);
    // It can still be the best-scored candidate; it just has no answer.
    assert_eq!(sel.best, Some(0));
    let m = sel.majority.expect("majority");
    assert_eq!((m.answer.as_str(), m.members.clone()), ("4", vec![1]));
    assert_eq!(sel.weighted.map(|v| v.members), Some(vec![1]));

    // Only unanswered candidates: no votes at all.
    let sel = select(&[no_answer.clone(), no_answer], Aggregation::Min);
    assert_eq!(sel.majority, None);
    assert_eq!(sel.weighted, None);

    // A scored answer that normalizes to nothing ("$ $") doesn't vote either.
    let sel = select(&[scored("$ $", &[0.5])], Aggregation::Min);
    assert_eq!(sel.candidates[0].raw_answer.as_deref(), Some("$ $"));
    assert_eq!(sel.candidates[0].answer, None);
    assert_eq!(sel.majority, None);
    assert_eq!(sel.weighted, None);
}

#[test]
fn answers_come_from_response_text() {
    let t = Trace {
        problem: "p".into(),
        response: Some("We find $x = \\boxed{\\frac{6}{4}}$.".into()),
        steps: vec![Step {
            score: Some(0.5),
            ..Step::new("We find ...")
        }],
        ..Default::default()
    };
    let sel = select(&[t], Aggregation::Min);
    assert_eq!(
        sel.candidates[0].raw_answer.as_deref(),
        Some("\\frac{6}{4}")
    );
    assert_eq!(sel.candidates[0].answer.as_deref(), Some("1.5"));
}

#[test]
fn nan_and_infinite_scores_never_win() {
    let cands = vec![
        cand(Some("1"), &[Some(0.9), Some(f64::NAN)]),
        cand(Some("2"), &[Some(f64::INFINITY)]),
        cand(Some("3"), &[Some(0.125)]),
        cand(Some("1"), &[Some(0.0625)]),
    ];
    let sel = select(&cands, Aggregation::Min);
    assert!(sel.candidates[0].score.is_some_and(f64::is_nan));
    assert_eq!(sel.best, Some(2));
    // `1`'s weight is 0.0625 (the NaN adds nothing), `2`'s is 0, `3`'s 0.125.
    let m = sel.majority.expect("majority");
    assert_eq!((m.answer.as_str(), m.count, m.weight), ("1", 2, 0.0625));
    let w = sel.weighted.expect("weighted");
    assert_eq!((w.answer.as_str(), w.weight), ("3", 0.125));
    // Only NaN: no best, no weighted vote.
    let sel = select(&[cand(Some("1"), &[Some(f64::NAN)])], Aggregation::Min);
    assert_eq!(sel.best, None);
    assert_eq!(sel.weighted, None);
}

#[test]
fn empty_input() {
    let sel = select(&[], Aggregation::Min);
    assert!(sel.candidates.is_empty());
    assert_eq!((sel.best, sel.majority, sel.weighted), (None, None, None));
}

#[test]
fn selection_serializes() {
    let sel = select(
        &[scored("5", &[0.5]), cand(Some("6"), &[Some(f64::NAN)])],
        Aggregation::GeoMean,
    );
    let v = serde_json::to_value(&sel).expect("serializes");
    assert_eq!(v["aggregation"], "geo_mean");
    assert_eq!(v["best"], 0);
    assert_eq!(v["majority"]["answer"], "5");
    assert_eq!(v["candidates"][0]["score"], 0.5);
    // serde_json writes NaN as null.
    assert!(v["candidates"][1]["score"].is_null());
}

fn in_group(mut t: Trace, problem: &str, group: Option<serde_json::Value>) -> Trace {
    t.problem = problem.into();
    if let Some(g) = group {
        t.metadata.insert("group".into(), g);
    }
    t
}

#[test]
fn grouping_by_group_field_then_problem() {
    use serde_json::json;
    let t = |id: &str| Trace {
        id: Some(id.into()),
        ..Default::default()
    };
    let traces = vec![
        in_group(t("a"), "q1", None),
        in_group(t("b"), "q2", Some(json!("g"))),
        in_group(t("c"), "q1", None),
        in_group(t("d"), "other text", Some(json!("g"))),
        in_group(t("e"), "q3", Some(json!(7))),
        // A group id that reads like q1's problem text is still its own group.
        in_group(t("f"), "zzz", Some(json!("q1"))),
        in_group(t("g"), "q4", Some(json!(7))),
        // A group field of another type falls back to the problem text.
        in_group(t("h"), "q1", Some(json!(true))),
    ];
    let groups = group_candidates(traces);
    let shape: Vec<(String, Vec<String>)> = groups
        .into_iter()
        .map(|(k, ts)| (k, ts.into_iter().filter_map(|t| t.id).collect()))
        .collect();
    let s = |k: &str, ids: &[&str]| {
        (
            k.to_string(),
            ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        shape,
        vec![
            s("q1", &["a", "c", "h"]),
            s("g", &["b", "d"]),
            s("7", &["e", "g"]),
            s("q1", &["f"]),
        ]
    );
}

fn with_reference(mut group: Vec<Trace>, reference: Option<&str>) -> Vec<Trace> {
    if let Some(r) = group.first_mut() {
        r.reference_answer = reference.map(str::to_string);
    }
    group
}

#[test]
fn accuracy_over_problems() {
    let groups = vec![
        // Reference 5: best-of-N picks 7 (wrong), majority 5 (right),
        // weighted 7 (wrong); candidate 0 is right, so the oracle is.
        with_reference(disagreeing(), Some("5")),
        // Reference 0.5, one candidate answering \frac12: every rule right.
        with_reference(vec![scored("\\frac12", &[0.9])], Some("0.5")),
        // No reference: counted in `groups`, skipped otherwise.
        with_reference(vec![scored("3", &[0.9])], None),
        // Reference 9, unscored candidates 1 and 2: no best-of-N or weighted
        // choice (wrong), majority picks 1 (tie, first) (wrong), oracle wrong.
        with_reference(
            vec![cand(Some("1"), &[None]), cand(Some("2"), &[None])],
            Some("9"),
        ),
        // A blank reference is no reference.
        with_reference(vec![scored("3", &[0.9])], Some(" ")),
    ];
    let r = best_of_n_accuracy(&groups, Aggregation::Min);
    assert_eq!(
        r,
        BestOfNReport {
            groups: 5,
            with_reference: 3,
            best_of_n_correct: 1,
            majority_correct: 2,
            weighted_correct: 1,
            oracle_correct: 2,
        }
    );
    assert_eq!(r.best_of_n_accuracy(), Some(1.0 / 3.0));
    assert_eq!(r.majority_accuracy(), Some(2.0 / 3.0));
    assert_eq!(r.weighted_accuracy(), Some(1.0 / 3.0));
    assert_eq!(r.oracle_accuracy(), Some(2.0 / 3.0));

    // With `last`, the first problem's weighted vote flips to 5 (1.75 vs 1.25).
    let r = best_of_n_accuracy(&groups, Aggregation::Last);
    assert_eq!(r.weighted_correct, 2);
}

#[test]
fn reference_from_any_candidate() {
    // Only the second candidate carries the reference; it still counts.
    let mut group = vec![scored("4", &[0.5]), scored("4", &[0.25])];
    group[1].reference_answer = Some("$4$".into());
    let r = best_of_n_accuracy(&[group], Aggregation::Min);
    assert_eq!(
        (r.with_reference, r.best_of_n_correct, r.oracle_correct),
        (1, 1, 1)
    );
}

#[test]
fn empty_report_has_no_accuracy() {
    let r = best_of_n_accuracy(&[], Aggregation::Min);
    assert_eq!(r, BestOfNReport::default());
    assert_eq!(r.best_of_n_accuracy(), None);
    assert_eq!(r.oracle_accuracy(), None);
    let r = best_of_n_accuracy(&[vec![]], Aggregation::Min);
    assert_eq!((r.groups, r.with_reference), (1, 0));
    assert_eq!(r.majority_accuracy(), None);
}
