//! `stepscore serve`: an HTTP reward server for RL trainers.
//!
//! Routes: `POST /get_reward` (OpenRLHF's `--remote_rm_url` protocol:
//! `{"query", "prompts"?, "labels"?}` -> `{"rewards", ...}`), `POST
//! /v1/score` (per-step scores of rows in any format `stepscore score`
//! reads), `GET /health`, `GET /metrics` (Prometheus text).
//!
//! One scoring thread owns the model ([`queue`]); requests from all
//! clients are batched into its passes. The queue is bounded in traces: a
//! request that does not fit now gets 429 with Retry-After, one that could
//! never fit (or a body over the size limit) 413. A request not answered
//! within the timeout gets 504 and its traces are skipped if not yet
//! started. SIGINT/SIGTERM stop accepting connections, finish every
//! accepted request, then exit.

mod metrics;
mod queue;
mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stepscore::segment::Segmenter;

use crate::model_args::ModelArgs;
use crate::Failure;
use metrics::Metrics;
use queue::Queue;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  stepscore serve --model prm.gguf --port 8000\n  \
    curl -s localhost:8000/get_reward -d '{\"query\": [\"Q: 2+2?\\n2+2=4.\\n\\nSo 4.\"], \"prompts\": [\"Q: 2+2?\\n\"]}'\n\
    OpenRLHF: --remote_rm_url http://HOST:8000/get_reward"
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

    /// The reward of a trace that cannot be scored (OpenRLHF needs a number).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = crate::options::finite)]
    pub unscored_reward: f64,

    /// Traces queued or being scored at most; past it requests get 429.
    #[arg(long, default_value_t = 1024)]
    pub queue: usize,

    /// Traces per engine pass gathered across clients.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,

    /// How long a pass waits for more clients' traces (milliseconds).
    #[arg(long, default_value_t = 2)]
    pub batch_wait_ms: u64,

    /// Largest request body (bytes); larger ones get 413.
    #[arg(long, default_value_t = 8 << 20)]
    pub max_body_bytes: usize,

    /// Most traces in one request; more get 413.
    #[arg(long, default_value_t = 512)]
    pub max_traces: usize,

    /// Longest trace text (problem and steps, bytes); a longer trace is
    /// not scored and gets the error kind `trace_too_long`.
    #[arg(long, default_value_t = 256 << 10)]
    pub max_trace_bytes: usize,

    /// Seconds a request may wait for its scores before 504.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.queue == 0 || args.max_traces == 0 {
        return Err(Failure::Usage(
            "--queue and --max-traces must be at least 1".into(),
        ));
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Failure::Usage(
            "--timeout must be a positive number of seconds".into(),
        ));
    }
    let scorer = Arc::new(args.model.open()?);
    let metrics = Arc::new(Metrics::default());
    let (queue, worker) = Queue::start(
        Arc::clone(&scorer),
        args.queue,
        args.max_batch,
        Duration::from_millis(args.batch_wait_ms),
        Arc::clone(&metrics),
    );
    let state = Arc::new(routes::State {
        queue: Arc::clone(&queue),
        metrics,
        family: scorer.family().name(),
        segmenter: args.segmenter.clone(),
        aggregation: args.aggregation,
        unscored_reward: args.unscored_reward,
        max_traces: args.max_traces,
        max_trace_bytes: args.max_trace_bytes,
        timeout: Duration::from_secs_f64(args.timeout),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Io(format!("starting the server runtime: {e}")))?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| Failure::Io(format!("listen on {}: {e}", args.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::Io(format!("listen on {}: {e}", args.listen)))?;
        eprintln!("stepscore: serving on http://{addr} (POST /get_reward, POST /v1/score, GET /health, GET /metrics)");
        axum::serve(listener, routes::router(state, args.max_body_bytes))
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| Failure::Io(format!("server: {e}")))
    });
    // Every accepted request has been answered; let the worker finish and stop.
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
    eprintln!("stepscore: shutting down after the accepted requests");
}
