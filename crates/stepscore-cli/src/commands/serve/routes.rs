//! The HTTP routes: request bodies in, queue jobs out, JSON answers back.
//! Request-level failures answer with a status and a JSON error (400, 401,
//! 403, 404, 405, 408, 413, 415, 421, 429, 503, 504); a trace that cannot
//! be scored is reported in its own slot of a 200 answer, and the other
//! traces are still scored. Every answer is counted in `/metrics` by
//! route, status and error code, with its latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Request, State as AxumState};
use axum::http::{StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use stepscore::aggregate::{aggregate, Aggregation};
use stepscore::segment::Segmenter;

use super::access::Access;
use super::answer::{error, ok_json, ApiError, ErrorCode};
use super::body::BodyLimits;
use super::metrics::{CodeLabels, Metrics};
use super::queue::{Outcome, Queue, Rejected};
use super::request::{self, BadRequest, Limits, RowError, Slot};
use super::vllm::{self, Encoding, Pooled, Route};

/// Token ids back to text with the served model's tokenizer (vLLM's
/// token-id `input`).
pub type Decoder = dyn Fn(&[u32]) -> Result<String, String> + Send + Sync;

pub struct State {
    pub queue: Arc<Queue>,
    pub metrics: Arc<Metrics>,
    pub family: &'static str,
    /// The model's name in `/v1/models` and `/pooling` (`--served-model-name`).
    pub model_name: String,
    pub segmenter: Segmenter,
    pub aggregation: Aggregation,
    /// The step threshold of `first_error` (`Scorer::threshold_in_force`).
    pub threshold: f64,
    /// `/get_reward`'s reward for a trace that cannot be scored.
    pub unscored_reward: f64,
    pub limits: Limits,
    pub timeout: Duration,
    pub body: BodyLimits,
    pub access: Access,
    pub decode: Box<Decoder>,
}

type Shared = Arc<State>;

pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/get_reward", post(get_reward))
        .route(SCORE_ROUTE, post(score))
        .route(OLD_SCORE_ROUTE, post(score_old_path))
        .route("/pooling", post(pooling))
        .route("/classify", post(classify))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), observe))
        .with_state(state)
}

/// stepscore's own per-step scoring route.
pub const SCORE_ROUTE: &str = "/v1/score_steps";
/// Its path before issue 41: vLLM serves its cross-encoder score API
/// there. Kept for one release, answering with a deprecation header.
const OLD_SCORE_ROUTE: &str = "/v1/score";

/// The routes, as the 404 answer and the startup line list them.
pub const ROUTES: &str = "POST /get_reward, POST /v1/score_steps, POST /pooling, POST /classify, \
    GET /v1/models, GET /health, GET /metrics (POST /v1/score: deprecated alias of /v1/score_steps)";

/// The metrics label of a path: a route's name, or `other`.
fn route_name(path: &str) -> &'static str {
    match path {
        "/get_reward" => "get_reward",
        SCORE_ROUTE => "score",
        OLD_SCORE_ROUTE => "score_deprecated_path",
        "/pooling" => "pooling",
        "/classify" => "classify",
        "/v1/models" => "models",
        "/health" => "health",
        "/metrics" => "metrics",
        _ => "other",
    }
}

/// Outermost layer: counts every answer (the guard's refusals, 404s and
/// 405s included) with its latency and error code, and gives the vLLM
/// routes' errors vLLM's shape.
async fn observe(AxumState(s): AxumState<Shared>, req: Request, next: Next) -> Response {
    let route = route_name(req.uri().path());
    let started = Instant::now();
    let mut resp = next.run(req).await;
    let code = resp.extensions().get::<ErrorCode>().map(|c| c.code);
    if matches!(route, "pooling" | "classify") {
        if let Some(e) = resp.extensions().get::<ErrorCode>() {
            let body = vllm::error_body(resp.status().as_u16(), e.code, &e.message).to_string();
            *resp.body_mut() = axum::body::Body::from(body);
            resp.headers_mut()
                .remove(axum::http::header::CONTENT_LENGTH);
        }
    }
    s.metrics.record(
        route,
        resp.status().as_u16(),
        code,
        started.elapsed().as_secs_f64(),
    );
    resp
}

