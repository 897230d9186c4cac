//! End-to-end tests of the `stepscore` binary on the committed fixtures and on
//! bad input.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn stepscore(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stepscore");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(bytes) = stdin {
        // The reader may stop early (e.g. on an over-long line); a closed pipe is fine.
        let _ = pipe.write_all(bytes);
    }
    drop(pipe);
    child.wait_with_output().expect("wait stepscore")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn eval_prints_the_f1_table() {
    let out = stepscore(
        &[
            "eval",
            fixture("processbench_scored.jsonl").to_str().unwrap(),
            "--output",
            "table",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    // Worked out by hand from the fixture at threshold 0.5:
    // gsm8k: correct samples 2 (1 predicted -1) -> 0.500; erroneous 3 (2 exact) -> 0.667;
    //        F1 = 2 * 0.5 * 0.667 / 1.167 = 0.571.
    // math:  correct 2 (both right) -> 1.000; erroneous 2 (math-2 exact; math-3 scores
    //        0.9, 0.6, 0.2 predict step 2 for label 1) -> 0.500; F1 = 0.667.
    // pooled: correct 3/4 = 0.750, erroneous 3/5 = 0.600, F1 = 0.9 / 1.35 = 0.667.
    // mean F1 over splits = (0.571 + 0.667) / 2 = 0.619.
    let line = |split: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(split))
            .unwrap_or_else(|| panic!("no {split} row in:\n{stdout}"))
            .to_string()
    };
    let gsm = line("gsm8k");
    assert!(
        gsm.contains("0.500") && gsm.contains("0.667") && gsm.ends_with("0.571"),
        "{gsm}"
    );
    let math = line("math");
    assert!(
        math.contains("1.000") && math.contains("0.500") && math.ends_with("0.667"),
        "{math}"
    );
    let all = line("overall");
    assert!(
        all.contains("0.750") && all.contains("0.600") && all.ends_with("0.667"),
        "{all}"
    );
    assert!(stdout.contains("mean F1 over splits: 0.619"), "{stdout}");
    assert!(stdout.contains("step AUROC"), "{stdout}");
    assert!(stdout.contains("expected calibration error"), "{stdout}");
}

