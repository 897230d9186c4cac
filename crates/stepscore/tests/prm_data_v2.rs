//! The v2 PRM data (data/prm_v2_*.jsonl.gz, made by scripts/data/gen_prm_data.py)
//! reads through stepscore's own reader with the counts, error kinds, labels
//! and generator split data/README.md states, and each row's `response`
//! segments back into its `steps`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::path::PathBuf;

use flate2::read::GzDecoder;
use stepscore::io::{InputFormat, ReadOptions, TraceReader};
use stepscore::segment::Segmenter;
use stepscore::Trace;

const ERROR_TYPES: [&str; 8] = [
    "arithmetic_slip",
    "wrong_operand",
    "wrong_operation",
    "dropped_step",
    "percent_unit",
    "sign_error",
    "off_by_one",
    "wrong_formula",
];

/// The 15 gsm_symbolic test generators of the v1 files (data/README.md).
const GSM_TEST: [u32; 15] = [8, 14, 17, 24, 33, 34, 39, 40, 50, 55, 57, 58, 72, 73, 75];

fn read(name: &str) -> Vec<Trace> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(name);
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let opts = ReadOptions {
        format: InputFormat::ProcessBench,
        source_name: name.to_string(),
        ..Default::default()
    };
    TraceReader::new(BufReader::new(GzDecoder::new(file)), opts)
        .map(|t| t.unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

fn meta<'a>(t: &'a Trace, key: &str) -> &'a str {
    t.meta_str(key)
        .unwrap_or_else(|| panic!("{}: no `{key}`", t.id.as_deref().unwrap_or("?")))
}

/// The segmenter a row's layout is written for.
fn segmenter(layout: &str) -> Segmenter {
    match layout {
        "paragraphs" => Segmenter::BlankLine,
        "lines" => Segmenter::Newline,
        "step_k" | "bold_step" | "numbered" | "heading" => Segmenter::StepMarker,
        other => panic!("unknown layout {other}"),
    }
}

/// Checks every row; returns (generators, error-type counts).
fn check(traces: &[Trace], split: &str) -> (BTreeSet<String>, BTreeMap<String, usize>) {
    let mut generators = BTreeSet::new();
    let mut kinds = BTreeMap::new();
    for t in traces {
        let id = t.id.as_deref().unwrap_or("?");
        assert_eq!(meta(t, "split"), split, "{id}");
        generators.insert(meta(t, "generator").to_string());
        assert!(!meta(t, "source").is_empty(), "{id}");
        let label = t
            .first_error_label()
            .unwrap_or_else(|| panic!("{id}: no label"));
        assert!(
            (-1..t.steps.len() as i64).contains(&label),
            "{id}: label {label} for {} steps",
            t.steps.len()
        );
        assert!(
            t.steps.iter().all(|s| !s.text.trim().is_empty()),
            "{id}: empty step"
        );
        let (answer, reference) = (t.final_answer.as_deref(), t.reference_answer.as_deref());
        assert!(
            answer.is_some() && reference.is_some(),
            "{id}: answers missing"
        );
        // Correct traces reach the reference; erroneous ones never do.
        assert_eq!(
            label == -1,
            answer == reference,
            "{id}: label {label}, answer {answer:?} vs {reference:?}"
        );
        let error_type = t
            .metadata
            .get("error_type")
            .unwrap_or_else(|| panic!("{id}: no error_type"));
        let kind = match error_type.as_str() {
            None => {
                assert!(error_type.is_null(), "{id}: error_type {error_type}");
                assert_eq!(label, -1, "{id}: an error without an error_type");
                "correct"
            }
            Some(k) => {
                assert!(ERROR_TYPES.contains(&k), "{id}: unknown error_type {k}");
                assert!(label >= 0, "{id}: error_type {k} on a correct trace");
                k
            }
        };
        *kinds.entry(kind.to_string()).or_insert(0) += 1;
        // The response is the steps as a real response would join them.
        let segmented: Vec<String> = segmenter(meta(t, "layout"))
            .segment(meta(t, "response"))
            .into_iter()
            .map(|s| s.text)
            .collect();
        let steps: Vec<String> = t.steps.iter().map(|s| s.text.trim().to_string()).collect();
        assert_eq!(
            segmented, steps,
            "{id}: response does not segment into steps"
        );
    }
    (generators, kinds)
}

