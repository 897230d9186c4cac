//! `stepscore features --out FILE` resumes an interrupted extraction: the
//! records already written are kept, an unfinished last line is dropped, and
//! the result equals an uninterrupted run.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn tiny() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny")
}

fn features(input: &std::path::Path, out: &std::path::Path) -> (bool, String) {
    let out = out.to_str().expect("a UTF-8 temp path");
    let (ok, _, err) = run_features(&["--out", out], input);
    (ok, err)
}

#[test]
fn an_interrupted_extraction_continues_where_it_stopped() {
    let dir = std::env::temp_dir().join(format!("stepscore-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.jsonl");
    let rows: Vec<String> = (0..4)
        .map(|i| {
            serde_json::json!({"id": format!("t{i}"), "problem": format!("What is {i} + {i}?"),
                               "steps": [format!("{i} + {i} = {}", 2 * i), "Done."], "label": -1})
            .to_string()
        })
        .collect();
    std::fs::write(&input, rows.join("\n") + "\n").unwrap();

    let full = dir.join("full.jsonl");
    let (ok, err) = features(&input, &full);
    assert!(ok, "{err}");
    let full_text = std::fs::read_to_string(&full).unwrap();
    let lines: Vec<&str> = full_text.lines().collect();
    assert_eq!(lines.len(), 4);

    // A run killed while writing its third record.
    let partial = dir.join("partial.jsonl");
    let cut = format!(
        "{}\n{}\n{}",
        lines[0],
        lines[1],
        &lines[2][..lines[2].len() / 2]
    );
    std::fs::write(&partial, cut).unwrap();
    let (ok, err) = features(&input, &partial);
    assert!(ok, "{err}");
    assert!(err.contains("2 traces skipped"), "{err}");
    assert!(err.contains("unfinished last line"), "{err}");
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), full_text);

    // Resuming a finished file adds nothing.
    let (ok, err) = features(&input, &partial);
    assert!(ok, "{err}");
    assert!(err.contains("4 traces skipped"), "{err}");
    assert_eq!(std::fs::read_to_string(&partial).unwrap(), full_text);

    // A file that is not a features output is refused, not appended to.
    let other = dir.join("other.jsonl");
    std::fs::write(&other, "not json\n").unwrap();
    let (ok, err) = features(&input, &other);
    assert!(!ok && err.contains("cannot resume"), "{err}");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "not json\n");
    std::fs::remove_dir_all(dir).unwrap();
}

fn run_features(args: &[&str], input: &std::path::Path) -> (bool, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(["features", "--family", "value-head", "--model"])
        .arg(tiny())
        .args(args)
        .arg(input)
        .stdin(Stdio::null())
        .output()
        .expect("run stepscore");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_tree_of_rated_alternatives_gives_each_full_traces_bits() {
    let dir = std::env::temp_dir().join(format!("stepscore-tree-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // PRM800K-shaped rows of three problems: alternatives after each prefix,
    // the continued one last, as scripts/data/real_steps.py orders them.
    let mut rows = Vec::new();
    for p in 0..3 {
        let problem = format!("What is {p} + {p} + 1?");
        let chain = [
            format!("{p} + {p} = {}.", 2 * p),
            format!("{} + 1 = {}.", 2 * p, 2 * p + 1),
        ];
        for depth in 0..chain.len() {
            let prefix = &chain[..depth];
            for (k, alt) in ["So it is 7.", "Let me think."].iter().enumerate() {
                rows.push(
                    serde_json::json!({"id": format!("p{p}-{depth}-{k}"), "problem": problem,
                    "prefix": prefix, "step": alt, "rating": if k == 0 { -1 } else { 0 }}),
                );
            }
            rows.push(
                serde_json::json!({"id": format!("p{p}-{depth}-c"), "problem": problem,
                "prefix": prefix, "step": chain[depth], "rating": 1, "preferred": true}),
            );
        }
    }
    let text: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    let input = dir.join("tree.jsonl");
    std::fs::write(&input, text.join("\n") + "\n").unwrap();
    let (ok, tree, err) = run_features(
        &[
            "--layers",
            "1,2",
            "--encoding",
            "base64",
            "--from-first-label",
        ],
        &input,
    );
    assert!(ok, "{err}");
    // The same traces whole, each in a run of its own (nothing shared).
    let mut full = String::new();
    for r in &rows {
        let mut steps: Vec<serde_json::Value> = r["prefix"].as_array().unwrap().clone();
        steps.push(r["step"].clone());
        let one = dir.join("one.jsonl");
        let row = serde_json::json!({"id": r["id"], "problem": r["problem"], "steps": steps});
        std::fs::write(&one, row.to_string() + "\n").unwrap();
        let (ok, out, err) = run_features(&["--layers", "1,2", "--encoding", "base64"], &one);
        assert!(ok, "{err}");
        full.push_str(&out);
    }
    let by_id = |text: &str| -> std::collections::HashMap<String, serde_json::Value> {
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["id"].as_str().unwrap().to_string(), v)
            })
            .collect()
    };
    let (tree, full) = (by_id(&tree), by_id(&full));
    assert_eq!(tree.len(), rows.len());
    let mut tokens_tree = 0;
    let mut tokens_full = 0;
    for (id, t) in &tree {
        let f = &full[id];
        let last = f["features_b64"].as_array().unwrap().last().unwrap();
        assert_eq!(
            t["features_b64"].as_array().unwrap(),
            &vec![last.clone()],
            "{id}"
        );
        assert_eq!(t["layers"], serde_json::json!([1, 2]));
        let n = f["features_b64"].as_array().unwrap().len();
        assert_eq!(t["first_step"], serde_json::json!(n - 1), "{id}");
        let want = match t["metadata"]["rating"].as_i64() {
            Some(-1) => false,
            _ => true,
        };
        assert_eq!(t["labels"], serde_json::json!([want]), "{id}");
        // Only a problem's first row runs its problem; every other row
        // finds its prefix in the cache and runs less than its whole trace.
        let (tt, ft) = (t["tokens"].as_u64().unwrap(), f["tokens"].as_u64().unwrap());
        if id.ends_with("-0-0") {
            assert_eq!(tt, ft, "{id}");
        } else {
            assert!(tt < ft, "{id}: {tt} tokens run, the whole trace is {ft}");
        }
        tokens_tree += tt;
        tokens_full += ft;
    }
    assert!(tokens_tree < tokens_full, "{tokens_tree} vs {tokens_full}");
    std::fs::remove_dir_all(dir).unwrap();
}
