//! `stepscore serve`: an HTTP reward server for RL trainers.
//!
//! Routes: `POST /get_reward` (OpenRLHF's `--reward.remote_url` protocol (`--remote_rm_url` before 0.11):
//! `{"query", "prompts"?, "labels"?}` -> `{"rewards", ...}`), `POST
//! /v1/score_steps` (per-step scores of rows in any format `stepscore
//! score` reads; `/v1/score` is its deprecated old path), `POST /pooling`,
//! `POST /classify` and `GET /v1/models` (vLLM's pooling and
//! classification APIs for process reward models, [`vllm`]), `GET
//! /health`, `GET /metrics` (Prometheus).
//!
//! One scoring thread owns the model ([`queue`]); requests from all
//! clients are batched into its passes. The queue is bounded in traces: a
//! request that does not fit now gets 429 with Retry-After, one that could
//! never fit 413. A request not answered within the timeout gets 504 and
//! its traces are skipped if not yet started. Connections ([`conn`]) and
//! bodies ([`body`]) are bounded in count, bytes and time; callers are
//! checked by [`access`]; bodies are parsed by [`request`]; hyper's own
//! body-less rejections get the JSON error shape and a count
//! ([`rejection`]). SIGINT/SIGTERM
//! stop accepting connections, finish every accepted request, and drop
//! what is still open at the shutdown deadline.

mod access;
mod answer;
mod body;
mod conn;
mod metrics;
mod queue;
mod rejection;
pub mod request;
mod routes;
mod vllm;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stepscore::segment::Segmenter;

use crate::model_args::ModelArgs;
use crate::options::{bounded_count, finite, millis, positive, seconds};
use crate::Failure;
use metrics::Metrics;
use queue::Queue;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  stepscore serve --model prm.gguf --listen 127.0.0.1:8000\n  \
    curl -s localhost:8000/get_reward -H 'Content-Type: application/json' \\\n    \
    -d '{\"query\": [\"Q: 2+2?\\n2+2=4.\\n\\nSo 4.\"], \"prompts\": [\"Q: 2+2?\\n\"]}'\n  \
    STEPSCORE_API_KEY=$(openssl rand -hex 16) stepscore serve --model prm.gguf \\\n    \
    --listen 0.0.0.0:8000 --allow-host rm.internal   # clients send Authorization: Bearer $KEY\n\
    OpenRLHF >= 0.11: --reward.remote_url http://HOST:8000/get_reward (--remote_rm_url before 0.11)"
)]
pub struct Args {
    #[command(flatten)]
    pub model: ModelArgs,

    /// Address to listen on (port 0: any free port; the chosen one is printed).
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,

    /// How responses are cut into steps: auto (step markers, else blank lines, else
    /// lines), blank-line, newline, step-marker, chat, regex:PATTERN.
    #[arg(long, default_value = "auto")]
    pub segmenter: Segmenter,

    /// Trace score from step scores: min, prod, last, mean, geo_mean.
    #[arg(long, short, default_value = "min")]
    pub aggregation: stepscore::aggregate::Aggregation,

    /// `/v1/score_steps`'s `first_error`: the first step scoring below this, in
    /// [0, 1] (default: the threshold the model's head was shipped with,
    /// else 0.5; the rule `score` follows).
    #[arg(long, value_parser = crate::options::threshold)]
    pub threshold: Option<f64>,

    /// `/get_reward`'s reward for a trace that cannot be scored, a finite
    /// number: OpenRLHF turns the rewards into a tensor, where a null stops
    /// training. Its error stays in `errors`, in `/metrics` and on stderr.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = finite)]
    pub unscored_reward: f64,

    /// Traces queued or being scored at most (1 to 1000000); past it requests get 429.
    #[arg(long, default_value_t = 1024, value_parser = bounded_count::<1_000_000>)]
    pub queue: usize,

    /// Traces per engine pass gathered across clients (1 to 1000000).
    #[arg(long, default_value_t = 64, value_parser = bounded_count::<1_000_000>)]
    pub max_batch: usize,

    /// How long a pass waits for more clients' traces (milliseconds, at most
    /// 60000 and less than --timeout).
    #[arg(long, default_value_t = 2, value_parser = millis)]
    pub batch_wait_ms: u64,

    /// Largest request body (bytes); larger ones get 413.
    #[arg(long, default_value_t = 8 << 20, value_parser = bounded_count::<{ u32::MAX as usize }>)]
    pub max_body_bytes: usize,

    /// Request body bytes held in memory at once, all connections together;
    /// past it requests get 503 with Retry-After. At least --max-body-bytes.
    #[arg(long, default_value_t = 64 << 20, value_parser = bounded_count::<{ u32::MAX as usize }>)]
    pub max_body_memory: usize,

    /// Most traces in one request (1 to 1000000); more get 413.
    #[arg(long, default_value_t = 512, value_parser = bounded_count::<1_000_000>)]
    pub max_traces: usize,

    /// Longest trace text (problem and steps, bytes; at least 1); a longer
    /// trace is not scored and gets the error code `trace_too_long`.
    #[arg(long, default_value_t = 256 << 10, value_parser = positive)]
    pub max_trace_bytes: usize,

    /// Seconds a request may wait for its scores before 504.
    #[arg(long, default_value = "60", value_parser = seconds)]
    pub timeout: Duration,

    /// Seconds a client has to send a request's headers; a keep-alive
    /// connection idle this long is closed too.
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub header_timeout: Duration,