#[test]
fn eval_jsonl_when_piped() {
    let out = stepscore(
        &[
            "eval",
            fixture("processbench_scored.jsonl").to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let f1 = v["processbench"]["overall"]["f1"].as_f64().unwrap();
    assert!((f1 - 2.0 / 3.0).abs() < 1e-9, "{f1}");
    assert_eq!(v["traces"], 9);
}

#[test]
fn select_prints_choice_and_both_votes() {
    let out = stepscore(
        &[
            "select",
            fixture("best_of_n.jsonl").to_str().unwrap(),
            "--output",
            "table",
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    // muffins: min scores a=0.80 (6), b=0.40 (18), c=0.50 (18), d=0.45 (18), e=0.90 (6).
    // best-of-N: e (0.900, answer 6). Majority: 18 with 3 of 5 votes (wrong).
    // Weighted: 6 has 0.80 + 0.90 = 1.70 > 18 with 0.40 + 0.50 + 0.45 = 1.35.
    assert!(
        stdout.contains("best-of-N:         muffins-e (score 0.900, answer $6$)  [correct]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("majority vote:     18 (3 of the votes)  [wrong]"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PRM-weighted vote: 6 (weight 1.700, 2 candidates)  [correct]"),
        "{stdout}"
    );
    // percent: 12 (\boxed{12}) and 12.00 agree; 10 loses both votes.
    assert!(
        stdout.contains("majority vote:     12 (2 of the votes)  [correct]"),
        "{stdout}"
    );
    // Accuracy: best-of-N 2/2, majority 1/2, weighted 2/2.
    let row = |method: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(method) && l.contains('/'))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("majority vote").ends_with("1/2 (50.0%)"), "{stdout}");
    assert!(
        row("PRM-weighted vote").ends_with("2/2 (100.0%)"),
        "{stdout}"
    );
    assert!(row("best-of-N (min)").ends_with("2/2 (100.0%)"), "{stdout}");
}

#[test]
fn select_jsonl_has_groups_and_summary() {
    let out = stepscore(
        &[
            "select",
            fixture("best_of_n.jsonl").to_str().unwrap(),
            "--output",
            "jsonl",
        ],
        None,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["group"], "muffins");
    assert_eq!(lines[0]["best"], 4);
    assert_eq!(lines[0]["correct"]["majority"], false);
    assert_eq!(lines[2]["kind"], "summary");
    assert_eq!(lines[2]["weighted_correct"], 2);
}

#[test]
fn segment_keeps_spans() {
    let input = br#"{"problem":"2+2?","response":"First, 2+2 = 4.\n\n  So the answer is 4. \n"}"#;
    let out = stepscore(&["segment", "--output", "jsonl"], Some(input));
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let response = v["response"].as_str().unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for step in steps {
        let (s, e) = (
            step["span"]["start"].as_u64().unwrap() as usize,
            step["span"]["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(&response[s..e], step["text"].as_str().unwrap());
    }
    assert_eq!(steps[1]["text"], "So the answer is 4.");
}

#[test]
fn aggregate_reports_first_error() {
    let out = stepscore(
        &[
            "aggregate",
            fixture("processbench_scored.jsonl").to_str().unwrap(),
            "-a",
            "min,mean",
        ],
        None,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let first: serde_json::Value =
        serde_json::from_str(text(&out.stdout).lines().nth(2).unwrap()).unwrap();
    // gsm8k-2: scores 0.9, 0.2, 0.6 -> min 0.2, mean 1.7 / 3, first below 0.5 at step 1.
    assert_eq!(first["id"], "gsm8k-2");
    assert_eq!(first["aggregates"]["min"], 0.2);
    assert!((first["aggregates"]["mean"].as_f64().unwrap() - 1.7 / 3.0).abs() < 1e-12);
    assert_eq!(first["first_error"], 1);
    assert_eq!(first["label"], 1);
}

/// Runs a command on bad input and returns (exit code, stderr).
fn bad(args: &[&str], input: &[u8]) -> (i32, String) {
    let out = stepscore(args, Some(input));
    (out.status.code().unwrap_or(-1), text(&out.stderr))
}

const GOOD: &str = r#"{"problem":"p","steps":["a","b"],"label":-1,"scores":[0.9,0.8]}"#;

#[test]
fn broken_json_line_is_named_and_the_rest_is_kept() {
    let input = format!("{GOOD}\n{{\"problem\": \"p\", \"steps\": [\n{GOOD}\n");
    let out = stepscore(&["aggregate", "--output", "jsonl"], Some(input.as_bytes()));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("<stdin> line 2"), "{stderr}");
    // Both good lines still produce output.
    assert_eq!(text(&out.stdout).lines().count(), 2);
}

#[test]
fn missing_field_is_named() {
    let (code, stderr) = bad(
        &["aggregate"],
        br#"{"steps":["a"],"label":-1,"scores":[0.5]}"#,
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("line 1") && stderr.contains("problem"),
        "{stderr}"
    );
}

#[test]
fn non_utf8_is_named() {
    let mut input = GOOD.as_bytes().to_vec();
    input.extend_from_slice(b"\n{\"problem\":\"caf\xe9\",\"steps\":[\"a\"],\"label\":-1}\n");
    let (code, stderr) = bad(&["aggregate"], &input);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("line 2") && stderr.to_lowercase().contains("utf-8"),
        "{stderr}"
    );
}

#[test]
fn empty_step_list_is_named() {
    let (code, stderr) = bad(
        &["eval"],
        br#"{"problem":"p","steps":[],"label":-1,"scores":[]}"#,
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("line 1") && stderr.contains("steps"),
        "{stderr}"
    );
}

#[test]
fn huge_line_is_rejected_by_line() {
    // 100 MB on one line, after one good line.
    let mut input = format!("{GOOD}\n").into_bytes();
    input.extend_from_slice(b"{\"problem\":\"");
    input.resize(input.len() + 100 * 1024 * 1024, b'x');
    input.extend_from_slice(b"\"}\n");
    input.extend_from_slice(GOOD.as_bytes());
    let out = stepscore(&["aggregate", "--output", "jsonl"], Some(&input));
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("line 2"), "{stderr}");
    assert_eq!(
        text(&out.stdout).lines().count(),
        2,
        "the good lines around it are kept"
    );
}

#[test]
fn usage_errors_exit_2_and_io_errors_exit_3() {
    let out = stepscore(&["aggregate", "--threshold", "7"], Some(GOOD.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    let out = stepscore(&["aggregate", "-a", "median"], Some(GOOD.as_bytes()));
    assert_eq!(out.status.code(), Some(2));
    let out = stepscore(&["eval", "/nonexistent/traces.jsonl"], None);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("/nonexistent/traces.jsonl"));
}

#[test]
fn every_command_has_help() {
    for cmd in ["segment", "aggregate", "select", "eval"] {
        let out = stepscore(&[cmd, "--help"], None);
        assert!(out.status.success(), "{cmd} --help");
        assert!(text(&out.stdout).contains("Usage: stepscore"), "{cmd}");
    }
}

#[test]
fn score_writes_step_scores_from_a_checkpoint() {
    // The tiny Skywork-layout checkpoint and the first case of its reference
    // (scripts/reference/prm_reference.py): scores must match within 1e-4.
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny");
    let reference = reference_json(&dir);
    let case = &reference["cases"][0];
    let row = serde_json::json!({"id": "t1", "problem": case["problem"], "steps": case["steps"], "label": -1});
    let out = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--output",
            "jsonl",
        ],
        Some(row.to_string().as_bytes()),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let scored: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON trace");
    assert_eq!(scored["metadata"]["stepscore"]["family"], "value-head");
    let want = case["step_scores"].as_array().unwrap();
    let got = scored["steps"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        let (g, w) = (g["score"].as_f64().unwrap(), w.as_f64().unwrap());
        assert!((g - w).abs() < 1e-4, "{g} vs {w}");
    }
    // The output feeds straight into `aggregate`.
    let agg = stepscore(&["aggregate", "--output", "jsonl"], Some(&out.stdout));
    assert!(agg.status.success(), "stderr: {}", text(&agg.stderr));
}

/// A PRM fixture's reference.json (scripts/reference/prm_reference.py).
fn reference_json(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json parses")
}

#[test]
fn a_generative_verifier_writes_a_critique_and_scores_its_verdicts() {
    // The tiny arranged verifier (scripts/reference/prm_reference.py): the critique,
    // its verdicts and why writing stopped land in the metadata; the step
    // without a verdict is unscored, and the table shows each verdict.
    let dir = fixture("prm/generative-tiny");
    let reference = reference_json(&dir);
    let case = &reference["cases"][2];
    let row = serde_json::json!({"id": "g1", "problem": case["problem"], "steps": case["steps"]});
    let model = dir.to_str().unwrap();
    let args = [
        "score",
        "--model",
        model,
        "--family",
        "generative",
        "--output",
        "jsonl",
    ];
    let out = stepscore(&args, Some(row.to_string().as_bytes()));
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let scored: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON trace");
    let info = &scored["metadata"]["stepscore"];
    assert_eq!(info["family"], "generative");
    assert_eq!(info["critique"]["text"], case["critique"]);
    assert_eq!(info["critique"]["verdicts"], case["verdicts"]);
    assert_eq!(info["critique"]["stop_reason"], "end-of-turn");
    let steps = scored["steps"].as_array().unwrap();
    for (i, want) in case["step_scores"].as_array().unwrap().iter().enumerate() {
        match want.as_f64() {
            Some(w) => {
                let g = steps[i]["score"].as_f64().unwrap();
                assert!((g - w).abs() < 1e-4, "step {i}: {g} vs {w}");
            }
            None => assert!(
                steps[i].get("score").is_none_or(|v| v.is_null()),
                "{scored}"
            ),
        }
    }
    let table = stepscore(
        &[
            "score",
            "--model",
            model,
            "--family",
            "generative",
            "--output",
            "table",
        ],
        Some(row.to_string().as_bytes()),
    );
    assert!(table.status.success(), "stderr: {}", text(&table.stderr));
    let shown = text(&table.stdout);
    assert!(shown.contains("critique's verdict: incorrect"), "{shown}");
    assert!(
        shown.contains("critique's verdict: none (it ended before this step)"),
        "{shown}"
    );
}

#[test]
fn an_outcome_reward_model_scores_the_last_step_and_every_command_reads_it() {
    // The tiny sequence-classification reward model (scripts/reference/prm_reference.py):
    // one score on the last step, the logit in the metadata; aggregate, eval
    // and the table read that one score.
    let dir = fixture("prm/outcome-tiny");
    let reference = reference_json(&dir);
    let case = &reference["cases"][0];
    let row = serde_json::json!({"id": "o1", "problem": case["problem"], "steps": case["steps"], "label": 2});
    let model = dir.to_str().unwrap();
    let out = stepscore(
        &["score", "--model", model, "--output", "jsonl"],
        Some(row.to_string().as_bytes()),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let scored: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON trace");
    let info = &scored["metadata"]["stepscore"];
    assert_eq!(info["family"], "outcome");
    let logit = info["outcome_logit"].as_f64().unwrap();
    assert!(
        (logit - case["logit"].as_f64().unwrap()).abs() < 1e-4,
        "{logit}"
    );
    let steps = scored["steps"].as_array().unwrap();
    assert!(
        steps[..2]
            .iter()
            .all(|s| s.get("score").is_none_or(|v| v.is_null())),
        "{scored}"
    );
    let last = steps[2]["score"].as_f64().unwrap();
    assert!((last - case["step_scores"][2].as_f64().unwrap()).abs() < 1e-4);
    // aggregate: the one score, its first error at the last step when flagged.
    let agg = stepscore(
        &["aggregate", "--output", "jsonl", "--threshold", "0.9"],
        Some(&out.stdout),
    );
    assert!(agg.status.success(), "stderr: {}", text(&agg.stderr));
    let a: serde_json::Value = serde_json::from_slice(&agg.stdout).unwrap();
    assert_eq!(a["aggregates"]["min"].as_f64(), Some(last));
    assert_eq!(a["first_error"], 2);
    // eval: the labelled error is the last step, flagged at 0.9.
    let ev = stepscore(
        &["eval", "--output", "jsonl", "--threshold", "0.9"],
        Some(&out.stdout),
    );
    assert!(ev.status.success(), "stderr: {}", text(&ev.stderr));
    let e: serde_json::Value = serde_json::from_slice(&ev.stdout).unwrap();
    assert_eq!(e["processbench"]["overall"]["acc_erroneous"], 1.0, "{e}");
    // The table says whose score it is.
    let table = stepscore(
        &["score", "--model", model, "--output", "table"],
        Some(row.to_string().as_bytes()),
    );
    let shown = text(&table.stdout);
    assert!(shown.contains("the solution's score; logit"), "{shown}");
}

#[test]
fn score_rejects_traces_over_the_limit_unless_truncating() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny");
    let row = r#"{"problem":"What is 2 + 3?","steps":["2 + 3 = 5.","So the answer is 5.","Check: 5 - 3 = 2."]}"#;
    let strict = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--max-tokens",
            "30",
            "--output",
            "jsonl",
        ],
        Some(row.as_bytes()),
    );
    assert_eq!(strict.status.code(), Some(1));
    assert!(
        text(&strict.stderr).contains("over the limit of 30"),
        "{}",
        text(&strict.stderr)
    );
    let lenient = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--max-tokens",
            "30",
            "--truncate",
            "--output",
            "jsonl",
        ],
        Some(row.as_bytes()),
    );
    assert!(
        lenient.status.success(),
        "stderr: {}",
        text(&lenient.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&lenient.stdout).unwrap();
    assert!(
        v["metadata"]["stepscore"]["truncated_steps"]
            .as_u64()
            .unwrap()
            >= 1
    );
}

