//! Hostile input against the `stepscore` binary: one test per defect of
//! issue 16 (each failed before its fix), and the bad-input table of
//! docs/ROBUSTNESS.md, every row of which is run as written.
//!
//! `STEPSCORE_TEST_BIN` points the tests at another build of the binary
//! (how the "fails before" claims were checked against the old one).

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::common;
use common::{bin, repo, text, tiny_model};

fn run(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stepscore");
    let mut pipe = child.stdin.take().expect("stdin");
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().expect("wait stepscore")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Runs a bash command line from the repository root with the binary first
/// on PATH.
fn shell(command: &str) -> Output {
    let dir = bin().parent().expect("binary dir").to_path_buf();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    if bin().file_name() != Some(std::ffi::OsStr::new("stepscore")) {
        panic!("STEPSCORE_TEST_BIN must name a file called `stepscore`");
    }
    Command::new("bash")
        .arg("-c")
        .arg(command)
        .current_dir(repo())
        .env("PATH", path)
        .output()
        .expect("run bash")
}

fn lines(rows: &[&str]) -> Vec<u8> {
    let mut v = rows.join("\n").into_bytes();
    v.push(b'\n');
    v
}

// 1. `eval` was all-or-nothing: one unlabelled or out-of-range row aborted
// the run with no metrics and no line or id.
#[test]
fn defect01_eval_reports_the_good_rows_and_names_the_bad_ones() {
    let good = r#"{"id":"g","problem":"p","steps":["a","b"],"label":-1,"scores":[0.9,0.8]}"#;
    for (bad, field) in [
        (
            r#"{"id":"n","problem":"p","steps":["a","b"],"scores":[0.9,0.2]}"#,
            "id `n`, field `label`",
        ),
        (
            r#"{"id":"o","problem":"p","steps":["a","b"],"label":-1,"scores":[1.5,0.8]}"#,
            "id `o`, field `scores[0]`",
        ),
    ] {
        let out = run(&["eval", "-", "--output", "jsonl"], &lines(&[good, bad]));
        assert_eq!(code(&out), 1, "{}", text(&out.stderr));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("<stdin> line 2, {field}")),
            "{stderr}"
        );
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("metrics over the good row");
        assert_eq!(
            (v["traces"].as_u64(), v["skipped"].as_u64()),
            (Some(1), Some(1)),
            "{v}"
        );
        assert_eq!(v["processbench"]["overall"]["n_correct"], 1, "{v}");
    }
}

// 2. `aggregate` and `select` ranked scores outside [0, 1]: (-5, -7) had
// prod 35 and won best-of-N over (0.9, 0.8).
#[test]
fn defect02_scores_outside_the_unit_interval_are_refused() {
    let input = lines(&[
        r#"{"id":"c1","problem":"q","response":"The answer is 1.","steps":[{"text":"x","score":-5},{"text":"y","score":-7}]}"#,
        r#"{"id":"c2","problem":"q","response":"The answer is 3.","steps":[{"text":"x","score":0.9},{"text":"y","score":0.8}]}"#,
    ]);
    let out = run(&["select", "-", "-a", "prod", "--output", "jsonl"], &input);
    assert_eq!(code(&out), 1);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("line 1, id `c1`, field `steps[0].score`: score -5 is outside [0, 1]"),
        "{stderr}"
    );
    let group: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let best = group["best"].as_u64().expect("a best candidate") as usize;
    assert_eq!(group["candidates"][best]["id"], "c2", "{group}");
    assert_eq!(group["weighted"]["answer"], "3", "{group}");

    for score in ["7.5", "1e308"] {
        let row = format!(r#"{{"problem":"p","steps":["a"],"scores":[{score}]}}"#);
        let out = run(&["aggregate", "-", "--output", "jsonl"], &lines(&[&row]));
        assert_eq!(code(&out), 1, "{score}");
        assert!(out.stdout.is_empty(), "{score}: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains("outside [0, 1]"), "{score}");
    }
}

/// `score --truncate` output of a 3-step trace over a 30-token limit.
fn truncated_trace() -> Vec<u8> {
    let row = r#"{"id":"t","problem":"What is 2 + 3?","steps":["2 + 3 = 5.","So the answer is 5.","Check: 5 - 3 = 2."]}"#;
    let model = tiny_model();
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--max-tokens",
            "30",
            "--truncate",
            "--output",
            "jsonl",
        ],
        row.as_bytes(),
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    out.stdout
}

