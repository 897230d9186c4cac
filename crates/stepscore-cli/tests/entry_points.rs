//! Issue 44: every entry point as strict as the strictest. Each test names
//! the defect (D2, D4, ...) it covers and failed on the binary before the
//! change (docs/ROBUSTNESS.md has the table). The tiny Skywork-layout
//! fixture is the model; no timing is asserted, waits are upper bounds on
//! liveness.
//!
//! `STEPSCORE_TEST_BIN` points the tests at another build of the binary.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

fn bin() -> PathBuf {
    std::env::var_os("STEPSCORE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_stepscore")))
}

fn tiny_model() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/prm/skywork-prm-tiny")
        .display()
        .to_string()
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stepscore-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs the binary with `args` and `stdin`; a run past `limit` is killed
/// and reported as hung (`None`).
fn run_for(args: &[&str], stdin: &[u8], limit: Duration) -> Option<Output> {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stepscore");
    let mut pipe = child.stdin.take().unwrap();
    let _ = pipe.write_all(stdin);
    drop(pipe);
    // Drain both pipes on threads so a chatty child never blocks.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|status| Output {
        status,
        stdout,
        stderr,
    })
}

fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_for(args, stdin, Duration::from_secs(300)).expect("stepscore hung")
}

/// The same hostile rows for every command that reads JSONL: a 24-digit id
/// and a 23-digit answer, duplicate keys, an answer no float holds, a line
/// that is not UTF-8 and a line over the record limit between good lines.
fn hostile_file(dir: &Path) -> PathBuf {
    let mut rows: Vec<Vec<u8>> = vec![
        br#"{"id": 123456789012345678912345, "problem": "What is 2 + 3?", "steps": ["2 + 3 = 5."], "answer": 12345678901234567890123}"#.to_vec(),
        br#"{"id": "dup", "problem": "first", "problem": "SECOND", "steps": ["a"], "answer": "1", "answer": "2"}"#.to_vec(),
        br#"{"id": "c", "problem": "What is 1 + 1?", "steps": ["1 + 1 = 2."], "answer": 0.1000000000000000000001}"#.to_vec(),
        b"{\"id\": \"utf8\", \"problem\": \"caf\xe9\", \"steps\": [\"a\"]}".to_vec(),
    ];
    let long = format!(
        r#"{{"id": "long", "problem": "{}", "steps": ["a"]}}"#,
        "x".repeat(400)
    );
    rows.push(long.into_bytes());
    rows.push(br#"{"id": "last", "problem": "What is 4 + 4?", "steps": ["4 + 4 = 8."]}"#.to_vec());
    let path = dir.join("hostile.jsonl");
    std::fs::write(&path, rows.join(&b'\n')).unwrap();
    path
}

/// D5, D6, D7, D2: `generate` and `search` read JSONL through the reader
/// `score` uses. Before: big ids and answers came back as floats
/// (`1.2345678901234569e+23`), duplicate keys were taken (the last one),
/// the invalid-UTF-8 line ended the run with exit 3 losing the good lines
/// after it, and lines had no size limit. Now all three commands keep the
/// same good rows (ids and answers as written), report the same bad lines
/// and exit 1.
#[test]
fn generate_search_and_score_read_the_same_hostile_file() {
    let dir = scratch("hostile");
    let file = hostile_file(&dir);
    let file = file.to_str().unwrap();
    let model = tiny_model();
    let common = ["--model", &model, "--backend", "cpu", "--threads", "1"];
    let limit = ["--max-line-bytes", "300"];
    let writing = ["--raw", "--max-new-tokens", "3"];
    let mut score = vec!["score", file, "--output", "jsonl"];
    score.extend(common.iter().chain(&limit));
    let mut generate = vec!["generate", file];
    generate.extend(common.iter().chain(&limit).chain(&writing));
    let mut search = vec!["search", file, "--n", "2"];
    search.extend(common.iter().chain(&limit).chain(&writing));
    let mut answers = Vec::new();
    for args in [score, generate, search] {
        let out = run(&args, b"");
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        let what = args[0];
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        let rows: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ids: Vec<&Value> = rows.iter().map(|r| &r["id"]).collect();
        assert_eq!(
            ids,
            [
                &json!("123456789012345678912345"),
                &json!("c"),
                &json!("last")
            ],
            "{what}: {stdout}"
        );
        for says in [
            "line 2, field `problem`: duplicate key `problem`",
            "line 4: invalid UTF-8 at byte offset",
            "line 5: line of",
            "longer than the 300-byte limit",
        ] {
            assert!(stderr.contains(says), "{what}: no {says:?} in {stderr}");
        }
        // Each line is reported once, by its place in the file.
        for line in ["line 1", "line 3", "line 6"] {
            assert!(
                !stderr.contains(&format!("{file} {line}")),
                "{what}: {stderr}"
            );
        }
        match what {
            "score" => answers.push(
                rows.iter()
                    .map(|r| r["final_answer"].clone())
                    .collect::<Vec<_>>(),
            ),
            "search" => answers.push(rows.iter().map(|r| r["reference"].clone()).collect()),
            _ => {}
        }
    }
    let want = vec![
        json!("12345678901234567890123"),
        json!("0.1000000000000000000001"),
        Value::Null,
    ];
    assert_eq!(answers, [want.clone(), want]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// D8: `--temperature 1e-50` is 0 in f32; the probabilities were NaN and
/// the least likely candidate was drawn. Below the floor (1e-4) sampling
/// is greedy: the same tokens as `--temperature 0`.
#[test]
fn a_tiny_temperature_gives_the_greedy_tokens() {
    let model = tiny_model();
    let tokens = |t: &str| {
        let out = run(
            &[
                "generate",
                "--model",
                &model,
                "--backend",
                "cpu",
                "--threads",
                "1",
                "--raw",
                "--max-new-tokens",
                "8",
                "--temperature",
                t,
            ],
            br#"{"problem": "What is 2 + 3?"}"#,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let row: Value = serde_json::from_slice(&out.stdout).unwrap();
        row["tokens"].clone()
    };
    let greedy = tokens("0");
    assert!(greedy.as_array().is_some_and(|t| !t.is_empty()), "{greedy}");
    assert_eq!(tokens("1e-50"), greedy);
    assert_eq!(tokens("0.00005"), greedy);
}

/// D15: verify-stream took the last of duplicate keys in an SSE chunk
/// (`"content":"2 + 3 = 5.\n\n","content":"EVIL"` scored "EVIL", exit 0). The
/// chunk is now read by the trace reader's parser: the key is named, exit 1.
#[test]
fn a_stream_chunk_with_duplicate_keys_is_refused() {
    let model = tiny_model();
    let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"2 + 3 = 5.\\n\\n\",\"content\":\"EVIL\"}}]}\n\n\
                   data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let out = run(&["verify-stream", "--problem", "p", "-m", &model], stream);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("<stdin> line 1, field `choices[0].delta.content`: duplicate key"),
        "{err}"
    );
    assert!(!text(&out.stdout).contains("EVIL"), "{}", text(&out.stdout));
}
