//! Counters for `/metrics`, in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    /// Requests answered, by route and status code.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    request_micros: AtomicU64,
    pub traces_scored: AtomicU64,
    pub trace_errors: AtomicU64,
    /// Traces skipped because their client had gone.
    pub cancelled: AtomicU64,
    pub batches: AtomicU64,
    pub batch_traces: AtomicU64,
    /// Time the worker spent scoring.
    pub score_micros: AtomicU64,
}

impl Metrics {
    pub fn record(&self, route: &'static str, status: u16, micros: u64) {
        *self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((route, status))
            .or_default() += 1;
        self.request_micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn render(&self, queue_depth: usize, queue_capacity: usize) -> String {
        let mut out = String::new();
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let _ = writeln!(out, "# TYPE stepscore_requests_total counter");
        let requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        let mut total = 0;
        for ((route, status), n) in requests.iter() {
            total += n;
            let _ = writeln!(
                out,
                "stepscore_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let lines: [(&str, &str, f64); 9] = [
            (
                "stepscore_request_seconds_sum",
                "counter",
                get(&self.request_micros) as f64 / 1e6,
            ),
            ("stepscore_request_seconds_count", "counter", total as f64),
            (
                "stepscore_traces_scored_total",
                "counter",
                get(&self.traces_scored) as f64,
            ),
            (
                "stepscore_trace_errors_total",
                "counter",
                get(&self.trace_errors) as f64,
            ),
            (
                "stepscore_traces_cancelled_total",
                "counter",
                get(&self.cancelled) as f64,
            ),
            (
                "stepscore_batches_total",
                "counter",
                get(&self.batches) as f64,
            ),
            (
                "stepscore_batch_traces_total",
                "counter",
                get(&self.batch_traces) as f64,
            ),
            ("stepscore_queue_traces", "gauge", queue_depth as f64),
            ("stepscore_queue_capacity", "gauge", queue_capacity as f64),
        ];
        for (name, kind, v) in lines {
            let _ = writeln!(out, "# TYPE {name} {kind}\n{name} {v}");
        }
        let _ = writeln!(
            out,
            "# TYPE stepscore_score_seconds_total counter\nstepscore_score_seconds_total {}",
            get(&self.score_micros) as f64 / 1e6
        );
        out
    }
}
