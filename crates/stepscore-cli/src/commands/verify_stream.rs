//! `stepscore verify-stream`: verifies an OpenAI-compatible streaming chat
//! completion while it is written. With `--url` it posts the problem to the
//! server (`stream: true`) and reads the answer as it comes; otherwise it
//! reads a recorded or piped stream (`curl -N ... | stepscore verify-stream
//! --problem ...`). Each step is scored by the PRM the moment it completes
//! (the core's `prm::verify`, on one KV-cached session); when a step scores
//! below the threshold the connection is dropped, which ends generation on
//! the server. One JSON line per event, flushed as it happens.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Map, Value};
use stepscore::prm::{StreamVerifier, VerifyEvent};

use crate::model_args::ModelArgs;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    stepscore verify-stream --url http://127.0.0.1:8080/v1/chat/completions \\\n    \
    --problem 'What is 15% of 80?' --model stepscore-prm-smollm2 --max-new-tokens 256\n  \
    curl -sN http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\\n    \
    -d '{\"stream\": true, \"messages\": [{\"role\": \"user\", \"content\": \"What is 15% of 80?\"}]}' \\\n    \
    | stepscore verify-stream --problem 'What is 15% of 80?'\n\n\
    Events (JSONL on stdout): {\"event\": \"step\", step, text, start, end, score} for each step,\n\
    {\"event\": \"stopped\", step, score, threshold} when a step scores below the threshold (the\n\
    connection is then dropped), {\"event\": \"finished\", finish_reason, done, usage, steps, ...}\n\
    at the end; with --text also {\"event\": \"text\", text} as text arrives.")]
pub struct Args {
    /// A recorded server-sent event stream to read instead of --url (`-`: stdin).
    #[arg(default_value = "-", conflicts_with = "url")]
    pub input: PathBuf,

    /// The problem the stream answers: the PRM's question and, with --url, the user message.
    #[arg(long)]
    pub problem: String,

    /// An OpenAI-compatible chat completions endpoint to post the problem to
    /// (llama.cpp's server, vLLM, llama-cpp-python: `http://host:port/v1/chat/completions`).
    #[arg(long)]
    pub url: Option<String>,

    #[command(flatten)]
    pub model: ModelArgs,

    /// Stop the stream when a step scores below this (default: the PRM's
    /// shipped threshold, `stepscore fetch --list`).
    #[arg(long, value_parser = crate::options::threshold, conflicts_with = "no_stop")]
    pub stop_below: Option<f64>,

    /// Score every step and never stop the stream.
    #[arg(long)]
    pub no_stop: bool,

    /// Also print the text as it arrives (`text` events).
    #[arg(long)]
    pub text: bool,

    /// With --url: the request's `model` (vLLM wants a served model's name;
    /// llama.cpp's server takes any).
    #[arg(long, requires = "url")]
    pub server_model: Option<String>,

    /// With --url: the request's `max_tokens`.
    #[arg(long, requires = "url", value_parser = crate::options::positive)]
    pub max_new_tokens: Option<usize>,

    /// With --url: the request's `temperature` (0: greedy).
    #[arg(long, requires = "url", value_parser = crate::options::finite)]
    pub temperature: Option<f64>,

    /// With --url: the request's `seed`.
    #[arg(long, requires = "url")]
    pub seed: Option<u64>,

    /// With --url: a system message before the problem.
    #[arg(long, requires = "url")]
    pub system: Option<String>,

    /// With --url: more request fields, a JSON object merged into the body
    /// (`'{"top_p": 0.9, "stop": ["</s>"]}'`).
    #[arg(long, requires = "url", value_parser = json_object)]
    pub extra: Option<Map<String, Value>>,

    /// With --url: a bearer token for the server.
    #[arg(long, requires = "url", env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// With --url: the longest wait to connect and between two reads.
    #[arg(long, requires = "url", default_value = "600", value_parser = crate::options::seconds)]
    pub timeout: Duration,
}