async fn guard(AxumState(s): AxumState<Shared>, req: Request, next: Next) -> Response {
    match s
        .access
        .check(req.method(), req.uri().path(), req.headers())
    {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

async fn not_found(uri: Uri) -> ApiError {
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no route {}: the routes are {ROUTES}", uri.path()),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

fn bad_request(e: BadRequest) -> ApiError {
    let status = if e.code == "too_many_traces" {
        StatusCode::PAYLOAD_TOO_LARGE
    } else {
        StatusCode::BAD_REQUEST
    };
    error(status, e.code, e.message)
}

/// Queues the good traces, waits for them within the timeout, and puts
/// every outcome back in its slot.
async fn run(state: &State, slots: Vec<Slot>) -> Result<Vec<Outcome>, ApiError> {
    let mut traces = Vec::new();
    let mut out: Vec<Option<Outcome>> = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Ok(t) => {
                traces.push(t);
                out.push(None);
            }
            Err(e) => {
                state
                    .metrics
                    .trace_errors
                    .get_or_create(&super::metrics::CodeLabels { code: e.code })
                    .inc();
                out.push(Some(Err(e)));
            }
        }
    }
    if !traces.is_empty() {
        let rx = state.queue.submit(traces).map_err(|r| match r {
            Rejected::TooLarge { capacity } => error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_traces",
                format!("the request's traces can never fit the queue of {capacity} (--queue)"),
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
                    format!(
                        "not scored within {:.1}s (--timeout)",
                        state.timeout.as_secs_f64()
                    ),
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
        .map(|o| {
            o.unwrap_or_else(|| {
                Err(RowError {
                    code: "internal",
                    message: "no result for this trace".into(),
                })
            })
        })
        .collect())
}

fn num(x: Option<f64>) -> Value {
    match x {
        Some(v) if v.is_finite() => json!(v),
        _ => Value::Null,
    }
}

fn err_json(e: &RowError) -> Value {
    json!({"code": e.code, "message": e.message})
}

/// Reads the body within the limits, or the answer that says why not.
async fn read_body(s: &State, req: Request) -> Result<super::body::Held, ApiError> {
    let (parts, body) = req.into_parts();
    s.body.read(&parts.headers, body).await
}

/// OpenRLHF: each query is prompt + response; the response (the query past
/// its prompt) is cut into steps and its reward is their aggregate.
async fn get_reward(AxumState(s): AxumState<Shared>, req: Request) -> Result<Response, ApiError> {
    let body = read_body(&s, req).await?;
    let slots = request::get_reward(&body.bytes, &s.segmenter, &s.limits).map_err(bad_request)?;
    let outcomes = run(&s, slots).await?;
    let mut rewards = Vec::new();
    let mut steps = Vec::new();
    let mut errors = Vec::new();
    for (i, o) in outcomes.iter().enumerate() {
        let (reward, step_scores, error) = match o {
            Ok(score) => {
                match aggregate(&score.scored().scores, s.aggregation).filter(|v| v.is_finite()) {
                    Some(r) => (r, json!(score.step_scores), None),
                    None => {
                        // Scored, yet no step has a score to aggregate.
                        let e = RowError {
                            code: "no_score",
                            message: "no step of the response has a score to aggregate".into(),
                        };
                        s.metrics
                            .trace_errors
                            .get_or_create(&CodeLabels { code: e.code })
                            .inc();
                        (s.unscored_reward, json!(score.step_scores), Some(e))
                    }
                }
            }
            Err(e) => (s.unscored_reward, json!([]), Some(e.clone())),
        };
        if let Some(e) = &error {
            eprintln!(
                "stepscore serve: /get_reward query {i} unscored ({}: {}); reward {}",
                e.code, e.message, s.unscored_reward
            );
        }
        rewards.push(reward);
        steps.push(step_scores);
        errors.push(error.as_ref().map_or(Value::Null, err_json));
    }
    let scores: Vec<f64> = rewards.iter().map(|r| r.clamp(0.0, 1.0)).collect();
    Ok(ok_json(json!({
        "rewards": rewards,
        "scores": scores,
        "step_scores": steps,
        "errors": errors,
    })))
}

/// `/v1/score`, the old path of [`score`]: the same answer, marked
/// deprecated (RFC 9745's `Deprecation` header, and a `Link` to the
/// successor).
async fn score_old_path(s: AxumState<Shared>, req: Request) -> Result<Response, ApiError> {
    let mut resp = score(s, req).await?;
    let h = resp.headers_mut();
    h.insert("deprecation", axum::http::HeaderValue::from_static("true"));
    h.insert(
        axum::http::header::LINK,
        axum::http::HeaderValue::from_static("</v1/score_steps>; rel=\"successor-version\""),
    );
    Ok(resp)
}

/// Per-step scores of rows in any format `stepscore score` reads.
async fn score(AxumState(s): AxumState<Shared>, req: Request) -> Result<Response, ApiError> {
    let body = read_body(&s, req).await?;
    let parsed = request::score(&body.bytes, &s.segmenter, &s.limits).map_err(bad_request)?;
    let aggregation = parsed.aggregation.unwrap_or(s.aggregation);
    let ids: Vec<Option<String>> = parsed
        .slots
        .iter()
        .map(|t| t.as_ref().ok().and_then(|t| t.id.clone()))
        .collect();
    let outcomes = run(&s, parsed.slots).await?;
    let results: Vec<Value> = outcomes
        .iter()
        .zip(ids)
        .map(|(o, id)| match o {
            Ok(score) => {
                let scored = score.scored();
                json!({
                    "id": id,
                    "step_scores": score.step_scores,
                    "score": num(aggregate(&scored.scores, aggregation)),
                    "first_error": scored.first_error(s.threshold),
                    "tokens": score.tokens,
                    "truncated_steps": score.truncated_steps,
                    "error": Value::Null,
                })
            }
            Err(e) => {
                json!({"id": id, "step_scores": [], "score": Value::Null, "error": err_json(e)})
            }
        })
        .collect();
    Ok(ok_json(
        json!({"family": s.family, "threshold": s.threshold, "results": results}),
    ))
}

/// Numbers the vLLM routes' answers within this process.
static VLLM_IDS: AtomicU64 = AtomicU64::new(0);

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// vLLM's pooling API for a process reward model: per input, one
/// `[p_incorrect, p_correct]` pair per step (or per input with `task:
/// classify`).
async fn pooling(AxumState(s): AxumState<Shared>, req: Request) -> Result<Response, ApiError> {
    vllm_route(&s, req, Route::Pooling).await
}

/// vLLM's classification API (verl's reward-model path posts here and
/// reads `data[-1].probs[-1]`): per input, the pair of the trace's
/// aggregate score (`--aggregation`).
async fn classify(AxumState(s): AxumState<Shared>, req: Request) -> Result<Response, ApiError> {
    vllm_route(&s, req, Route::Classify).await
}

/// Both vLLM routes. Their answer has no slot for a per-input error, so an
/// input that cannot be scored fails the request (naming every such
/// input), as vLLM fails a request it cannot run.
async fn vllm_route(s: &State, req: Request, route: Route) -> Result<Response, ApiError> {
    let body = read_body(s, req).await?;
    let parsed =
        vllm::read(&body.bytes, route, &s.limits, &s.segmenter, &*s.decode).map_err(bad_request)?;
    if let Some(m) = &parsed.model {
        if *m != s.model_name {
            return Err(error(
                StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "the model `{m}` is not served here; this server serves `{}`",
                    s.model_name
                ),
            ));
        }
    }
    let outcomes = run(s, parsed.slots).await?;
    let mut failed = Vec::new();
    let mut values: Vec<Vec<[f64; 2]>> = Vec::new();
    let mut tokens = 0;
    for (i, o) in outcomes.iter().enumerate() {
        match o {
            Ok(score) if score.truncated_steps > 0 => failed.push((
                i,
                RowError {
                    code: "trace_too_long",
                    message: format!(
                        "{} steps past the token limit were not scored",
                        score.truncated_steps
                    ),
                },
            )),
            Ok(score) => {
                tokens += score.tokens;
                let steps = score.scored().scores;
                let probs = match parsed.pooled {
                    Pooled::PerStep => steps,
                    Pooled::PerInput => match aggregate(&steps, s.aggregation) {
                        Some(r) if r.is_finite() => vec![r],
                        _ => {
                            failed.push((
                                i,
                                RowError {
                                    code: "no_score",
                                    message: "no step has a score to aggregate".into(),
                                },
                            ));
                            continue;
                        }
                    },
                };
                values.push(
                    probs
                        .iter()
                        .map(|&p| vllm::pair(p, parsed.activation))
                        .collect(),
                );
            }
            Err(e) => failed.push((i, e.clone())),
        }
    }
    if let Some((_, first)) = failed.first() {
        let input_error = matches!(
            first.code,
            "input" | "trace_too_long" | "prompt_not_prefix" | "tokenizer" | "invalid_argument"
        );
        let message = failed
            .iter()
            .map(|(i, e)| format!("input {i}: {} ({})", e.message, e.code))
            .collect::<Vec<_>>()
            .join("; ");
        let status = if input_error {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::INTERNAL_SERVER_ERROR
        };
        return Err(error(status, first.code, message));
    }
    let data: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, pairs)| match route {
            Route::Classify => {
                let probs = pairs[0];
                json!({
                    "index": i,
                    // vLLM's label: the class of the larger value.
                    "label": if probs[1] > probs[0] { "correct" } else { "incorrect" },
                    "probs": probs,
                    "num_classes": 2,
                })
            }
            Route::Pooling => {
                let data = match (parsed.encoding, parsed.pooled) {
                    (Encoding::Float, Pooled::PerStep) => json!(pairs),
                    (Encoding::Float, Pooled::PerInput) => json!(pairs[0]),
                    (Encoding::Base64 { big_endian }, _) => {
                        let flat: Vec<f64> = pairs.iter().flatten().copied().collect();
                        json!(vllm::base64_f32(&flat, big_endian))
                    }
                };
                json!({"index": i, "object": "pooling", "data": data})
            }
        })
        .collect();
    let prefix = match route {
        Route::Pooling => "pool",
        Route::Classify => "classify",
    };
    let id = match &parsed.request_id {
        Some(r) => format!("{prefix}-{r}"),
        None => format!(
            "{prefix}-{}-{}",
            unix_now(),
            VLLM_IDS.fetch_add(1, Ordering::Relaxed)
        ),
    };
    Ok(ok_json(json!({
        "id": id,
        "object": "list",
        "created": unix_now(),
        "model": s.model_name,
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0},
    })))
}

async fn models(AxumState(s): AxumState<Shared>) -> Response {
    ok_json(json!({
        "object": "list",
        "data": [{"id": s.model_name, "object": "model", "created": unix_now(), "owned_by": "stepscore"}],
    }))
}

async fn health(AxumState(s): AxumState<Shared>) -> Response {
    ok_json(json!({
        "status": "ok",
        "family": s.family,
        "queue": s.queue.depth(),
        "queue_capacity": s.queue.capacity(),
    }))
}

async fn metrics(AxumState(s): AxumState<Shared>) -> Response {
    s.metrics.queue_traces.set(s.queue.depth() as i64);
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}
