//! The committed training data (data/*.jsonl.gz, made by
//! scripts/data/gen_traces.py) reads through stepscore's own reader, with the
//! counts, labels and generator split data/README.md states.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::path::PathBuf;

use flate2::read::GzDecoder;
use stepscore::io::{InputFormat, ReadOptions, TraceReader};
use stepscore::Trace;

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

/// Checks every row and returns its split's generators.
fn check(traces: &[Trace], split: &str) -> BTreeSet<String> {
    let mut generators = BTreeSet::new();
    for t in traces {
        let id = t.id.as_deref().unwrap_or("?");
        assert_eq!(t.meta_str("split"), Some(split), "{id}");
        generators.insert(
            t.meta_str("generator")
                .unwrap_or_else(|| panic!("{id}: no generator"))
                .to_string(),
        );
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
        assert_eq!(
            label == -1,
            error_type.is_null(),
            "{id}: error_type {error_type}"
        );
    }
    generators
}

fn correct(traces: &[Trace]) -> usize {
    traces
        .iter()
        .filter(|t| t.first_error_label() == Some(-1))
        .count()
}

#[test]
fn splits_read_with_the_stated_counts_and_disjoint_generators() {
    let mut by_split = BTreeMap::new();
    for (split, rows, gens) in [("train", 4004, 52), ("val", 500, 10), ("test", 810, 15)] {
        let traces = read(&format!("gsm_symbolic_{split}.jsonl.gz"));
        assert_eq!(traces.len(), rows, "{split}");
        // Roughly half correct, half erroneous.
        let c = correct(&traces);
        assert!(
            c * 10 >= rows * 4 && c * 10 <= rows * 6,
            "{split}: {c} correct of {rows}"
        );
        // Error positions vary: at least three different first-error steps.
        let positions: BTreeSet<i64> = traces
            .iter()
            .filter_map(Trace::first_error_label)
            .filter(|&l| l >= 0)
            .collect();
        assert!(
            positions.len() >= 3,
            "{split}: error positions {positions:?}"
        );
        let g = check(&traces, split);
        assert_eq!(g.len(), gens, "{split}");
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
}

#[test]
fn best_of_8_groups_come_from_test_generators() {
    let traces = read("gsm_symbolic_test_bon8.jsonl.gz");
    assert_eq!(traces.len(), 960);
    let test_gens = check(&read("gsm_symbolic_test.jsonl.gz"), "test");
    let bon_gens = check(&traces, "test");
    assert!(bon_gens.is_subset(&test_gens));
    let mut groups: BTreeMap<&str, Vec<&Trace>> = BTreeMap::new();
    for t in &traces {
        groups
            .entry(t.meta_str("group").expect("group"))
            .or_default()
            .push(t);
    }
    assert_eq!(groups.len(), 120);
    let mut mixed = 0;
    for (g, members) in &groups {
        assert_eq!(members.len(), 8, "{g}");
        assert!(
            members.iter().all(|t| t.problem == members[0].problem
                && t.reference_answer == members[0].reference_answer),
            "{g}"
        );
        let c = correct(&members.iter().map(|t| (*t).clone()).collect::<Vec<_>>());
        mixed += usize::from(c > 0 && c < 8);
    }
    assert!(
        mixed * 10 >= groups.len() * 8,
        "only {mixed} of {} groups mix correct and wrong candidates",
        groups.len()
    );
}
