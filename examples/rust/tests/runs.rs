//! The example as a user runs it, on the tiny Skywork fixture: it prints
//! the model line, one score per step and the first-error line. Built in
//! `cargo test --workspace`'s one feature resolution, so CI does not build
//! the example's dependency tree a second time (examples/run.sh's `cargo
//! run` is for people).

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_example_scores_each_step_of_its_trace() {
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny");
    let out = Command::new(env!("CARGO_BIN_EXE_stepscore-example"))
        .arg(&model)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout}");
    assert!(
        lines[0].starts_with("model ") && lines[0].contains("(value-head family)"),
        "{stdout}"
    );
    for line in &lines[1..4] {
        let score: f64 = line.split_whitespace().next().unwrap().parse().unwrap();
        assert!((0.0..=1.0).contains(&score), "{line}");
    }
    assert!(
        lines[4].starts_with("first step below ") || lines[4].starts_with("no step below "),
        "{stdout}"
    );

    let e = Command::new(env!("CARGO_BIN_EXE_stepscore-example"))
        .output()
        .unwrap();
    assert!(!e.status.success());
    assert!(String::from_utf8_lossy(&e.stderr).contains("usage: stepscore-example"));
}
