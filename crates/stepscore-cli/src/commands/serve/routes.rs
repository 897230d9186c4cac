//! The HTTP routes: request bodies in, queue jobs out, JSON answers back.
//! Request-level limits answer with a status (400, 413, 429, 503, 504);
//! a trace that cannot be scored is reported in its own slot of a 200
//! answer, and the other traces are still scored.

use std::io::Cursor;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State as AxumState};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use stepscore::aggregate::{aggregate, first_error, Aggregation};
use stepscore::io::{ReadOptions, TraceReader};
use stepscore::segment::{segment_response, Segmenter};
use stepscore::Trace;

use super::metrics::Metrics;
use super::queue::{Outcome, Queue, Rejected};

pub struct State {
    pub queue: Arc<Queue>,
    pub metrics: Arc<Metrics>,
    pub family: &'static str,
    pub segmenter: Segmenter,
    pub aggregation: Aggregation,
    pub unscored_reward: f64,
    pub max_traces: usize,
    pub max_trace_bytes: usize,
    pub timeout: Duration,
}

type Shared = Arc<State>;

pub fn router(state: Shared, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/get_reward", post(get_reward))
        .route("/v1/score", post(score))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// A request-level failure, answered as `{"error": {"kind", "message"}}`.
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    message: String,
    retry_after: Option<Duration>,
}

fn error(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        kind,
        message: message.into(),
        retry_after: None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"kind": self.kind, "message": self.message}});
        let mut resp = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        if let Some(after) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&after.as_secs().to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        resp
    }
}

fn ok_json(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// One trace slot: what was parsed, or why it could not be.
type Slot = Result<Trace, (&'static str, String)>;

/// Queues the good traces, waits for them within the timeout, and puts
/// every outcome back in its slot.
async fn run(state: &State, slots: Vec<Slot>) -> Result<Vec<Outcome>, ApiError> {
    if slots.len() > state.max_traces {
        return Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_many_traces",
            format!(
                "{} traces in one request, over the limit of {}",
                slots.len(),
                state.max_traces
            ),
        ));
    }
    let mut traces = Vec::new();
    let mut out: Vec<Option<Outcome>> = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot.and_then(|t| check_size(&t, state.max_trace_bytes).map(|()| t)) {
            Ok(t) => {
                traces.push(t);
                out.push(None);
            }
            Err(e) => out.push(Some(Err(e))),
        }
    }
    if !traces.is_empty() {
        let rx = state.queue.submit(traces).map_err(|r| match r {
            Rejected::TooLarge { capacity } => error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_traces",
                format!("the request's traces can never fit the queue of {capacity}"),
            ),
            Rejected::Full { retry_after } => ApiError {
                retry_after: Some(retry_after),
                ..error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "queue_full",
                    "the scoring queue is full; retry later",
                )
            },
            Rejected::Closed => error(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is shutting down",
            ),
        })?;
        let scored = match tokio::time::timeout(state.timeout, rx).await {
            Ok(Ok(scored)) => scored,
            Ok(Err(_)) => {
                return Err(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "worker_stopped",
                    "the scoring thread stopped",
                ))
            }
            Err(_) => {
                return Err(error(
                    StatusCode::GATEWAY_TIMEOUT,
                    "timeout",
                    format!("not scored within {:.1}s", state.timeout.as_secs_f64()),
                ))
            }
        };
        let mut scored = scored.into_iter();
        for slot in out.iter_mut().filter(|s| s.is_none()) {
            *slot = scored.next();
        }
    }
    Ok(out
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(("internal", "no result for this trace".into()))))
        .collect())
}

fn check_size(t: &Trace, limit: usize) -> Result<(), (&'static str, String)> {
    let bytes = t.problem.len() + t.steps.iter().map(|s| s.text.len()).sum::<usize>();
    if bytes > limit {
        return Err((
            "trace_too_long",
            format!("the trace's text is {bytes} bytes, over the server's limit of {limit} (--max-trace-bytes)"),
        ));
    }
    Ok(())
}

fn parse_body(body: &[u8]) -> Result<serde_json::Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the body must be a JSON object",
        )),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("the body is not JSON: {e}"),
        )),
    }
}

fn strings(
    body: &serde_json::Map<String, Value>,
    field: &str,
) -> Result<Option<Vec<String>>, ApiError> {
    let Some(v) = body.get(field) else {
        return Ok(None);
    };
    let bad = || {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("`{field}` must be an array of strings"),
        )
    };
    let arr = v.as_array().ok_or_else(bad)?;
    arr.iter()
        .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn scored_steps(s: &stepscore::prm::TraceScore) -> Vec<f64> {
    let n = s.step_scores.len() - s.truncated_steps;
    s.step_scores[..n]
        .iter()
        .map(|x| x.unwrap_or(f64::NAN))
        .collect()
}

