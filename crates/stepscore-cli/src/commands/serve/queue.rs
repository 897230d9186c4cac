//! Admission and batching: a bounded queue of traces in front of one
//! scoring thread. A request takes one permit per trace or is refused at
//! once (the caller answers 429); the worker gathers the jobs of many
//! clients into one engine pass, skips jobs whose client has gone (timed
//! out), and answers each job on its own channel. Permits are returned when
//! a job is answered, so the bound covers queued and running work alike.

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use stepscore::prm::{Scorer, TraceScore};
use stepscore::Trace;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::metrics::Metrics;

/// One trace's outcome: its scores, or the error kind and message.
pub type Outcome = Result<TraceScore, (&'static str, String)>;

struct Job {
    traces: Vec<Trace>,
    reply: oneshot::Sender<Vec<Outcome>>,
    _permit: OwnedSemaphorePermit,
}

/// Why a job was not queued.
pub enum Rejected {
    /// More traces than the queue can ever hold.
    TooLarge { capacity: usize },
    /// The queue is full now; try again after about this long.
    Full { retry_after: Duration },
    /// The server is shutting down.
    Closed,
}

pub struct Queue {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    permits: Arc<Semaphore>,
    capacity: usize,
    metrics: Arc<Metrics>,
}

impl Queue {
    /// The queue and the worker thread that drains it.
    pub fn start(
        scorer: Arc<Scorer>,
        capacity: usize,
        max_batch: usize,
        batch_wait: Duration,
        metrics: Arc<Metrics>,
    ) -> (Arc<Queue>, std::thread::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel();
        let queue = Arc::new(Queue {
            tx: Mutex::new(Some(tx)),
            permits: Arc::new(Semaphore::new(capacity)),
            capacity,
            metrics: Arc::clone(&metrics),
        });
        let worker = std::thread::Builder::new()
            .name("stepscore-scorer".into())
            .spawn(move || work(rx, &scorer, max_batch.max(1), batch_wait, &metrics))
            .expect("spawning the scoring thread");
        (queue, worker)
    }

    /// Queues `traces`; the receiver yields one outcome per trace, in order.
    pub fn submit(&self, traces: Vec<Trace>) -> Result<oneshot::Receiver<Vec<Outcome>>, Rejected> {
        let n = traces.len();
        if n > self.capacity {
            return Err(Rejected::TooLarge {
                capacity: self.capacity,
            });
        }
        let permit = match Arc::clone(&self.permits).try_acquire_many_owned(n as u32) {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Rejected::Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                return Err(Rejected::Full {
                    retry_after: self.drain_estimate(),
                })
            }
        };
        let (reply, rx) = oneshot::channel();
        let job = Job {
            traces,
            reply,
            _permit: permit,
        };
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => Ok(rx),
            _ => Err(Rejected::Closed),
        }
    }

    /// Traces queued or being scored.
    pub fn depth(&self) -> usize {
        self.capacity - self.permits.available_permits()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Stops taking jobs; the worker finishes those already queued.
    pub fn close(&self) {
        self.permits.close();
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// How long the queued work should take at the recent pace (at least 1 s).
    fn drain_estimate(&self) -> Duration {
        let scored = self.metrics.traces_scored.load(Ordering::Relaxed).max(1);
        let busy = self.metrics.score_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let per_trace = if busy > 0.0 {
            busy / scored as f64
        } else {
            0.1
        };
        Duration::from_secs_f64((per_trace * self.depth() as f64).ceil().max(1.0))
    }
}

fn work(
    rx: mpsc::Receiver<Job>,
    scorer: &Scorer,
    max_batch: usize,
    batch_wait: Duration,
    metrics: &Metrics,
) {
    while let Ok(first) = rx.recv() {
        // Gather other clients' jobs for a moment, up to max_batch traces.
        let mut n = first.traces.len();
        let mut batch = vec![first];
        let until = Instant::now() + batch_wait;
        while n < max_batch {
            let left = until.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(job) => {
                    n += job.traces.len();
                    batch.push(job);
                }
                Err(_) => break,
            }
        }
        metrics.batches.fetch_add(1, Ordering::Relaxed);
        metrics.batch_traces.fetch_add(n as u64, Ordering::Relaxed);
        for job in batch {
            if job.reply.is_closed() {
                // The client timed out or went away: its traces are not scored.
                metrics
                    .cancelled
                    .fetch_add(job.traces.len() as u64, Ordering::Relaxed);
                continue;
            }
            let started = Instant::now();
            let outcomes: Vec<Outcome> = job
                .traces
                .iter()
                .map(|t| scorer.score(t).map_err(|e| (error_kind(&e), e.to_string())))
                .collect();
            let micros = started.elapsed().as_micros() as u64;
            metrics.score_micros.fetch_add(micros, Ordering::Relaxed);
            let bad = outcomes.iter().filter(|o| o.is_err()).count() as u64;
            metrics.trace_errors.fetch_add(bad, Ordering::Relaxed);
            metrics
                .traces_scored
                .fetch_add(outcomes.len() as u64 - bad, Ordering::Relaxed);
            let _ = job.reply.send(outcomes);
        }
    }
}

/// A stable name per error kind, for clients to branch on.
pub fn error_kind(e: &stepscore::Error) -> &'static str {
    use stepscore::Error;
    match e {
        Error::Input { .. } => "input",
        Error::Io { .. } => "io",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::Model { .. } => "model",
        Error::TraceTooLong { .. } => "trace_too_long",
        Error::Tokenizer(_) => "tokenizer",
        Error::Gpu(_) => "gpu",
        Error::Internal(_) => "internal",
    }
}
