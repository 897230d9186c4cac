//! `stepscore verify-stream` end to end: a stream recorded from
//! llama-cpp-python's server (tests/fixtures/stream/) read from a file and
//! replayed by a local stand-in server in awkward pieces, its step scores
//! checked against `stepscore score` on the same steps; a low step dropping
//! the connection; a server's failures; and, where llama-cpp-python's
//! server is installed, the real server generating with SmolLM2 while the
//! SmolLM2 PRM verifies.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use stepscore::segment::Segmenter;

use crate::common;
use common::{repo, tiny_model};

const PROBLEM: &str = "Tom has 3 apples and buys 5 more. Then he gives 2 away. How many apples does he have? Think step by step.";

fn recording() -> Vec<u8> {
    std::fs::read(repo().join("tests/fixtures/stream/llama_cpp_python_smollm2.sse")).unwrap()
}

fn stepscore(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stepscore"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stepscore");
    let mut pipe = child.stdin.take().unwrap();
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The recording's generated text: its chunks' `delta.content`, concatenated.
fn recorded_text() -> String {
    String::from_utf8(recording())
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            let v: Value = serde_json::from_str(d).unwrap();
            v["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

/// `stepscore score`'s step scores for `steps` (the whole-trace path, no session).
fn batch_scores(model: &str, steps: &[String]) -> Vec<f64> {
    let row = json!({"problem": PROBLEM, "steps": steps}).to_string();
    let out = stepscore(
        &[
            "score",
            "-m",
            model,
            "--backend",
            "cpu",
            "--output",
            "jsonl",
        ],
        row.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("no steps in {v}"))
        .iter()
        .map(|s| s["score"].as_f64().unwrap())
        .collect()
}

/// What the stand-in server saw.
struct Served {
    request: Value,
    /// A write failed: the client had closed the connection.
    client_hung_up: bool,
}

/// A one-request HTTP server on a free local port answering `status` with
/// `content_type` and `pieces` as chunks, written one at a time; then, when
/// `endless` is given, that chunk again and again (up to 2,000 times) until
/// the client hangs up, and `tail`.
fn stand_in(
    status: &'static str,
    content_type: &'static str,
    pieces: Vec<Vec<u8>>,
    endless: Option<Vec<u8>>,
    tail: Vec<u8>,
) -> (String, JoinHandle<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/v1/chat/completions",
        listener.local_addr().unwrap()
    );
    let handle = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let request = read_request(&mut conn);
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        let mut hung_up = conn.write_all(head.as_bytes()).is_err();
        let chunk = |conn: &mut TcpStream, data: &[u8]| -> bool {
            let mut framed = format!("{:x}\r\n", data.len()).into_bytes();
            framed.extend_from_slice(data);
            framed.extend_from_slice(b"\r\n");
            let ok = conn.write_all(&framed).and_then(|()| conn.flush()).is_ok();
            std::thread::sleep(Duration::from_millis(1));
            ok
        };
        for p in &pieces {
            hung_up = hung_up || !chunk(&mut conn, p);
        }
        if let Some(e) = endless {
            for _ in 0..2000 {
                if hung_up {
                    break;
                }
                hung_up = !chunk(&mut conn, &e);
            }
        }
        if !hung_up {
            hung_up = !chunk(&mut conn, &tail) || conn.write_all(b"0\r\n\r\n").is_err();
        }
        Served {
            request,
            client_hung_up: hung_up,
        }
    });
    (url, handle)
}

/// The JSON body of an HTTP request.
fn read_request(conn: &mut TcpStream) -> Value {
    let mut reader = BufReader::new(conn);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// The recording cut every 7 bytes: pieces end mid-line and mid-event.
fn pieces_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.chunks(7).map(<[u8]>::to_vec).collect()
}