#[test]
fn score_with_a_broken_model_file_is_a_clear_error() {
    let tmp = std::env::temp_dir().join(format!("stepscore-bad-{}.gguf", std::process::id()));
    std::fs::write(&tmp, b"GGUF\x03\x00\x00\x00truncated").unwrap();
    let out = stepscore(
        &["score", "--model", tmp.to_str().unwrap()],
        Some(GOOD.as_bytes()),
    );
    let _ = std::fs::remove_file(&tmp);
    // A malformed model file is a model error (exit 4 in --help), not a usage error.
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("cannot load model"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn gzipped_inputs_stream() {
    let data =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/gsm_symbolic_val.jsonl.gz");
    let out = stepscore(
        &["segment", data.to_str().unwrap(), "--output", "jsonl"],
        None,
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    // data/README.md: the validation split has 500 rows.
    assert_eq!(text(&out.stdout).lines().count(), 500);
}

#[cfg(not(feature = "train"))]
#[test]
fn train_without_the_trainer_says_how_to_build_it() {
    let (code, err) = bad(
        &["train", "--out", "/tmp/never-written.safetensors", "-"],
        b"",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--features train"), "{err}");
}

#[test]
fn doctor_lists_adapters_and_the_auto_choice_as_json() {
    let out = stepscore(&["doctor", "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("doctor --json is JSON");
    assert_eq!(
        v["architectures"],
        serde_json::json!(["Llama", "Qwen2", "Qwen3", "Mistral", "Gemma 3"])
    );
    assert_eq!(
        v["families"],
        serde_json::json!([
            "score-head",
            "value-head",
            "math-shepherd",
            "rlhflow",
            "confidence",
            "outcome",
            "generative"
        ])
    );
    // The CPU kernels this process runs, as STEPSCORE_SIMD names them.
    let kernels = v["cpu_kernels"].as_str().unwrap_or_default();
    let arch_sets: &[&str] = match std::env::consts::ARCH {
        "x86_64" => &["portable", "avx2", "avxvnni", "avx512"],
        "aarch64" => &["portable", "neon", "neondot"],
        _ => &["portable"],
    };
    assert!(arch_sets.contains(&kernels), "{v}");
    // Which CPU: CPUID's vendor and family on x86-64, null elsewhere.
    if std::env::consts::ARCH == "x86_64" {
        assert!(
            v["cpu"]["vendor"].as_str().is_some_and(|s| !s.is_empty()),
            "{v}"
        );
        assert!(v["cpu"]["family"].as_u64().unwrap_or(0) > 0, "{v}");
    } else {
        assert!(v["cpu"].is_null(), "{v}");
    }
    let adapters = v["adapters"].as_array().expect("adapters array");
    for a in adapters {
        assert!(a["name"].is_string() && a["backend"].is_string(), "{a}");
        // How the engine would read F16 weights there, from shader-f16.
        let path = a["float16_path"].as_str().unwrap_or_default();
        let want = if a["shader_f16"] == true {
            "read as f16"
        } else {
            "read as u32 words"
        };
        assert!(path.contains(want), "{a}");
        assert!(
            a["max_storage_buffer_binding_size"].as_u64().unwrap_or(0) > 0,
            "{a}"
        );
    }
    let auto = &v["auto"];
    let chosen = auto["backend"].as_str().unwrap_or_default();
    assert!(chosen == "gpu" || chosen == "cpu", "{auto}");
    assert!(
        !auto["reason"].as_str().unwrap_or_default().is_empty(),
        "{auto}"
    );
    // Software rasterizers (llvmpipe, SwiftShader) never win `auto`.
    if adapters
        .iter()
        .all(|a| a["device_type"] == "CPU (software)")
    {
        assert_eq!(chosen, "cpu", "{auto}");
    }
}

/// `--token-logprobs` writes each scored step's tokens: byte spans that tile
/// the step text, with log-probs whose mean is the confidence statistic.
#[test]
fn token_logprobs_come_with_spans_in_the_step_text() {
    let dir = fixture("prm/confidence-tiny");
    let row = r#"{"id": "t", "problem": "What is 2 + 3?", "steps": ["2 + 3 = 5.", "So the answer is 5."]}"#;
    let out = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--output",
            "jsonl",
            "--token-logprobs",
        ],
        Some(row.as_bytes()),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let info = &v["metadata"]["stepscore"];
    let steps = info["token_logprobs"].as_array().expect("token_logprobs");
    assert_eq!(steps.len(), 2);
    for (i, (tokens, text)) in steps
        .iter()
        .zip(["2 + 3 = 5.", "So the answer is 5."])
        .enumerate()
    {
        let tokens = tokens.as_array().unwrap();
        let mut at = 0;
        let mut sum = 0.0;
        for t in tokens {
            let (a, b) = (
                t["start"].as_u64().unwrap() as usize,
                t["end"].as_u64().unwrap() as usize,
            );
            assert!(a >= at && b >= a && b <= text.len(), "{t} in {text:?}");
            at = b;
            sum += t["logprob"].as_f64().unwrap();
        }
        assert_eq!(at, text.len());
        let mean = info["confidence"][i]["mean_logprob"].as_f64().unwrap();
        assert!((sum / tokens.len() as f64 - mean).abs() < 1e-9, "step {i}");
    }
    // Without the flag the output stays as it was.
    let plain = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--output",
            "jsonl",
        ],
        Some(row.as_bytes()),
    );
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(v["metadata"]["stepscore"].get("token_logprobs").is_none());
}

/// `--verdict` on a model that cannot give one (no chat template): the
/// scores are still written, the missing verdict is named on stderr, and the
/// run exits 1 as for any failed record. (The verdict's values are checked
/// against llama.cpp in the core's tests/verdict.rs.)
#[test]
fn score_verdict_without_a_chat_template_keeps_the_scores() {
    let dir = fixture("prm/confidence-tiny");
    let row = r#"{"id": "t", "problem": "What is 2 + 3?", "steps": ["2 + 3 = 5.", "So the answer is 5."]}"#;
    let out = stepscore(
        &[
            "score",
            "--model",
            dir.to_str().unwrap(),
            "--output",
            "jsonl",
            "--verdict",
        ],
        Some(row.as_bytes()),
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("verdict") && err.contains("chat template"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["steps"][1]["score"].is_number(), "{v}");
    assert!(v["metadata"]["stepscore"].get("verdict").is_none(), "{v}");
}

/// `bench --candidates`: N candidates on a tiny PRM, timed one by one and
/// with the shared prompt, after checking the two give the same scores; the
/// JSON names the shape it ran.
#[test]
fn bench_candidates_times_both_ways_on_the_same_scores() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/skywork-prm-tiny");
    let out = stepscore(
        &[
            "bench",
            "--candidates",
            "3",
            "--model",
            dir.to_str().unwrap(),
            "--family",
            "value-head",
            "--candidate-prompt",
            "40",
            "--candidate-tokens",
            "30",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--json",
        ],
        None,
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["candidates"], 3, "{v}");
    assert_eq!(v["family"], "value-head", "{v}");
    assert!(v["prompt_tokens"].as_u64().unwrap() >= 40, "{v}");
    let sols = v["solution_tokens"].as_array().unwrap();
    assert_eq!(sols.len(), 3, "{v}");
    assert!(sols.iter().all(|t| t.as_u64().unwrap() >= 30), "{v}");
    assert_eq!(v["scores_identical"], true, "{v}");
    assert!(v["ratio_median"].as_f64().unwrap() > 0.0, "{v}");

    let zero = stepscore(
        &[
            "bench",
            "--candidates",
            "0",
            "--model",
            dir.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(zero.status.code(), Some(2), "{}", text(&zero.stderr));
}

/// `bench --synthetic`: the smallest shape runs end to end on the CPU
/// engine without any model file, says its memory up front, and reports the
/// shape's real dimensions; bad shapes and `--model` with it are usage errors.
#[test]
fn bench_synthetic_runs_without_a_model_file() {
    let out = stepscore(
        &[
            "bench",
            "--synthetic",
            "smollm2-135m",
            "--backend",
            "cpu",
            // One token per byte here (the synthetic vocabulary has no
            // merges): the problem text alone is over 200.
            "--tokens",
            "300",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--append-prefix",
            "0",
            "--json",
        ],
        None,
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stderr: {stderr}");
    assert!(
        stderr.contains("smollm2-135m (30 layers, d 576, 9 / 3 heads")
            && stderr.contains("GiB of random weights in memory"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["synthetic"], "smollm2-135m", "{v}");
    assert_eq!(v["vocab_size"], 49152, "{v}");
    assert_eq!(v["tokens"], 300, "{v}");
    assert!(v["gpu"]["skipped"].is_string(), "{v}");
    assert_eq!(v["synthetic_weights"], "real", "{v}");

    // `--weights` names the formats it takes, and needs `--synthetic`.
    let bad = stepscore(&["bench", "--synthetic", "7b", "--weights", "q4"], None);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("real, f16, bf16"),
        "{}",
        text(&bad.stderr)
    );
    let alone = stepscore(&["bench", "--weights", "f16"], None);
    assert_eq!(alone.status.code(), Some(2), "{}", text(&alone.stderr));

    let bad = stepscore(&["bench", "--synthetic", "13b"], None);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    assert!(
        text(&bad.stderr).contains("qwen2.5-1.5b"),
        "{}",
        text(&bad.stderr)
    );
    let both = stepscore(&["bench", "--synthetic", "7b", "--model", "x.gguf"], None);
    assert_eq!(both.status.code(), Some(2), "{}", text(&both.stderr));
}

/// `stepscore search --keep-all`: one line per good problem with every
/// candidate (pruned beams too), each answer checked against the row's
/// reference; a bad row is named on stderr and the good ones still run;
/// options no search can use are refused before a model loads.
#[test]
fn search_keeps_every_candidate_with_its_answer_checked() {
    let bad = stepscore(
        &[
            "search",
            "--method",
            "dvts",
            "--n",
            "3",
            "--beam-width",
            "2",
        ],
        Some(b"{\"problem\": \"1 + 1?\"}\n"),
    );
    assert_eq!(bad.status.code(), Some(2), "stderr: {}", text(&bad.stderr));
    assert!(text(&bad.stderr).contains("multiple of beam_width"));

    let name = stepscore::catalog::FAST_PRM;
    if stepscore::testing::find_catalog_model(name).is_none() {
        eprintln!("SKIPPED: {name} is not fetched (run `stepscore fetch {name}`)");
        return;
    }
    let input = concat!(
        "{\"id\": \"a\", \"problem\": \"What is 6 times 7?\", \"answer\": \"42\"}\n",
        "{\"id\": \"b\"}\n",
        "{\"id\": \"c\", \"question\": \"What is 10 minus 3?\", \"answer\": \"#### 7\"}\n",
    );
    let out = stepscore(
        &[
            "search",
            "--model",
            name,
            "--backend",
            "cpu",
            "--method",
            "beam",
            "--n",
            "4",
            "--beam-width",
            "2",
            "--max-steps",
            "2",
            "--max-new-tokens",
            "24",
            "--keep-all",
        ],
        Some(input.as_bytes()),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("line 2, id `b`: no `problem`"), "{stderr}");
    let rows: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["reference"], "7");
    for row in &rows {
        let candidates = row["candidates"].as_array().unwrap();
        // Beam search with N = 4 makes 4 beams, then forks survivors.
        assert!(candidates.len() >= 4, "{row}");
        for c in candidates {
            let answer = c["answer"].as_str();
            let reference = row["reference"].as_str().unwrap();
            match answer {
                Some(a) => assert_eq!(
                    c["correct"],
                    stepscore::answer::answers_equal(a, reference),
                    "{c}"
                ),
                None => assert_eq!(c["correct"], false, "{c}"),
            }
        }
        let finalists = row["finalists"].as_array().unwrap();
        assert!(finalists.contains(&row["chosen"]), "{row}");
        for choice in ["best", "majority", "weighted"] {
            assert!(row["choices"].get(choice).is_some(), "{row}");
        }
        assert!(row["tokens_generated"].as_u64().unwrap() > 0);
    }
}