// 3. `score --truncate` output did not go through the pipeline: aggregate
// rejected every truncated row, select printed `best: null` with exit 0.
#[test]
fn defect03_truncated_traces_go_through_aggregate_and_select() {
    let scored = truncated_trace();
    let v: serde_json::Value = serde_json::from_slice(&scored).unwrap();
    assert_eq!(v["metadata"]["stepscore"]["truncated_steps"], 1);

    let agg = run(&["aggregate", "-", "--output", "jsonl"], &scored);
    assert_eq!(code(&agg), 0, "{}", text(&agg.stderr));
    let a: serde_json::Value = serde_json::from_slice(&agg.stdout).unwrap();
    assert_eq!(
        (a["steps"].as_u64(), a["unscored_steps"].as_u64()),
        (Some(3), Some(1))
    );
    let scores = a["scores"].as_array().unwrap();
    assert_eq!(scores.len(), 2);
    let min = scores.iter().filter_map(|s| s.as_f64()).fold(1.0, f64::min);
    assert_eq!(a["aggregates"]["min"].as_f64(), Some(min));
    assert!(text(&agg.stderr).contains("unscored last steps"));

    let sel = run(&["select", "-", "--output", "jsonl"], &scored);
    assert_eq!(code(&sel), 0, "{}", text(&sel.stderr));
    let s: serde_json::Value = serde_json::from_slice(&sel.stdout).unwrap();
    assert_eq!(s["best"], 0, "{s}");
    assert_eq!(s["candidates"][0]["unscored_steps"], 1, "{s}");

    // The refusing policy reports the trace as a bad record.
    for cmd in ["aggregate", "select"] {
        let out = run(&[cmd, "-", "--unscored", "reject"], &scored);
        assert_eq!(code(&out), 1, "{cmd}");
        assert!(
            text(&out.stderr).contains("field `steps[2].score`: step 2 of 3 has no score"),
            "{cmd}: {}",
            text(&out.stderr)
        );
    }
}

// 4. "record N" counted only the rows that parsed, and elements of a
// one-line JSON array were reported as "line N".
#[test]
fn defect04_errors_name_the_input_line_and_array_item() {
    let input = lines(&[
        "{broken",
        r#"{"id":"ok","problem":"p","steps":["a"],"scores":[0.5]}"#,
        r#"{"id":"u","problem":"p","steps":["a"]}"#,
    ]);
    let out = run(&["aggregate", "-"], &input);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("<stdin> line 1: invalid JSON"), "{stderr}");
    assert!(
        stderr.contains("<stdin> line 3, id `u`, field `steps[0].score`"),
        "{stderr}"
    );
    assert!(!stderr.contains("(record"), "{stderr}");

    let array = br#"[{"problem":"p","steps":["a"],"scores":[0.5]}, {"problem":"p","steps":[]}]"#;
    let out = run(&["aggregate", "-"], array);
    assert!(
        text(&out.stderr).contains("<stdin> line 1, item 2, field `steps`: empty step list"),
        "{}",
        text(&out.stderr)
    );
}

// 5. A segmenter pattern matching "" split into one step per character.
#[test]
fn defect05_empty_matching_segmenter_patterns_are_refused() {
    for pattern in ["regex:", "regex:x*", "regex:a|"] {
        let out = run(
            &["segment", "-", "--segmenter", pattern],
            br#"{"problem":"p","response":"abc"}"#,
        );
        assert_eq!(code(&out), 2, "{pattern}");
        assert!(out.stdout.is_empty(), "{pattern}");
        assert!(
            text(&out.stderr).contains("can match the empty string"),
            "{pattern}"
        );
    }
}

// 6. `--threads 100000` started 62+ threads on 2 cores.
#[test]
fn defect06_threads_are_capped_at_the_cores() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = tiny_model();
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--threads",
            "100000",
            "--output",
            "jsonl",
        ],
        br#"{"problem":"p","steps":["a"]}"#,
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "--threads 100000 is more than the {cores} CPUs this process may use; using {cores}"
        )),
        "{}",
        text(&out.stderr)
    );
}

