//! `stepscore features --out FILE` resumes an interrupted extraction: the
//! records already written are kept, an unfinished last line is dropped, and
//! the result equals an uninterrupted run.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn tiny() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny")
}

fn features(input: &std::path::Path, out: &std::path::Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(["features", "--family", "value-head", "--model"])
        .arg(tiny())
        .arg("--out")
        .arg(out)
        .arg(input)
        .stdin(Stdio::null())
        .output()
        .expect("run stepscore");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
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