#[test]
fn splits_have_the_stated_counts_balanced_kinds_and_disjoint_generators() {
    let mut by_split = BTreeMap::new();
    for (split, rows, gens) in [("train", 2000, 62), ("val", 400, 14), ("test", 800, 21)] {
        let traces = read(&format!("prm_v2_{split}.jsonl.gz"));
        assert_eq!(traces.len(), rows, "{split}");
        let (g, kinds) = check(&traces, split);
        assert_eq!(g.len(), gens, "{split}: {g:?}");
        // Half correct; the eight error kinds equally often.
        assert_eq!(kinds["correct"], rows / 2, "{split}: {kinds:?}");
        for k in ERROR_TYPES {
            assert_eq!(
                kinds.get(k),
                Some(&(rows / 16)),
                "{split}: {k} in {kinds:?}"
            );
        }
        // Every generator gives as many correct as erroneous rows, so the
        // generator says nothing about the label.
        let mut balance: BTreeMap<&str, i64> = BTreeMap::new();
        for t in &traces {
            let d = if t.first_error_label() == Some(-1) {
                1
            } else {
                -1
            };
            *balance.entry(meta(t, "generator")).or_insert(0) += d;
        }
        assert!(balance.values().all(|&d| d == 0), "{split}: {balance:?}");
        // Errors sit at varied steps.
        let positions: BTreeSet<i64> = traces
            .iter()
            .filter_map(Trace::first_error_label)
            .filter(|&l| l >= 0)
            .collect();
        assert!(
            positions.len() >= 4,
            "{split}: error positions {positions:?}"
        );
        by_split.insert(split, g);
    }
    let names: Vec<_> = by_split.keys().copied().collect();
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let shared: Vec<_> = by_split[a].intersection(&by_split[b]).collect();
            assert!(
                shared.is_empty(),
                "generators in both {a} and {b}: {shared:?}"
            );
        }
    }
    // The v1 gsm_symbolic test generators stay in test, with new held-out sources.
    let test = &by_split["test"];
    for g in GSM_TEST {
        assert!(
            test.contains(&format!("gsm_symbolic_{g}")),
            "gsm_symbolic_{g} not in test"
        );
    }
    assert!(
        test.iter()
            .filter(|g| !g.starts_with("gsm_symbolic_"))
            .count()
            >= 4,
        "{test:?}"
    );
}

#[test]
fn best_of_8_groups_come_from_test_generators_and_can_be_outvoted() {
    let traces = read("prm_v2_test_bon8.jsonl.gz");
    assert_eq!(traces.len(), 840);
    let (test_gens, _) = check(&read("prm_v2_test.jsonl.gz"), "test");
    let (bon_gens, _) = check(&traces, "test");
    assert_eq!(bon_gens, test_gens);
    let mut groups: BTreeMap<&str, Vec<&Trace>> = BTreeMap::new();
    for t in &traces {
        groups.entry(meta(t, "group")).or_default().push(t);
    }
    assert_eq!(groups.len(), 105);
    let (mut mixed, mut outvoted) = (0, 0);
    for (g, members) in &groups {
        assert_eq!(members.len(), 8, "{g}");
        assert!(
            members.iter().all(|t| t.problem == members[0].problem
                && t.reference_answer == members[0].reference_answer),
            "{g}"
        );
        let correct = members
            .iter()
            .filter(|t| t.first_error_label() == Some(-1))
            .count();
        assert!(correct <= 4, "{g}: {correct} correct");
        mixed += usize::from(correct > 0);
        // Some wrong answer is given more often than the right one.
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for t in members {
            *votes
                .entry(t.final_answer.as_deref().unwrap_or(""))
                .or_insert(0) += 1;
        }
        let right = members[0].reference_answer.as_deref().unwrap_or("");
        let right_votes = votes.get(right).copied().unwrap_or(0);
        outvoted += usize::from(votes.iter().any(|(a, &v)| *a != right && v > right_votes));
    }
    assert!(
        mixed * 10 >= groups.len() * 8,
        "only {mixed} groups have a correct candidate"
    );
    assert!(
        outvoted * 2 >= groups.len(),
        "only {outvoted} groups are outvoted"
    );
}