fn steps_of(evs: &[Value]) -> Vec<(String, f64)> {
    evs.iter()
        .filter(|e| e["event"] == "step")
        .map(|e| {
            (
                e["text"].as_str().unwrap().to_string(),
                e["score"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn recorded_stream_is_scored_step_by_step_like_score() {
    let model = tiny_model();
    let want_steps: Vec<String> = Segmenter::BlankLine
        .segment(&recorded_text())
        .into_iter()
        .map(|s| s.text)
        .collect();
    assert_eq!(want_steps.len(), 4);
    let want_scores = batch_scores(&model, &want_steps);

    // From a file, and from the stand-in server in 7-byte pieces.
    let file = repo().join("tests/fixtures/stream/llama_cpp_python_smollm2.sse");
    let from_file = stepscore(
        &[
            "verify-stream",
            file.to_str().unwrap(),
            "--problem",
            PROBLEM,
            "-m",
            &model,
            "--backend",
            "cpu",
            "--no-stop",
        ],
        b"",
    );
    let (url, server) = stand_in(
        "200 OK",
        "text/event-stream",
        pieces_of(&recording()),
        None,
        Vec::new(),
    );
    let from_server = stepscore(
        &[
            "verify-stream",
            "--url",
            &url,
            "--problem",
            PROBLEM,
            "-m",
            &model,
            "--backend",
            "cpu",
            "--no-stop",
            "--max-new-tokens",
            "200",
            "--temperature",
            "0",
        ],
        b"",
    );
    let served = server.join().unwrap();
    assert_eq!(served.request["stream"], true);
    assert_eq!(served.request["max_tokens"], 200);
    assert_eq!(served.request["temperature"], 0.0);
    assert_eq!(
        served.request["messages"],
        json!([{"role": "user", "content": PROBLEM}])
    );
    for out in [&from_file, &from_server] {
        assert!(out.status.success(), "{}", stderr(out));
        let evs = events(out);
        let got = steps_of(&evs);
        assert_eq!(
            got.iter().map(|(t, _)| t).collect::<Vec<_>>(),
            want_steps.iter().collect::<Vec<_>>()
        );
        for ((t, s), w) in got.iter().zip(&want_scores) {
            // The session's cached prefix against one whole-trace forward.
            assert!((s - w).abs() <= 1e-5, "{t}: {s} streamed vs {w} scored");
        }
        let last = evs.last().unwrap();
        assert_eq!(last["event"], "finished", "{last}");
        assert_eq!(
            (&last["finish_reason"], &last["done"], &last["steps"]),
            (&json!("stop"), &json!(true), &json!(4))
        );
    }
}

#[test]
fn a_step_below_the_threshold_drops_the_connection() {
    let model = tiny_model();
    let steps: Vec<String> = Segmenter::BlankLine
        .segment(&recorded_text())
        .into_iter()
        .map(|s| s.text)
        .collect();
    let scores = batch_scores(&model, &steps);
    // Just above the lowest score: the stream stops at that step.
    let (low, min) = scores
        .iter()
        .copied()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let threshold = format!("{}", min + 1e-9);
    // The recording without its end, then text that never ends: only a
    // client that hangs up stops it.
    let body = String::from_utf8(recording()).unwrap();
    let end = body.rfind("data: {\"id\"").unwrap();
    let content_chunk = |text: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
        )
        .into_bytes()
    };
    let (url, server) = stand_in(
        "200 OK",
        "text/event-stream",
        pieces_of(&body.as_bytes()[..end]),
        Some(content_chunk("\n\nAnd again.")),
        b"data: [DONE]\n\n".to_vec(),
    );
    let out = stepscore(
        &[
            "verify-stream",
            "--url",
            &url,
            "--problem",
            PROBLEM,
            "-m",
            &model,
            "--backend",
            "cpu",
            "--stop-below",
            &threshold,
        ],
        b"",
    );
    let served = server.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let evs = events(&out);
    let last = evs.last().unwrap();
    assert_eq!(last["event"], "stopped", "{evs:?}");
    assert_eq!(last["step"], low);
    assert_eq!(steps_of(&evs).len(), low + 1);
    assert!(stderr(&out).contains(&format!("step {low} scored")));
    assert!(
        served.client_hung_up,
        "the server wrote its whole endless stream: the client never closed the connection"
    );
}

#[test]
fn server_failures_are_errors_naming_what_happened() {
    let model = tiny_model();
    let run = |url: &str| {
        stepscore(
            &[
                "verify-stream",
                "--url",
                url,
                "--problem",
                "p",
                "-m",
                &model,
            ],
            b"",
        )
    };
    // An error event after a step: the step is out, then the error names the line.
    let body = b"data: {\"choices\":[{\"delta\":{\"content\":\"One.\\n\\nTwo\"}}]}\n\n\
                 data: {\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}\n\n\
                 data: [DONE]\n\n";
    let (url, server) = stand_in(
        "200 OK",
        "text/event-stream",
        vec![body.to_vec()],
        None,
        vec![],
    );
    let out = run(&url);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(steps_of(&events(&out)).len(), 1);
    assert!(
        stderr(&out).contains(&format!(
            "{url} line 3, field `error`: the server sent an error: boom (type `server_error`, code 500)"
        )),
        "{}",
        stderr(&out)
    );
    // An HTTP error status, with the server's message.
    let (url, server) = stand_in(
        "400 Bad Request",
        "application/json",
        vec![br#"{"error":{"message":"bad temperature"}}"#.to_vec()],
        None,
        vec![],
    );
    let out = run(&url);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out)
        .contains("the server answered 400: {\"error\":{\"message\":\"bad temperature\"}}"));
    // A whole JSON answer instead of a stream.
    let (url, server) = stand_in(
        "200 OK",
        "application/json",
        vec![br#"{"choices":[{"message":{"content":"x"}}]}"#.to_vec()],
        None,
        vec![],
    );
    let out = run(&url);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("not an event stream"),
        "{}",
        stderr(&out)
    );
    // A connection closed mid-stream.
    let (url, server) = stand_in(
        "200 OK",
        "text/event-stream",
        vec![b"data: {\"choices\":[{\"delta\":{\"content\":\"One.\\n\\nTw".to_vec()],
        None,
        vec![],
    );
    let out = run(&url);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not JSON"), "{}", stderr(&out));
}

/// The real thing: llama-cpp-python's server (`python -m llama_cpp.server`,
/// from $LLAMA_VENV, default /work/llama-venv) generating with SmolLM2 while
/// the SmolLM2 PRM verifies. Skipped, saying why, where that server or the
/// models are not installed (CI builds no llama.cpp).
#[test]
fn real_llama_cpp_python_server() {
    let venv = std::env::var("LLAMA_VENV").unwrap_or_else(|_| "/work/llama-venv".into());
    let python = PathBuf::from(&venv).join("bin/python");
    let importable = Command::new(&python)
        .args(["-c", "import llama_cpp.server.app"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !importable {
        eprintln!(
            "SKIPPED: llama_cpp.server is not importable from {} (pip install \
             'llama-cpp-python[server]' into $LLAMA_VENV)",
            python.display()
        );
        return;
    }
    let (Some(gguf), Some(_)) = (
        stepscore::testing::find_smollm2_gguf(),
        stepscore::testing::find_catalog_model("stepscore-prm-smollm2"),
    ) else {
        eprintln!("SKIPPED: SmolLM2 is not fetched (stepscore fetch stepscore-prm-smollm2)");
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let log = std::env::temp_dir().join(format!("stepscore-llama-server-{port}.log"));
    let mut server = ServerGuard(
        log.clone(),
        Command::new(&python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(&gguf)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--n_ctx", "2048", "--n_threads", "1"])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama_cpp.server"),
    );
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "llama_cpp.server did not listen"
        );
        assert!(
            server.1.try_wait().unwrap().is_none(),
            "llama_cpp.server exited"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let verify = |extra: &[&str]| {
        let mut args = vec![
            "verify-stream",
            "--url",
            &url,
            "--problem",
            PROBLEM,
            "-m",
            "stepscore-prm-smollm2",
            "--backend",
            "cpu",
            "--temperature",
            "0",
            "--max-new-tokens",
            "200",
            "--text",
        ];
        args.extend_from_slice(extra);
        stepscore(&args, b"")
    };
    let full = verify(&["--no-stop"]);
    assert!(full.status.success(), "{}", stderr(&full));
    let evs = events(&full);
    let text: String = evs
        .iter()
        .filter(|e| e["event"] == "text")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    let steps = steps_of(&evs);
    let want: Vec<String> = Segmenter::BlankLine
        .segment(&text)
        .into_iter()
        .map(|s| s.text)
        .collect();
    assert_eq!(
        steps.iter().map(|s| &s.0).collect::<Vec<_>>(),
        want.iter().collect::<Vec<_>>()
    );
    assert!(steps.len() >= 2, "SmolLM2 wrote one step: {text:?}");
    assert!(steps.iter().all(|(_, s)| (0.0..=1.0).contains(s)));
    assert!(evs.last().unwrap()["finish_reason"].is_string(), "{evs:?}");

    // Stop at the lowest step before the last (greedy: the same text again),
    // and see the server notice the dropped connection.
    let before_last = &steps[..steps.len() - 1];
    let (low, min) = before_last
        .iter()
        .map(|s| s.1)
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    let stopped = verify(&["--stop-below", &format!("{}", min + 1e-9)]);
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    let evs = events(&stopped);
    assert_eq!(evs.last().unwrap()["event"], "stopped", "{evs:?}");
    assert_eq!(evs.last().unwrap()["step"], low);
    assert!(evs.iter().all(|e| e["event"] != "finished"));
    let started = Instant::now();
    loop {
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        if seen.contains("Disconnected from client") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the server never saw the client leave:\n{seen}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kills the server it holds and removes its log when the test ends, however it ends.
struct ServerGuard(PathBuf, std::process::Child);

impl Drop for ServerGuard {
    fn drop(&mut self) {
        let _ = self.1.kill();
        let _ = self.1.wait();
        let _ = std::fs::remove_file(&self.0);
    }
}
