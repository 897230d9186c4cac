//! `stepscore train` end to end (built with `--features train`): labelled
//! traces in, a head file out that the scorer loads next to the backbone.
//! The backbone is a tiny random-weight fixture, so the test checks the
//! pipeline (labels, hold-out, export, loading, bad records), not accuracy;
//! stepscore-train's own tests check that training learns.
#![cfg(feature = "train")]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use stepscore::prm::{Family, HeadSource, Scorer, ScorerOptions};

fn backbone() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/confidence-tiny")
}

/// ProcessBench rows: `a + b` worked in steps, every third trace with a
/// wrong sum at step 1.
fn labelled_rows(n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let (a, b) = (3 + i, 7 + 2 * i);
        let wrong = i % 3 == 0;
        let sum = if wrong { a + b + 1 } else { a + b };
        let row = serde_json::json!({
            "id": format!("t{i}"),
            "problem": format!("What is {a} + {b}, doubled?"),
            "steps": [
                format!("We add {a} and {b}."),
                format!("{a} + {b} = {sum}."),
                format!("Doubling gives {}.", 2 * sum),
            ],
            "label": if wrong { 1 } else { -1 },
        });
        out.push_str(&row.to_string());
        out.push('\n');
    }
    out
}

fn train(input: &str, out: &std::path::Path) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(["train", "--model"])
        .arg(backbone())
        .args(["--out"])
        .arg(out)
        .args([
            "--epochs",
            "4",
            "--threads",
            "1",
            "--input-format",
            "processbench",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stepscore");
    let mut pipe = child.stdin.take().expect("stdin");
    pipe.write_all(input.as_bytes()).expect("write stdin");
    drop(pipe);
    let output = child.wait_with_output().expect("wait");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn trains_a_head_that_loads_next_to_the_backbone() {
    let out = std::env::temp_dir().join(format!(
        "stepscore-train-{}.safetensors",
        std::process::id()
    ));
    let (code, err) = train(&labelled_rows(30), &out);
    assert_eq!(code, 0, "{err}");
    // 30 traces, every 10th held out: 27 train; 9 of them wrong at step 1
    // (steps 0 and 1 labelled, step 2 dropped), 18 all correct (3 steps).
    assert!(err.contains("72 training steps"), "{err}");
    assert!(err.contains("validation step AUROC"), "{err}");
    let options = ScorerOptions {
        threads: 1,
        ..Default::default()
    };
    let scorer = Scorer::open_with(backbone(), &HeadSource::File(out.to_path_buf()), &options)
        .expect("head loads");
    std::fs::remove_file(&out).ok();
    assert_eq!(scorer.family(), Family::ValueHead);
    let scores = scorer
        .score_steps(
            "What is 2 + 3, doubled?",
            &["2 + 3 = 5.", "Doubling gives 10."],
        )
        .unwrap();
    assert!(scores
        .step_scores
        .iter()
        .all(|s| s.is_some_and(|p| (0.0..=1.0).contains(&p))));
}

#[test]
fn bad_records_are_reported_and_the_rest_trained() {
    let out = std::env::temp_dir().join(format!(
        "stepscore-train-bad-{}.safetensors",
        std::process::id()
    ));
    let input = format!("{}{{\"problem\": 5}}\n", labelled_rows(12));
    let (code, err) = train(&input, &out);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("line 13"), "{err}");
    assert!(out.exists(), "the head is still written: {err}");
    std::fs::remove_file(&out).ok();
}
