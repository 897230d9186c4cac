//! `stepscore serve` against hostile clients (issue 23's server items and
//! issue 22 item 5), over loopback with the tiny fixture model: stalled
//! clients, memory, strict request parsing, flags, Host/Origin/Content-Type,
//! JSON errors counted in /metrics, non-finite scores, the vLLM pooling
//! route and bearer auth. Each test failed on the server before this work.
//!
//! No timing is asserted; waits are generous upper bounds on liveness (a
//! server that hangs fails, a slow machine does not).
//!
//! `STEPSCORE_TEST_BIN` points the tests at another build of the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common;
use common::{bin, tiny_model};

struct Server {
    child: Child,
    addr: SocketAddr,
    /// stderr lines after the "serving on" line.
    _stderr: mpsc::Receiver<String>,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        Server::start_with(Command::new(bin()), extra)
    }

    /// `cmd` runs the binary (directly, or through `sh -c` to set limits).
    fn start_with(cmd: Command, extra: &[&str]) -> Server {
        Server::start_model(cmd, &tiny_model(), extra)
    }

    fn start_model(mut cmd: Command, model: &str, extra: &[&str]) -> Server {
        let mut args = vec!["serve", "--model", model, "--threads", "1"];
        args.extend_from_slice(&["--listen", "127.0.0.1:0"]);
        args.extend_from_slice(extra);
        let mut child = cmd
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stepscore serve");
        let (tx, rx) = mpsc::channel();
        let err = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the server did not start");
            if let Some(rest) = line.split("serving on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap().parse().unwrap();
                return Server {
                    child,
                    addr,
                    _stderr: rx,
                };
            }
        }
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    fn terminate(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok);
    }

    /// Waits for the process to exit, at most `limit`.
    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(30)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Reads one whole answer (the server closes after it: `Connection: close`).