fn json_object(s: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err("must be a JSON object".into()),
        Err(e) => Err(format!("not JSON: {e}")),
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.url.is_none() && args.input.as_os_str() == "-" && std::io::stdin().is_terminal() {
        return Err(Failure::Usage(
            "no --url and no stream file: pipe a stream in (curl -N ... | stepscore \
             verify-stream ...) or give --url"
                .into(),
        ));
    }
    // A file is opened before the model loads; a request is only sent once
    // the model that verifies its answer is loaded.
    let file = match (&args.url, args.input.as_os_str() == "-") {
        (None, false) => Some(
            std::fs::File::open(&args.input)
                .map_err(|e| Failure::Io(format!("{}: {e}", args.input.display())))?,
        ),
        _ => None,
    };
    let scorer = args.model.open()?;
    let (source, mut body): (String, Box<dyn Read>) = match (&args.url, file) {
        (Some(url), _) => (url.clone(), post(url, &args)?),
        (None, Some(f)) => (args.input.display().to_string(), Box::new(f)),
        (None, None) => ("<stdin>".to_string(), Box::new(std::io::stdin())),
    };
    let mut verifier = StreamVerifier::new(&scorer, &args.problem, &source)
        .stopping(!args.no_stop, args.stop_below)?;
    if !args.no_stop && verifier.threshold().is_none() {
        eprintln!(
            "stepscore: this PRM ships no threshold: every step is scored and the \
             stream is never stopped (set --stop-below to stop it)"
        );
    }
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = body
            .read(&mut buf)
            .map_err(|e| Failure::Io(format!("{source}: reading the stream: {e}")))?;
        if n == 0 {
            verifier.close();
        } else {
            verifier.push(&buf[..n]);
        }
        while let Some(ev) = verifier.next_event() {
            // The core's errors name the stream and line already.
            let ev = ev?;
            if let VerifyEvent::Stopped {
                step,
                score,
                threshold,
            } = &ev
            {
                eprintln!(
                    "stepscore: step {step} scored {score:.3}, below {threshold}: stopped \
                     reading and closed the stream"
                );
            }
            if args.text || !matches!(ev, VerifyEvent::Text { .. }) {
                crate::output::print_line(json!(ev))?;
            }
        }
        if verifier.ended() || n == 0 {
            break;
        }
    }
    // Dropping the body closes the connection, which ends a stopped generation.
    drop(body);
    Ok(())
}

/// Posts the problem with `stream: true`; the response body, once the
/// server has answered 200 with an event stream.
fn post(url: &str, args: &Args) -> Result<Box<dyn Read>, Failure> {
    let parsed = url::Url::parse(url).map_err(|e| Failure::Usage(format!("--url {url}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Failure::Usage(format!(
            "--url {url}: not an http or https URL"
        )));
    }
    // ureq's proxy support ignores NO_PROXY: never send a local server's
    // stream through a proxy.
    let local = match parsed.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(args.timeout)
        .timeout_read(args.timeout)
        .try_proxy_from_env(!local)
        // A redirect is named, not followed: re-sending the POST (and its
        // bearer key) to wherever a server points is the user's choice.
        .redirects(0)
        .build();
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": args.problem}));
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), Value::Bool(true));
    // Asks for the usage chunk; servers that do not know the field ignore it.
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if let Some(m) = &args.server_model {
        body.insert("model".into(), json!(m));
    }
    if let Some(n) = args.max_new_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if let Some(t) = args.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(s) = args.seed {
        body.insert("seed".into(), json!(s));
    }
    for (k, v) in args.extra.clone().unwrap_or_default() {
        body.insert(k, v);
    }
    let mut request = agent.post(url).set("Accept", "text/event-stream");
    if let Some(key) = &args.api_key {
        request = request.set("Authorization", &format!("Bearer {key}"));
    }
    let response = match request.send_json(Value::Object(body)) {
        Ok(r) => r,
        Err(ureq::Error::Status(code, r)) => {
            let mut text = String::new();
            // The server's own message, within reason.
            let _ = r.into_reader().take(64 << 10).read_to_string(&mut text);
            return Err(Failure::Io(format!(
                "{url}: the server answered {code}: {}",
                text.trim()
            )));
        }
        // ureq's message names the URL.
        Err(ureq::Error::Transport(t)) => return Err(Failure::Io(t.to_string())),
    };
    // A 3xx was reported as "not an event stream" (issue 44, D16).
    if (300..400).contains(&response.status()) {
        let code = response.status();
        let to = response
            .header("Location")
            .unwrap_or("no Location given")
            .to_string();
        return Err(Failure::Io(format!(
            "{url}: the server redirected the request ({code} {}) to {to}; \
             verify-stream does not follow redirects: give that URL as --url",
            response.status_text()
        )));
    }
    let kind = response.content_type().to_string();
    if kind != "text/event-stream" {
        let mut text = String::new();
        let _ = response.into_reader().take(2048).read_to_string(&mut text);
        return Err(Failure::Io(format!(
            "{url}: the server answered with `{kind}`, not an event stream (text/event-stream): {}",
            text.trim()
        )));
    }
    Ok(Box::new(response.into_reader()))
}