// 7. A closed stdout lost all output with exit 0; so did a broken pipe.
#[test]
fn defect07_closed_or_broken_stdout_is_an_io_error() {
    let out = shell("stepscore segment data/gsm_symbolic_val.jsonl.gz >&-");
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("<stdout> is closed"));
    // Redirected to /dev/null on purpose: fine.
    let out = shell("stepscore segment data/gsm_symbolic_val.jsonl.gz >/dev/null");
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    // The reader leaves after one byte: the rest cannot be written.
    let out = shell(
        "stepscore segment data/gsm_symbolic_val.jsonl.gz --output jsonl | head -c 1 >/dev/null; \
         echo \"status ${PIPESTATUS[0]}\"",
    );
    assert!(
        text(&out.stdout).contains("status 3"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("pipe was closed"),
        "{}",
        text(&out.stderr)
    );
}

// 8. Whitespace-only and zero-width-only steps were scored, an empty one
// refused.
#[test]
fn defect08_blank_steps_are_refused_like_empty_ones() {
    let input = lines(&[
        r#"{"id":"space","problem":"p","steps":["a","   "]}"#,
        r#"{"id":"zw","problem":"p","steps":["a","\u200b\u2060"]}"#,
        r#"{"id":"empty","problem":"p","steps":["a",""]}"#,
        r#"{"id":"fine","problem":"p","steps":["a","b"]}"#,
    ]);
    let model = tiny_model();
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--output",
            "jsonl",
        ],
        &input,
    );
    assert_eq!(code(&out), 1);
    let stderr = text(&out.stderr);
    for id in ["space", "zw", "empty"] {
        assert!(
            stderr.contains(&format!("id `{id}`: invalid argument: step 1 is empty")),
            "{id}: {stderr}"
        );
    }
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "only `fine` is scored"
    );
    // Segmenting drops a zero-width-only piece like an empty one.
    let out = run(
        &["segment", "-", "--output", "jsonl"],
        br#"{"problem":"p","response":"a\n\n\u200b\n\nb"}"#,
    );
    let t: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(t["steps"].as_array().map(Vec::len), Some(2), "{t}");
}

// 9. Options accepted and ignored: `score --threshold 2`, `--quantize` on a
// GGUF model, `--max-tokens 100000000`.
#[test]
fn defect09_options_out_of_range_or_not_applying_are_refused() {
    let model = tiny_model();
    let row = br#"{"problem":"p","steps":["a"]}"#;
    let out = run(&["score", "--model", &model, "--threshold", "2"], row);
    assert_eq!(code(&out), 2);
    assert!(text(&out.stderr).contains("outside [0, 1]"));

    let out = run(
        &[
            "score",
            "--model",
            "/nonexistent/model.gguf",
            "--quantize",
            "q8_0",
        ],
        row,
    );
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("GGUF file"),
        "{}",
        text(&out.stderr)
    );

    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--max-tokens",
            "100000000",
        ],
        row,
    );
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("over the model's context"),
        "{}",
        text(&out.stderr)
    );
    let out = run(&["eval", "--threshold", "0.3", "--calibrate"], b"");
    assert_eq!(code(&out), 2, "{}", text(&out.stderr));
}

// 10. A JSON array bypassed the record limit; a stream without line breaks
// was read forever.
#[test]
fn defect10_arrays_obey_the_record_limit_and_endless_lines_stop() {
    let big = format!(
        r#"{{"problem":"{}","steps":["a"],"scores":[0.5]}}"#,
        "x".repeat(3000)
    );
    let small = r#"{"problem":"p","steps":["a"],"scores":[0.5]}"#;
    let array = format!("[{small},\n{big},\n{small}]");
    let out = run(
        &[
            "aggregate",
            "-",
            "--max-line-bytes",
            "1000",
            "--output",
            "jsonl",
        ],
        array.as_bytes(),
    );
    assert_eq!(code(&out), 1);
    assert!(
        text(&out.stderr).contains(
            "line 2, item 2: array item of 3043 bytes is longer than the 1000-byte limit"
        ),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        2,
        "the small items are kept"
    );

    // /dev/zero has no line break: an error, not an endless read.
    let out = shell("timeout 60 stepscore segment /dev/zero --output jsonl; echo \"status $?\"");
    assert!(
        text(&out.stdout).contains("status 1"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("no line break"),
        "{}",
        text(&out.stderr)
    );
}

// 11. Duplicate JSON keys: the last one won, silently.
#[test]
fn defect11_duplicate_keys_are_refused() {
    let out = run(
        &["aggregate", "-"],
        br#"{"problem":"p","steps":["a","b"],"label":-1,"label":1,"scores":[0.9,0.2]}"#,
    );
    assert_eq!(code(&out), 1);
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("<stdin> line 1, field `label`: duplicate key `label`"),
        "{}",
        text(&out.stderr)
    );
}