fn read_answer(s: &mut TcpStream) -> Answer {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read the answer");
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// One request with the given extra header lines; Host is the server's
/// address unless a Host line is given.
fn request(srv: &Server, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Answer {
    let mut s = connect(srv.addr);
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers
        .iter()
        .any(|h| h.to_ascii_lowercase().starts_with("host:"))
    {
        head += &format!("Host: {}\r\n", srv.host());
    }
    for h in headers {
        head += h;
        head += "\r\n";
    }
    head += &format!("Content-Length: {}\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_answer(&mut s)
}

fn post(srv: &Server, path: &str, body: &Value) -> Answer {
    request(
        srv,
        "POST",
        path,
        &["Content-Type: application/json"],
        body.to_string().as_bytes(),
    )
}

fn get(srv: &Server, path: &str) -> Answer {
    request(srv, "GET", path, &[], b"")
}

/// Item 1: after SIGTERM, a request whose headers were accepted is still
/// answered, and a client stalled mid-body is dropped at the shutdown
/// deadline instead of keeping the server alive.
#[test]
fn shutdown_answers_accepted_requests_and_drops_stalled_ones() {
    let mut srv = Server::start(&["--shutdown-timeout", "3", "--body-timeout", "300"]);
    let mut stalled = connect(srv.addr);
    let head = format!(
        "POST /v1/score_steps HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        srv.host()
    );
    stalled.write_all(head.as_bytes()).unwrap();
    let body = json!({"traces": [{"problem": "p", "steps": ["a", "b"]}]}).to_string();
    let mut late = connect(srv.addr);
    let head = format!(
        "POST /v1/score_steps HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        srv.host(),
        body.len()
    );
    late.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    srv.terminate();
    std::thread::sleep(Duration::from_millis(300));
    late.write_all(body.as_bytes()).unwrap();
    let answer = read_answer(&mut late);
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.json()["results"][0]["error"].is_null());
    let status = srv.wait_exit(Duration::from_secs(60));
    assert!(
        status.is_some(),
        "a client stalled mid-body kept the server alive past its shutdown deadline"
    );
    drop(stalled);
}

/// Item 1: 300 connections that never finish their headers, on a process
/// limited to 256 file descriptors, do not keep `/health` from answering.
#[test]
fn stalled_connections_do_not_starve_health() {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -n 256 && exec \"$0\" \"$@\"")
        .arg(bin());
    let srv = Server::start_with(cmd, &["--header-timeout", "2", "--max-connections", "200"]);
    let mut held = Vec::new();
    for _ in 0..300 {
        if let Ok(mut s) = TcpStream::connect_timeout(&srv.addr, Duration::from_secs(2)) {
            let _ = s.write_all(b"GET /health HTTP/1.1\r\nHo");
            held.push(s);
        }
    }
    let answer = get(&srv, "/health");
    assert_eq!(answer.status, 200, "{}", answer.body);
    drop(held);
}

/// Item 1: a keep-alive connection left idle is closed (the header
/// timeout covers the wait for the next request).
#[test]
fn idle_keep_alive_connection_is_closed() {
    let srv = Server::start(&["--header-timeout", "1"]);
    let mut s = connect(srv.addr);
    let req = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", srv.host());
    s.write_all(req.as_bytes()).unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // The connection stays open for another request ... until it is idle too long.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let n = s
        .read(&mut buf)
        .expect("the idle connection was never closed");
    assert_eq!(n, 0);
}

/// Item 2: request bodies held at once are bounded across connections:
/// while one body holds the budget another gets 503 `memory_busy`, and
/// is read once the budget is free.
#[test]
fn body_memory_is_bounded_across_connections() {
    let srv = Server::start(&["--max-body-bytes", "1000", "--max-body-memory", "1500"]);
    let prefix = "{\"traces\": []";
    let full = format!("{prefix}{}}}", " ".repeat(1000 - prefix.len() - 1));
    assert_eq!(full.len(), 1000);
    let mut first = connect(srv.addr);
    let head = format!(
        "POST /v1/score_steps HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: 1000\r\n\r\n{{",
        srv.host()
    );
    first.write_all(head.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let body = format!("{prefix}{}}}", " ".repeat(950 - prefix.len() - 1));
    let ct = ["Content-Type: application/json"];
    let second = request(&srv, "POST", "/v1/score_steps", &ct, body.as_bytes());
    assert_eq!(second.status, 503, "{}", second.body);
    assert_eq!(second.code(), "memory_busy");
    assert!(second.head.to_ascii_lowercase().contains("retry-after:"));
    // The first body completes; then the budget is free again.
    first.write_all(&full.as_bytes()[1..]).unwrap();
    assert_eq!(read_answer(&mut first).status, 200);
    let again = request(&srv, "POST", "/v1/score_steps", &ct, body.as_bytes());
    assert_eq!(again.status, 200, "{}", again.body);
    let over = request(
        &srv,
        "POST",
        "/v1/score_steps",
        &["Content-Type: application/json"],
        &[b' '; 1001],
    );
    assert_eq!((over.status, over.code().as_str()), (413, "body_too_large"));
}

/// Items 3 and 5: a row that is an array is that row's error (never
/// flattened, never poisoning the others); duplicate keys are refused.
#[test]
fn rows_are_read_by_the_strict_reader() {
    let srv = Server::start(&[]);
    let a = post(
        &srv,
        "/v1/score_steps",
        &json!({"traces": [[{"problem": "A", "steps": ["a"]}, {"problem": "B", "steps": ["b"]}]]}),
    );
    let r = &a.json()["results"];
    assert_eq!(r.as_array().unwrap().len(), 1);
    assert!(
        r[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected a JSON object"),
        "{r}"
    );
    let a = post(
        &srv,
        "/v1/score_steps",
        &json!({"traces": [[], {"problem": "C", "steps": ["c"]}]}),
    );
    let r = &a.json()["results"];
    assert!(!r[0]["error"].is_null());
    assert!(r[1]["error"].is_null() && r[1]["score"].is_number(), "{r}");
    let dup = br#"{"traces":[{"problem":"p","steps":["a"],"steps":["b"]}]}"#;
    let a = request(
        &srv,
        "POST",
        "/v1/score_steps",
        &["Content-Type: application/json"],
        dup,
    );
    let e = &a.json()["results"][0]["error"];
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("duplicate key `steps`"),
        "{e}"
    );
}

/// Item 7: an id above 2^53 comes back with its own digits, and two such
/// ids that differ only past float precision stay two ids.
#[test]
fn big_integer_ids_keep_their_text() {
    let srv = Server::start(&[]);
    let body = br#"{"traces":[{"id":123456789012345678912345,"problem":"p","steps":["a"]},{"id":123456789012345678912346,"problem":"p","steps":["a"]}]}"#;
    let a = request(
        &srv,
        "POST",
        "/v1/score_steps",
        &["Content-Type: application/json"],
        body,
    );
    let r = &a.json()["results"];
    assert_eq!(r[0]["id"], "123456789012345678912345", "{r}");
    assert_eq!(r[1]["id"], "123456789012345678912346", "{r}");
}

/// Item 6: absurd values are usage errors before the model loads.
#[test]
fn absurd_flag_values_are_refused_at_parse_time() {
    for (flag, value, says) in [
        ("--timeout", "1e30", "over the limit"),
        ("--timeout", "nan", "not a positive number"),
        ("--queue", "18446744073709551615", "over the limit"),
        ("--max-connections", "0", "at least 1"),
        ("--unscored-reward", "nan", "not a finite number"),
    ] {
        let out = Command::new(bin())
            .args(["serve", "--model", "/nonexistent", flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(says) && err.contains(flag),
            "{flag} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Item 9: a foreign Host (DNS rebinding), a web page's Origin and a
/// non-JSON Content-Type are refused unless allowed.
#[test]
fn host_origin_and_content_type_are_checked() {
    let srv = Server::start(&[]);
    let body = json!({"query": ["Q\n\na"]}).to_string();
    let ct = "Content-Type: application/json";
    let a = request(
        &srv,
        "POST",
        "/get_reward",
        &[ct, "Host: evil.example:8000"],
        body.as_bytes(),
    );
    assert_eq!((a.status, a.code().as_str()), (421, "host_not_allowed"));
    let a = request(
        &srv,
        "POST",
        "/get_reward",
        &[ct, "Origin: https://evil.example"],
        body.as_bytes(),
    );
    assert_eq!((a.status, a.code().as_str()), (403, "origin_not_allowed"));
    let a = request(
        &srv,
        "POST",
        "/get_reward",
        &["Content-Type: text/plain"],
        body.as_bytes(),
    );
    assert_eq!(
        (a.status, a.code().as_str()),
        (415, "unsupported_media_type")
    );
    let localhost = format!("Host: localhost:{}", srv.addr.port());
    let a = request(
        &srv,
        "POST",
        "/get_reward",
        &[ct, &localhost],
        body.as_bytes(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let srv = Server::start(&[
        "--allow-host",
        "rm.internal",
        "--allow-origin",
        "https://app.example",
    ]);
    let a = request(
        &srv,
        "POST",
        "/get_reward",
        &[ct, "Host: rm.internal", "Origin: https://app.example"],
        body.as_bytes(),
    );
    assert_eq!(a.status, 200, "{}", a.body);
}

/// Item 13: a prompt that is not a prefix of its query is an error for
/// that query, not "score the whole query"; the other query is scored.
#[test]
fn prompt_must_prefix_its_query() {
    let srv = Server::start(&["--unscored-reward", "-1"]);
    let a = post(
        &srv,
        "/get_reward",
        &json!({"query": ["Q: 1?\nA.\n\nB.", "Other text.\n\nMore."], "prompts": ["Q: 1?\n", "Q: 2?\n"]}),
    );
    let v = a.json();
    assert!(v["errors"][0].is_null(), "{v}");
    assert_eq!(v["errors"][1]["code"], "prompt_not_prefix", "{v}");
    assert_eq!(v["rewards"][1], -1.0);
}

/// Issue 41: without `--unscored-reward`, an unscorable rollout (here a
/// prompt that is not its query's prefix) gets the reward 0, never null
/// (OpenRLHF makes a tensor of the rewards); its error stays in `errors`,
/// in /metrics and on stderr.
#[test]
fn an_unscorable_rollout_gets_a_number_by_default() {
    let srv = Server::start(&[]);
    let v = post(
        &srv,
        "/get_reward",
        &json!({"query": ["Q: 1?\nA.\n\nB.", "Other text.\n\nMore."], "prompts": ["Q: 1?\n", "Q: 2?\n"]}),
    )
    .json();
    assert!(
        v["rewards"][0].as_f64().is_some_and(|r| r.is_finite()),
        "{v}"
    );
    assert_eq!(v["rewards"][1], 0.0, "{v}");
    assert_eq!(v["scores"][1], 0.0, "{v}");
    assert_eq!(v["errors"][1]["code"], "prompt_not_prefix", "{v}");
    let m = get(&srv, "/metrics").body;
    assert!(
        m.contains("stepscore_trace_errors_total{code=\"prompt_not_prefix\"} 1"),
        "{m}"
    );
}

/// Item 16: every error is JSON with a code (404, 405, 413 included) and
/// counted by code in /metrics, which has a latency histogram.
#[test]
fn errors_are_json_and_counted() {
    let srv = Server::start(&["--max-body-bytes", "100"]);
    let a = get(&srv, "/nope");
    assert_eq!((a.status, a.code().as_str()), (404, "not_found"));
    let a = get(&srv, "/get_reward");
    assert_eq!((a.status, a.code().as_str()), (405, "method_not_allowed"));
    let a = request(
        &srv,
        "POST",
        "/v1/score_steps",
        &["Content-Type: application/json"],
        &[b' '; 200],
    );
    assert_eq!((a.status, a.code().as_str()), (413, "body_too_large"));
    let a = request(
        &srv,
        "POST",
        "/v1/score_steps",
        &["Content-Type: application/json"],
        b"{",
    );
    assert_eq!((a.status, a.code().as_str()), (400, "bad_request"));
    let m = get(&srv, "/metrics").body;
    for code in [
        "not_found",
        "method_not_allowed",
        "body_too_large",
        "bad_request",
    ] {
        assert!(
            m.contains(&format!("stepscore_errors_total{{code=\"{code}\"}} 1")),
            "{code}: {m}"
        );
    }
    assert!(m.contains("stepscore_request_seconds_bucket{"), "{m}");
    assert!(
        m.contains("stepscore_requests_total{route=\"other\",status=\"404\"} 1"),
        "{m}"
    );
}

/// Issue 44 (minor): a head hyper cannot parse — a malformed header, more
/// headers than its limit — was answered by hyper itself with an empty body
/// and not counted in /metrics. Now the answer is JSON in the server's
/// error shape and counted under the route `unparsed`.
#[test]
fn hypers_own_rejections_are_json_and_counted() {
    let srv = Server::start(&[]);
    let raw = |head: String| {
        let mut s = connect(srv.addr);
        s.write_all(head.as_bytes()).unwrap();
        read_answer(&mut s)
    };
    let host = srv.host();
    let a = raw(format!(
        "GET /health HTTP/1.1\r\nHost: {host}\r\nBad Header: x\r\n\r\n"
    ));
    assert_eq!(a.status, 400, "{} {}", a.head, a.body);
    assert_eq!(a.code(), "malformed_request", "{}", a.body);
    assert!(
        a.head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{}",
        a.head
    );
    let many: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
    let a = raw(format!(
        "GET /health HTTP/1.1\r\nHost: {host}\r\n{many}\r\n"
    ));
    assert_eq!(a.status, 431, "{} {}", a.head, a.body);
    assert_eq!(a.code(), "headers_too_large", "{}", a.body);
    // A well-formed request on a fresh connection is answered as before.
    assert_eq!(get(&srv, "/health").status, 200);
    // Counted when hyper's connection ends, just after the answer is out.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut m = get(&srv, "/metrics").body;
    while !(m.contains("status=\"431\"") && m.contains("status=\"400\""))
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
        m = get(&srv, "/metrics").body;
    }
    for needle in [
        "stepscore_errors_total{code=\"malformed_request\"} 1",
        "stepscore_errors_total{code=\"headers_too_large\"} 1",
        "stepscore_requests_total{route=\"unparsed\",status=\"400\"} 1",
        "stepscore_requests_total{route=\"unparsed\",status=\"431\"} 1",
    ] {
        assert!(m.contains(needle), "{needle}: {m}");
    }
}

/// Item 4 (server side): a head with NaN weights gives an error in the
/// trace's slot and no reward, counted as an error, never as scored.
#[test]
fn non_finite_scores_are_errors_not_rewards() {
    let dir = std::env::temp_dir().join(format!("stepscore-nan-head-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let head = dir.join("nan.safetensors");
    let meta =
        br#"{"v_head.summary.weight":{"dtype":"F32","shape":[1,32],"data_offsets":[0,128]}}"#;
    let mut bytes = (meta.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(meta);
    for _ in 0..32 {
        bytes.extend_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&head, bytes).unwrap();
    let srv = Server::start(&["--head", head.to_str().unwrap()]);
    let v = post(
        &srv,
        "/get_reward",
        &json!({"query": ["Q: 1?\nA.\n\nB."], "prompts": ["Q: 1?\n"]}),
    )
    .json();
    // Issue 41: the default unscored reward, never null (OpenRLHF would crash).
    assert_eq!(v["rewards"][0], 0.0, "{v}");
    assert!(!v["errors"][0].is_null(), "{v}");
    let m = get(&srv, "/metrics").body;
    assert!(m.contains("stepscore_traces_scored_total 0"), "{m}");
    assert!(m.contains("stepscore_trace_errors_total{code="), "{m}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 22 item 5: vLLM's `/pooling` for a PRM and `/v1/models`; the
/// pooling pairs are the same step scores `/v1/score_steps` gives; bearer auth.
#[test]
fn pooling_models_and_api_key() {
    let mut cmd = Command::new(bin());
    cmd.env("STEPSCORE_API_KEY", "sekrit");
    let srv = Server::start_with(cmd, &["--served-model-name", "tiny-prm"]);
    let auth = "Authorization: Bearer sekrit";
    let ct = "Content-Type: application/json";
    let a = get(&srv, "/v1/models");
    assert_eq!((a.status, a.code().as_str()), (401, "unauthorized"));
    assert_eq!(get(&srv, "/health").status, 200);
    let a = request(&srv, "GET", "/v1/models", &[auth], b"");
    assert_eq!(a.json()["data"][0]["id"], "tiny-prm");
    let body = json!({"model": "tiny-prm", "input": [CHAT]}).to_string();
    let a = request(&srv, "POST", "/pooling", &[ct, auth], body.as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    let v = a.json();
    assert_eq!(v["object"], "list");
    let pairs = v["data"][0]["data"].as_array().unwrap();
    assert_eq!(pairs.len(), 2);
    let want = step_scores(&srv, &[ct, auth]);
    for (pair, want) in pairs.iter().zip(&want) {
        let (neg, pos) = (pair[0].as_f64().unwrap(), pair[1].as_f64().unwrap());
        assert_eq!(pos, *want);
        assert!((neg + pos - 1.0).abs() < 1e-12);
    }
    let body = json!({"model": "other", "input": CHAT}).to_string();
    let a = request(&srv, "POST", "/pooling", &[ct, auth], body.as_bytes());
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["error"]["stepscore_code"], "model_not_found");
}

const CHAT: &str = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n1+1=2<extra_0>So 2.<extra_0><|im_end|><|endoftext|>";

/// The step scores of CHAT's trace from stepscore's own route.
fn step_scores(srv: &Server, headers: &[&str]) -> Vec<f64> {
    let body =
        json!({"traces": [{"problem": "What is 1+1?", "steps": ["1+1=2", "So 2."]}]}).to_string();
    let a = request(srv, "POST", "/v1/score_steps", headers, body.as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()["results"][0]["step_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Issue 41 item 5: vLLM's vocabulary. `/classify` (verl's reward-model
/// path posts `{"model", "input", "use_activation": false}` and reads
/// `data[-1].probs[-1]`); `/pooling` with `use_activation: false`, token-id
/// input, content as a list of parts and base64; errors in vLLM's shape;
/// `/v1/score` still answers, marked deprecated. Before: /classify was 404,
/// `use_activation` was ignored, token ids and content parts were refused,
/// and errors had stepscore's shape.
#[test]
fn classify_and_the_pooling_vocabulary() {
    let srv = Server::start(&["--served-model-name", "tiny-prm"]);
    let ct = "Content-Type: application/json";
    let want = step_scores(&srv, &[ct]);
    let min = want.iter().copied().fold(f64::INFINITY, f64::min);
    let logit = |p: f64| p.ln() - (1.0 - p).ln();
    // /classify: the aggregate (min, the default) as probabilities, or as
    // the log-odds pair verl reads with use_activation false.
    let body = json!({"model": "tiny-prm", "input": CHAT}).to_string();
    let a = request(&srv, "POST", "/classify", &[ct], body.as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    let v = a.json();
    assert!(v["id"].as_str().unwrap().starts_with("classify-"), "{v}");
    assert_eq!(v["data"][0]["num_classes"], 2);
    assert_eq!(v["data"][0]["probs"][1].as_f64().unwrap(), min);
    let body = json!({"model": "tiny-prm", "input": CHAT, "use_activation": false}).to_string();
    let v = request(&srv, "POST", "/classify", &[ct], body.as_bytes()).json();
    let z = v["data"][0]["probs"][1].as_f64().unwrap();
    assert!((z - logit(min)).abs() < 1e-9, "{v}");
    assert_eq!(v["data"][0]["probs"][0], 0.0);
    // /pooling: log-odds per step; token ids; content parts; base64.
    let body = json!({"input": CHAT, "use_activation": false, "request_id": "r7"}).to_string();
    let v = request(&srv, "POST", "/pooling", &[ct], body.as_bytes()).json();
    assert_eq!(v["id"], "pool-r7");
    for (pair, p) in v["data"][0]["data"].as_array().unwrap().iter().zip(&want) {
        assert!((pair[1].as_f64().unwrap() - logit(*p)).abs() < 1e-9, "{v}");
    }
    let tokenizer = stepscore::engine::Tokenizer::from_json_bytes(
        &std::fs::read(format!("{}/tokenizer.json", tiny_model())).unwrap(),
    )
    .unwrap();
    let ids = tokenizer.encode(CHAT, false).unwrap();
    for input in [json!(ids), json!([ids])] {
        let body = json!({ "input": input }).to_string();
        let a = request(&srv, "POST", "/pooling", &[ct], body.as_bytes());
        assert_eq!(a.status, 200, "{}", a.body);
        let got: Vec<f64> = a.json()["data"][0]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_f64().unwrap())
            .collect();
        assert_eq!(got, want);
    }
    let body = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "What is 1+1?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "1+1=2<extra_0>So 2.<extra_0>"}]}],
        "encoding_format": "base64"})
    .to_string();
    let v = request(&srv, "POST", "/pooling", &[ct], body.as_bytes()).json();
    let b64 = v["data"][0]["data"].as_str().unwrap();
    let mut floats = Vec::new();
    {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        for c in bytes.chunks(4) {
            floats.push(f32::from_le_bytes(c.try_into().unwrap()));
        }
    }
    assert_eq!(
        floats,
        [1.0 - want[0], want[0], 1.0 - want[1], want[1]].map(|x| x as f32)
    );
    // vLLM's error shape, with stepscore's code alongside.
    for (route, body) in [
        (
            "/pooling",
            json!({"input": CHAT, "truncate_prompt_tokens": 4}),
        ),
        ("/classify", json!({"input": "no turns<extra_0>"})),
    ] {
        let a = request(&srv, "POST", route, &[ct], body.to_string().as_bytes());
        assert_eq!(a.status, 400, "{}", a.body);
        let e = &a.json()["error"];
        assert_eq!(
            (e["type"].as_str(), e["code"].as_u64()),
            (Some("BadRequestError"), Some(400)),
            "{e}"
        );
        assert!(e["message"].as_str().unwrap().len() > 10, "{e}");
    }
    // The old path answers, marked deprecated with its successor linked.
    let body =
        json!({"traces": [{"problem": "What is 1+1?", "steps": ["1+1=2", "So 2."]}]}).to_string();
    let a = request(&srv, "POST", "/v1/score", &[ct], body.as_bytes());
    assert_eq!(a.status, 200, "{}", a.body);
    let head = a.head.to_ascii_lowercase();
    assert!(head.contains("deprecation: true"), "{head}");
    assert!(
        head.contains("</v1/score_steps>; rel=\"successor-version\""),
        "{head}"
    );
}

/// Issue 22: `serve --help` names only flags that exist.
/// An outcome reward model (Qwen3ForSequenceClassification, Qwen3's chat
/// template) behind `/classify`, the route vLLM serves reward models on:
/// the chat text verl posts gets the reference's one score, the same as
/// stepscore's own route gives it on the last step.
#[test]
fn an_outcome_reward_model_answers_classify() {
    let dir = format!(
        "{}/../../tests/fixtures/prm/outcome-tiny",
        env!("CARGO_MANIFEST_DIR")
    );
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/reference.json")).unwrap())
            .unwrap();
    let case = &reference["cases"][0];
    let want = case["step_scores"][2].as_f64().unwrap();
    let srv = Server::start_model(Command::new(bin()), &dir, &[]);
    let v = post(&srv, "/classify", &json!({"input": case["prompt_text"]})).json();
    let got = v["data"][0]["probs"][1].as_f64().unwrap();
    assert!((got - want).abs() < 1e-4, "{v}");
    let body = json!({"traces": [{"problem": case["problem"], "steps": case["steps"]}]});
    let own = post(&srv, "/v1/score_steps", &body).json();
    assert_eq!(own["family"], "outcome");
    assert_eq!(
        own["results"][0]["step_scores"][2].as_f64(),
        Some(got),
        "{own}"
    );
}

#[test]
fn help_names_no_port_flag() {
    let out = Command::new(bin())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(!help.contains("--port"), "{help}");
    assert!(
        help.contains("--api-key") && help.contains("Authorization: Bearer"),
        "{help}"
    );
}