fn num(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

fn err_json(kind: &str, message: &str) -> Value {
    json!({"kind": kind, "message": message})
}

async fn timed(
    state: &State,
    route: &'static str,
    f: impl std::future::Future<Output = Response>,
) -> Response {
    let started = Instant::now();
    let resp = f.await;
    state.metrics.record(
        route,
        resp.status().as_u16(),
        started.elapsed().as_micros() as u64,
    );
    resp
}

/// OpenRLHF: each query is prompt + response; the response (the query past
/// its prompt) is cut into steps and its reward is their aggregate.
async fn get_reward(AxumState(state): AxumState<Shared>, body: Bytes) -> Response {
    let s = Arc::clone(&state);
    timed(&state, "get_reward", async move {
        let result: Result<Response, ApiError> = async {
            let body = parse_body(&body)?;
            let queries = strings(&body, "query")?.ok_or_else(|| {
                error(
                    StatusCode::BAD_REQUEST,
                    "bad_request",
                    "`query` (an array of strings) is required",
                )
            })?;
            let prompts = strings(&body, "prompts")?;
            if let Some(p) = &prompts {
                if p.len() != queries.len() {
                    return Err(error(
                        StatusCode::BAD_REQUEST,
                        "bad_request",
                        format!("{} queries but {} prompts", queries.len(), p.len()),
                    ));
                }
            }
            let slots: Vec<Slot> = queries
                .iter()
                .enumerate()
                .map(|(i, q)| {
                    let prompt = prompts.as_ref().map_or("", |p| p[i].as_str());
                    let response = q.strip_prefix(prompt).unwrap_or(q);
                    let t = segment_response(prompt, response, &s.segmenter);
                    if t.steps.is_empty() {
                        Err(("input", format!("query {i} has no steps after its prompt")))
                    } else {
                        Ok(t)
                    }
                })
                .collect();
            let outcomes = run(&s, slots).await?;
            let mut rewards = Vec::new();
            let mut steps = Vec::new();
            let mut errors = Vec::new();
            for o in &outcomes {
                match o {
                    Ok(score) => {
                        let scored = scored_steps(score);
                        let r = aggregate(&scored, s.aggregation).filter(|v| v.is_finite());
                        rewards.push(r.unwrap_or(s.unscored_reward));
                        steps.push(json!(score.step_scores));
                        errors.push(Value::Null);
                    }
                    Err((kind, msg)) => {
                        rewards.push(s.unscored_reward);
                        steps.push(json!([]));
                        errors.push(err_json(kind, msg));
                    }
                }
            }
            let scores: Vec<f64> = rewards.iter().map(|r| r.clamp(0.0, 1.0)).collect();
            Ok(ok_json(json!({
                "rewards": rewards,
                "scores": scores,
                "step_scores": steps,
                "errors": errors,
            })))
        }
        .await;
        result.unwrap_or_else(IntoResponse::into_response)
    })
    .await
}

/// Per-step scores of rows in any format `stepscore score` reads.
async fn score(AxumState(state): AxumState<Shared>, body: Bytes) -> Response {
    let s = Arc::clone(&state);
    timed(&state, "score", async move {
        let result: Result<Response, ApiError> = async {
            let mut body = parse_body(&body)?;
            let rows = match body.remove("traces") {
                Some(Value::Array(rows)) => rows,
                _ => {
                    return Err(error(
                        StatusCode::BAD_REQUEST,
                        "bad_request",
                        "`traces` (an array of trace rows) is required",
                    ))
                }
            };
            let aggregation = match body.get("aggregation") {
                None => s.aggregation,
                Some(Value::String(a)) => a
                    .parse()
                    .map_err(|e: stepscore::Error| error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()))?,
                Some(_) => return Err(error(StatusCode::BAD_REQUEST, "bad_request", "`aggregation` must be a string")),
            };
            if rows.len() > s.max_traces {
                return Err(error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_many_traces",
                    format!("{} traces in one request, over the limit of {}", rows.len(), s.max_traces),
                ));
            }
            let slots = parse_rows(&rows, &s.segmenter);
            let outcomes = run(&s, slots).await?;
            let results: Vec<Value> = outcomes
                .iter()
                .map(|o| match o {
                    Ok(score) => {
                        let scored = scored_steps(score);
                        json!({
                            "step_scores": score.step_scores,
                            "score": num(aggregate(&scored, aggregation)),
                            "first_error": first_error(&scored, 0.5),
                            "tokens": score.tokens,
                            "truncated_steps": score.truncated_steps,
                            "error": Value::Null,
                        })
                    }
                    Err((kind, msg)) => json!({"step_scores": [], "score": Value::Null, "error": err_json(kind, msg)}),
                })
                .collect();
            Ok(ok_json(json!({"family": s.family, "results": results})))
        }
        .await;
        result.unwrap_or_else(IntoResponse::into_response)
    })
    .await
}

/// The rows through the core's reader, one JSONL line each, so they parse
/// exactly as `stepscore score` parses a file.
fn parse_rows(rows: &[Value], segmenter: &Segmenter) -> Vec<Slot> {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let opts = ReadOptions {
        segmenter: segmenter.clone(),
        source_name: "traces".into(),
        ..ReadOptions::default()
    };
    let mut out: Vec<Slot> = TraceReader::new(Cursor::new(text.into_bytes()), opts)
        .map(|r| r.map_err(|e| (super::queue::error_kind(&e), e.to_string())))
        .collect();
    out.resize_with(rows.len(), || {
        Err(("input", "the row could not be read".into()))
    });
    out
}

async fn health(AxumState(state): AxumState<Shared>) -> Response {
    let s = Arc::clone(&state);
    timed(&state, "health", async move {
        ok_json(json!({
            "status": "ok",
            "family": s.family,
            "queue": s.queue.depth(),
            "queue_capacity": s.queue.capacity(),
        }))
    })
    .await
}

async fn metrics(AxumState(state): AxumState<Shared>) -> Response {
    let text = state
        .metrics
        .render(state.queue.depth(), state.queue.capacity());
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}
