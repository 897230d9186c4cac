//! `/metrics`: counters, gauges and a latency histogram kept and encoded
//! by prometheus-client (the text exposition format).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: &'static str,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: &'static str,
}

pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status.
    pub requests: Family<RequestLabels, Counter>,
    /// Error answers (any status >= 400, request-level), by code.
    pub errors: Family<CodeLabels, Counter>,
    /// Seconds from the request's head to its answer, by route.
    pub latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    pub traces_scored: Counter,
    /// Traces answered with an error in their slot, by code.
    pub trace_errors: Family<CodeLabels, Counter>,
    /// Traces skipped because their client had gone.
    pub cancelled: Counter,
    pub batches: Counter,
    pub batch_traces: Counter,
    /// Time the worker spent scoring.
    pub score_seconds: Counter<f64, AtomicU64>,
    pub queue_traces: Gauge,
    pub queue_capacity: Gauge,
    pub connections: Gauge,
    /// Request body bytes held in memory now.
    pub body_bytes: Gauge,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("stepscore");
        let m = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            errors: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            traces_scored: Counter::default(),
            trace_errors: Family::default(),
            cancelled: Counter::default(),
            batches: Counter::default(),
            batch_traces: Counter::default(),
            score_seconds: Counter::default(),
            queue_traces: Gauge::default(),
            queue_capacity: Gauge::default(),
            connections: Gauge::default(),
            body_bytes: Gauge::default(),
        };
        // The registry holds clones: each metric shares its value with them.
        let r = &mut registry;
        r.register("requests", "Requests answered", m.requests.clone());
        r.register("errors", "Error answers by code", m.errors.clone());
        r.register("request_seconds", "Request latency", m.latency.clone());
        r.register("traces_scored", "Traces scored", m.traces_scored.clone());
        r.register(
            "trace_errors",
            "Traces not scored, by code",
            m.trace_errors.clone(),
        );
        r.register(
            "traces_cancelled",
            "Traces skipped: their client had gone",
            m.cancelled.clone(),
        );
        r.register("batches", "Engine passes", m.batches.clone());
        r.register(
            "batch_traces",
            "Traces in engine passes",
            m.batch_traces.clone(),
        );
        r.register(
            "score_seconds",
            "Time spent scoring",
            m.score_seconds.clone(),
        );
        r.register(
            "queue_traces",
            "Traces queued or being scored",
            m.queue_traces.clone(),
        );
        r.register(
            "queue_capacity",
            "The queue's bound (--queue)",
            m.queue_capacity.clone(),
        );
        r.register("connections", "Open connections", m.connections.clone());
        r.register(
            "body_bytes",
            "Request body bytes held in memory",
            m.body_bytes.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    /// Counts one answer: its route and status, its error code (if any)
    /// and its latency.
    pub fn record(&self, route: &'static str, status: u16, code: Option<&'static str>, secs: f64) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
        if let Some(code) = code {
            self.errors.get_or_create(&CodeLabels { code }).inc();
        }
        self.latency
            .get_or_create(&RouteLabels { route })
            .observe(secs);
    }

    /// Counts one of hyper's own rejections (a head it could not parse):
    /// no route was read and no handler ran, so no latency is observed.
    pub fn record_rejection(&self, route: &'static str, status: u16, code: &'static str) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
        self.errors.get_or_create(&CodeLabels { code }).inc();
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