// 12. Noise and codes: `XDG_RUNTIME_DIR is invalid` on a good run; the
// single-step truncation error said "choose truncation"; a missing model
// file exited 2 though --help says 3 is the I/O code.
#[test]
fn defect12_quiet_runs_and_exit_codes_as_documented() {
    let model = tiny_model();
    // The default backend (auto) lists the adapters; with no session
    // directory that used to print the Wayland complaint.
    let out = Command::new(bin())
        .args(["score", "--model", &model, "--output", "jsonl"])
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NODEVICE_SELECT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(br#"{"problem":"p","steps":["a"]}"#)?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("XDG_RUNTIME_DIR"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("error"),
        "{}",
        text(&out.stderr)
    );

    let long_problem = format!(
        r#"{{"problem":"{}","steps":["2 + 3 = 5."]}}"#,
        "What is 2 + 3? ".repeat(4)
    );
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--max-tokens",
            "10",
            "--truncate",
        ],
        long_problem.as_bytes(),
    );
    assert_eq!(code(&out), 1);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("not even its first step fits"), "{stderr}");
    assert!(!stderr.contains("choose truncation"), "{stderr}");

    let out = run(&["score", "--model", "/nonexistent/model.gguf"], b"");
    assert_eq!(code(&out), 3, "{}", text(&out.stderr));
    let help = run(&["--help"], b"");
    assert!(
        text(&help.stdout).contains("3 I/O error"),
        "{}",
        text(&help.stdout)
    );
}

// Issue 23: readers and models that never lie. Each test failed on the
// binary before its fix (checked with STEPSCORE_TEST_BIN, or said why not).

/// A head file of `v_head.summary.weight` [1, 32] (the tiny fixture's width)
/// filled with `value`.
fn value_head_file(value: f32) -> tempfile_path::TempPath {
    let header =
        br#"{"v_head.summary.weight":{"dtype":"F32","shape":[1,32],"data_offsets":[0,128]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    for _ in 0..32 {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    tempfile_path::TempPath::with(&bytes, "head.safetensors")
}

/// Files that remove themselves (no extra dependency for a few bytes).
mod tempfile_path {
    use std::path::{Path, PathBuf};

    pub struct TempPath(PathBuf);