    /// Seconds the server's answer may wait on a client that reads none of
    /// it (its receive window full, as with a client that pipelines requests
    /// and never reads); the connection is then closed and its slot freed.
    #[arg(long, default_value = "30", value_parser = seconds)]
    pub write_timeout: Duration,

    /// Seconds a client has to send a request's body once its headers are in (408).
    #[arg(long, default_value = "30", value_parser = seconds)]
    pub body_timeout: Duration,

    /// Seconds SIGINT/SIGTERM waits for accepted requests to be answered;
    /// connections still open then are dropped.
    #[arg(long, default_value = "10", value_parser = seconds)]
    pub shutdown_timeout: Duration,

    /// Open connections at most (1 to 1000000); more wait to be accepted.
    #[arg(long, default_value_t = 512, value_parser = bounded_count::<1_000_000>)]
    pub max_connections: usize,

    /// A Host name (or NAME:PORT) this server answers to besides its listen
    /// address (and localhost names on loopback); `*` for any. Repeatable.
    #[arg(long)]
    pub allow_host: Vec<String>,

    /// A web origin (`https://app.example`) allowed to call; requests with
    /// any other Origin header get 403. `*` for any. Repeatable.
    #[arg(long)]
    pub allow_origin: Vec<String>,

    /// Require `Authorization: Bearer KEY` on every route but /health (401 otherwise).
    #[arg(long, env = "STEPSCORE_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// The model's name in /v1/models, /pooling and /classify (default: the model file's name).
    #[arg(long)]
    pub served_model_name: Option<String>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.max_body_memory < args.max_body_bytes {
        return Err(Failure::Usage(format!(
            "--max-body-memory {} is less than --max-body-bytes {}: no body of the largest size could be read",
            args.max_body_memory, args.max_body_bytes
        )));
    }
    // A request waits at most --timeout for its pass, which first waits
    // --batch-wait-ms for company: not shorter, and every POST would be 504.
    let batch_wait = Duration::from_millis(args.batch_wait_ms);
    if batch_wait >= args.timeout {
        return Err(Failure::Usage(format!(
            "--batch-wait-ms {} is not shorter than --timeout {}s: every request would \
             time out (504) while its pass waits for more traces",
            args.batch_wait_ms,
            args.timeout.as_secs_f64()
        )));
    }
    if args.api_key.as_deref().is_some_and(|k| k.is_empty()) {
        return Err(Failure::Usage(
            "--api-key / STEPSCORE_API_KEY is empty".into(),
        ));
    }
    let scorer = Arc::new(args.model.open()?);
    let model_name = args.served_model_name.clone().unwrap_or_else(|| {
        args.model
            .model
            .as_ref()
            .and_then(|p| p.file_name())
            .map_or_else(|| "stepscore".into(), |n| n.to_string_lossy().into_owned())
    });
    let metrics = Arc::new(Metrics::default());
    metrics.queue_capacity.set(args.queue as i64);
    let (queue, worker) = Queue::start(
        Arc::clone(&scorer),
        args.queue,
        args.max_batch,
        batch_wait,
        Arc::clone(&metrics),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Io(format!("starting the server runtime: {e}")))?;
    let limits = conn::ConnLimits {
        header_timeout: args.header_timeout,
        write_timeout: args.write_timeout,
        max_connections: args.max_connections,
        shutdown_timeout: args.shutdown_timeout,
    };
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| Failure::Io(format!("listen on {}: {e}", args.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::Io(format!("listen on {}: {e}", args.listen)))?;
        if !addr.ip().is_loopback() && args.api_key.is_none() {
            eprintln!("stepscore: warning: listening on {addr} with no --api-key: anyone who can reach it can use it");
        }
        let state = Arc::new(routes::State {
            queue: Arc::clone(&queue),
            metrics: Arc::clone(&metrics),
            family: scorer.family().name(),
            model_name,
            segmenter: args.segmenter.clone(),
            aggregation: args.aggregation,
            threshold: scorer.threshold_in_force(args.threshold),
            unscored_reward: args.unscored_reward,
            limits: request::Limits {
                max_traces: args.max_traces,
                max_trace_bytes: args.max_trace_bytes,
            },
            timeout: args.timeout,
            body: body::BodyLimits {
                max_body_bytes: args.max_body_bytes,
                timeout: args.body_timeout,
                budget: Arc::new(tokio::sync::Semaphore::new(args.max_body_memory)),
                metrics: Arc::clone(&metrics),
            },
            access: access::Access {
                listen: addr,
                hosts: args.allow_host.iter().map(|h| h.to_ascii_lowercase()).collect(),
                origins: args.allow_origin.clone(),
                api_key: args.api_key.clone(),
            },
            decode: {
                let scorer = Arc::clone(&scorer);
                Box::new(move |ids: &[u32]| {
                    scorer.tokenizer().decode(ids, false).map_err(|e| e.to_string())
                })
            },
        });
        eprintln!("stepscore: serving on http://{addr} ({})", routes::ROUTES);
        conn::serve(
            listener,
            routes::router(state),
            &limits,
            Arc::clone(&metrics),
            shutdown_signal(),
        )
        .await;
        Ok(())
    });
    // Requests still waiting past the deadline are dropped first, so the
    // worker skips their traces; then it finishes what is queued and stops.
    runtime.shutdown_timeout(Duration::from_millis(100));
    queue.close();
    let _ = worker.join();
    eprintln!("stepscore: server stopped");
    served
}

/// Resolves on SIGINT or (Unix) SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    eprintln!("stepscore: shutting down: answering the accepted requests");
}