    impl TempPath {
        pub fn with(bytes: &[u8], name: &str) -> TempPath {
            let dir = std::env::temp_dir().join(format!(
                "stepscore-robustness-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let path = dir.join(name);
            std::fs::write(&path, bytes).expect("write temp file");
            TempPath(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl Drop for TempPath {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

// Item 4: a head with NaN weights scored every step `null` with exit 0 and
// "scored N traces". Now each trace is an error naming the head and the
// step, nothing is written for it, and the exit code is the model's.
#[test]
fn issue23_item04_non_finite_scores_are_model_errors() {
    let model = tiny_model();
    for poison in [f32::NAN, f32::INFINITY] {
        let head = value_head_file(poison);
        let input = lines(&[
            r#"{"id":"one","problem":"p","steps":["a"]}"#,
            r#"{"id":"two","problem":"p","steps":["a","b"]}"#,
        ]);
        let out = run(
            &[
                "score",
                "--model",
                &model,
                "--backend",
                "cpu",
                "--head",
                &head.path().display().to_string(),
                "--output",
                "jsonl",
            ],
            &input,
        );
        let stderr = text(&out.stderr);
        assert_eq!(code(&out), 4, "{poison}: {stderr}");
        for id in ["one", "two"] {
            assert!(
                stderr.contains(&format!(
                    "id `{id}`: head v_head.summary.weight: gives a non-finite score for step 0"
                )),
                "{poison} {id}: {stderr}"
            );
        }
        assert!(
            stderr.contains("2 trace(s) could not be scored"),
            "{stderr}"
        );
        assert_eq!(
            text(&out.stdout),
            "",
            "no trace is written with a null score"
        );
    }
}

// Issue 44 (minor): a head whose weights are finite and whose bias is +inf
// was reported as `head v_head.summary.weight: gives a non-finite score`;
// the tensor at fault is the bias, and the error names it.
#[test]
fn a_non_finite_bias_is_named_not_the_weight() {
    let model = tiny_model();
    let header = br#"{"v_head.summary.weight":{"dtype":"F32","shape":[1,32],"data_offsets":[0,128]},"v_head.summary.bias":{"dtype":"F32","shape":[1],"data_offsets":[128,132]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    for _ in 0..32 {
        bytes.extend_from_slice(&0.01f32.to_le_bytes());
    }
    bytes.extend_from_slice(&f32::INFINITY.to_le_bytes());
    let head = tempfile_path::TempPath::with(&bytes, "head.safetensors");
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--backend",
            "cpu",
            "--head",
            &head.path().display().to_string(),
            "--output",
            "jsonl",
        ],
        &lines(&[r#"{"id":"one","problem":"p","steps":["a"]}"#]),
    );
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 4, "{stderr}");
    assert!(
        stderr.contains("id `one`: head v_head.summary.bias: gives a non-finite score for step 0"),
        "{stderr}"
    );
}

// Item 7: an id above 2^64 came out as "1.2345678901234567e+23", and two
// different ids became one.
#[test]
fn issue23_item07_ids_keep_their_text() {
    let input = lines(&[
        r#"{"id":123456789012345678912345,"problem":"p","steps":["a"]}"#,
        r#"{"id":123456789012345678912346,"problem":"p","steps":["a"]}"#,
        r#"{"id":18446744073709551615,"problem":"p","steps":["a"]}"#,
    ]);
    let out = run(&["segment", "-", "--output", "jsonl"], &input);
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    let ids: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect();
    assert_eq!(
        ids,
        [
            r#""123456789012345678912345""#,
            r#""123456789012345678912346""#,
            r#""18446744073709551615""#
        ]
    );
}

// Item 11: `[rows]` then JSONL lines gave 0 records and "trailing
// characters"; the good rows are kept and the bad line is reported.
#[test]
fn issue23_item11_rows_after_an_array_are_read() {
    let input = lines(&[
        r#"[{"id":"a","problem":"p","steps":["a"]},{"id":"b","problem":"p","steps":["b"]}]"#,
        r#"{"id":"c","problem":"p","steps":["c"]}"#,
        r#"{"id":"bad","problem":"p","steps":[]}"#,
    ]);
    let out = run(&["segment", "-", "--output", "jsonl"], &input);
    assert_eq!(code(&out), 1);
    let ids: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect();
    assert_eq!(ids, [r#""a""#, r#""b""#, r#""c""#]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("<stdin> line 3, id `bad`"), "{stderr}");
    assert!(stderr.contains("1 bad input record"), "{stderr}");
}

// Item 13: a row with both ProcessBench and TRL fields was read as TRL.
#[test]
fn issue23_item13_ambiguous_rows_name_both_fields() {
    let out = run(
        &["segment", "-", "--output", "jsonl"],
        &lines(&[
            r#"{"id":"x","problem":"p","steps":["a"],"prompt":"p","completions":["b"]}"#,
            r#"{"id":"ok","problem":"p","steps":["a"]}"#,
        ]),
    );
    assert_eq!(code(&out), 1);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("id `x`"), "{stderr}");
    assert!(
        stderr.contains("`completions` (TRL) and `steps` (ProcessBench/native)"),
        "{stderr}"
    );
    assert_eq!(text(&out.stdout).lines().count(), 1);
    // Naming the format settles it.
    let out = run(
        &["segment", "-", "--input-format", "trl", "--output", "jsonl"],
        br#"{"problem":"p","steps":["a"],"prompt":"p","completions":["b"]}"#,
    );
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
}

// Item 16: gzip on stdin gave one "invalid UTF-8" per line; now one error.
#[test]
fn issue23_item16_gzip_on_stdin_is_one_error() {
    let gz = std::fs::read(repo().join("data/gsm_symbolic_val.jsonl.gz")).unwrap();
    let out = run(&["segment", "-", "--output", "jsonl"], &gz);
    assert_eq!(code(&out), 1);
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("error:").count(), 1, "{stderr}");
    assert!(stderr.contains("gzip-compressed"), "{stderr}");
    assert!(!stderr.contains("invalid UTF-8"), "{stderr}");
}

// Item 16: `score` without a cache directory said "pass --cache-dir", a flag
// it does not have.
#[test]
fn issue23_item16_no_cache_dir_names_what_score_has() {
    let out = Command::new(bin())
        .args(["score", "-"])
        .env_remove("STEPSCORE_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HOME")
        .stdin(Stdio::null())
        .output()
        .expect("run stepscore");
    assert_eq!(code(&out), 2);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("set STEPSCORE_CACHE"), "{stderr}");
    assert!(!stderr.contains("--cache-dir"), "{stderr}");
}

// Item 16 and issue 22: `score --help` and `--head` said the default model
// is SmolLM2; it is stepscore-prm-qwen1.5b.
#[test]
fn issue23_item16_help_names_the_real_default_model() {
    let out = run(&["score", "--help"], b"");
    let help = text(&out.stdout);
    assert!(help.contains("stepscore-prm-qwen1.5b"), "{help}");
    assert!(!help.contains("SmolLM2"), "{help}");
}

// Item 16: an out-of-vocabulary token id (a tokenizer that does not match
// the model) was bad input, exit 1; it is a model error, exit 4.
#[test]
fn issue23_item16_out_of_vocabulary_ids_are_model_errors() {
    let src = repo().join("tests/fixtures/prm/skywork-prm-tiny");
    let dir = tempfile_path::TempPath::with(b"", "marker");
    let dir = dir.path().parent().unwrap().to_path_buf();
    for f in ["config.json", "model.safetensors", "tokenizer_config.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    // One more added token: an id past the model's 403 rows.
    let mut tok: serde_json::Value =
        serde_json::from_slice(&std::fs::read(src.join("tokenizer.json")).unwrap()).unwrap();
    tok["added_tokens"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "id": 500, "content": "<oov>", "single_word": false, "lstrip": false,
            "rstrip": false, "normalized": false, "special": true
        }));
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
    let out = run(
        &[
            "score",
            "--model",
            &dir.display().to_string(),
            "--backend",
            "cpu",
            "--output",
            "jsonl",
        ],
        &lines(&[r#"{"id":"t","problem":"p","steps":["a <oov> b"]}"#]),
    );
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 4, "{stderr}");
    // (The tokenizers crate numbers the added token itself: 403, the first
    // id past the model's rows.)
    assert!(
        stderr.contains("id `t`: tokenizer: token id 403"),
        "{stderr}"
    );
    assert!(
        stderr.contains("out of range for the model's vocabulary of 403"),
        "{stderr}"
    );
}

// Item 14 and issue 22: `stepscore bench` on a machine whose only GPU is
// llvmpipe timed the GPU engine on it (minutes) without a line of output.
// Auto now skips a software adapter, saying why, and each phase is said on
// stderr as it starts.
#[test]
fn issue23_item14_bench_auto_skips_software_adapters_and_says_what_it_does() {
    let preference = stepscore::prm::auto_preference();
    let out = run(
        &[
            "bench",
            "--synthetic",
            "smollm2-135m",
            "--tokens",
            "256",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--append-prefix",
            "0",
        ],
        b"",
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(code(&out), 0, "{stderr}");
    for phase in ["building synthetic", "cpu: prefill", "cpu: score_steps"] {
        assert!(
            stderr.contains(&format!("stepscore bench: {phase}")),
            "{stderr}"
        );
    }
    if preference.chosen == stepscore::prm::Backend::Gpu {
        eprintln!("a hardware GPU is here: the skip is not exercised");
        return;
    }
    assert!(stdout.contains("gpu: skipped"), "{stdout}");
    assert!(!stdout.contains("gpu engine:"), "{stdout}");
    if preference.adapter.is_some() {
        assert!(stdout.contains("software rasterizers"), "{stdout}");
    }
}

// Item 14: `bench --synthetic 7b --weights f16` aborted (exit 134) when an
// allocation failed. Here the address space is capped below what the
// synthetic f16 model needs, so the first large allocation fails: a typed
// error and exit 2, not an abort.
#[test]
fn issue23_item14_bench_allocation_failure_is_an_error() {
    if !cfg!(target_os = "linux") {
        return;
    }
    let out = shell(
        "ulimit -v 1200000; stepscore bench --synthetic qwen2.5-0.5b --weights f16 --backend cpu \
         --tokens 16 --repeats 1 --warmup 0 --append-prefix 0",
    );
    let stderr = text(&out.stderr);
    assert_eq!(code(&out), 2, "{stderr}");
    assert!(stderr.contains("not enough memory"), "{stderr}");
}

/// One row of the bad-input table: `| class | `command` | exit | `message` |`.
struct Row {
    class: String,
    command: String,
    exit: i32,
    message: String,
}

/// The rows of the table under "## Bad-input table" in docs/ROBUSTNESS.md.
fn table_rows(doc: &str) -> Vec<Row> {
    let section = doc
        .split("## Bad-input table")
        .nth(1)
        .expect("docs/ROBUSTNESS.md has a `## Bad-input table` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    // A code span: a run of k backticks, the text, k backticks; one space
    // inside each end is dropped (CommonMark), so ``a `b` c`` can hold
    // backticks. `\|` stands for `|` inside a table cell.
    let code_span = |cell: &str| -> String {
        let cell = cell.trim();
        let k = cell.chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(k);
        let inner = match cell.get(k..).and_then(|c| c.strip_suffix(fence.as_str())) {
            Some(inner) if k > 0 => inner,
            _ => cell,
        };
        let inner = match inner.strip_prefix(' ').and_then(|i| i.strip_suffix(' ')) {
            Some(i) if k > 1 => i,
            _ => inner,
        };
        inner.replace("\\|", "|")
    };
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| class") && !l.starts_with("|--"))
        .map(|l| {
            // Split on `|` not preceded by a backslash.
            let mut cells = Vec::new();
            let mut cur = String::new();
            let mut prev = ' ';
            for c in l.trim().trim_matches('|').chars() {
                if c == '|' && prev != '\\' {
                    cells.push(std::mem::take(&mut cur));
                } else {
                    cur.push(c);
                }
                prev = c;
            }
            cells.push(cur);
            assert_eq!(cells.len(), 4, "row `{l}` needs 4 cells");
            Row {
                class: cells[0].trim().to_string(),
                command: code_span(&cells[1]),
                exit: cells[2]
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("exit code in `{l}`")),
                message: code_span(&cells[3]),
            }
        })
        .collect()
}

#[test]
fn robustness_table_rows_hold() {
    let doc = std::fs::read_to_string(repo().join("docs/ROBUSTNESS.md"))
        .expect("read docs/ROBUSTNESS.md");
    let rows = table_rows(&doc);
    assert!(rows.len() >= 30, "only {} rows", rows.len());
    let mut failures = Vec::new();
    for row in &rows {
        let out = shell(&row.command);
        let stderr = text(&out.stderr);
        if code(&out) != row.exit || !stderr.contains(&row.message) {
            failures.push(format!(
                "{}: `{}` exited {} (want {}), stderr:\n{stderr}",
                row.class,
                row.command,
                code(&out),
                row.exit
            ));
        }
        assert!(
            !stderr.contains("panicked"),
            "{}: panic\n{stderr}",
            row.class
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn table_parser_reads_escaped_pipes() {
    let doc = "## Bad-input table\n\n| class | command | exit | message |\n|---|---|---|---|\n\
               | a | `printf x \\| stepscore eval -` | 1 | `line 1` |\n\
               | b | `x` | 2 | `` field `label` `` |\n\n## Next\n| x | y | 1 | z |\n";
    let rows = table_rows(doc);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].command, "printf x | stepscore eval -");
    assert_eq!((rows[0].exit, rows[0].message.as_str()), (1, "line 1"));
    assert_eq!(
        (rows[1].exit, rows[1].message.as_str()),
        (2, "field `label`")
    );
}
