//! Admission and batching: a bounded queue of traces in front of one
//! scoring thread. A request takes one permit per trace or is refused at
//! once (the caller answers 429); the worker gathers the jobs of many
//! clients into one engine pass, skips jobs whose client has gone (timed
//! out), and answers each job on its own channel. Permits are returned when
//! a job is answered, so the bound covers queued and running work alike.

use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use stepscore::prm::{Scorer, TraceScore};
use stepscore::Trace;
use tokio::sync::{oneshot, OwnedSemaphorePermit, Semaphore};

use super::metrics::{CodeLabels, Metrics};
use super::request::{error_code, RowError};

/// One trace's outcome: its scores, or why it has none.
pub type Outcome = Result<TraceScore, RowError>;

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
        let scored = self.metrics.traces_scored.get().max(1);
        let busy = self.metrics.score_seconds.get();
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
        metrics.batches.inc();
        metrics.batch_traces.inc_by(n as u64);
        for job in batch {
            if job.reply.is_closed() {
                // The client timed out or went away: its traces are not scored.
                metrics.cancelled.inc_by(job.traces.len() as u64);
                continue;
            }
            let started = Instant::now();
            let outcomes: Vec<Outcome> =
                job.traces.iter().map(|t| finite(scorer.score(t))).collect();
            metrics
                .score_seconds
                .inc_by(started.elapsed().as_secs_f64());
            for o in &outcomes {
                match o {
                    Ok(_) => metrics.traces_scored.inc(),
                    Err(e) => metrics
                        .trace_errors
                        .get_or_create(&CodeLabels { code: e.code })
                        .inc(),
                };
            }
            let _ = job.reply.send(outcomes);
        }
    }
}

/// The engine's result as an outcome; a step score that is not a finite
/// number is this trace's error, never a reward (whatever the engine let
/// through: a head with NaN weights, a corrupt output tensor).
fn finite(scored: stepscore::Result<TraceScore>) -> Outcome {
    let score = scored.map_err(|e| RowError {
        code: error_code(&e),
        message: e.to_string(),
    })?;
    if let Some(i) = score
        .step_scores
        .iter()
        .position(|s| s.is_some_and(|x| !x.is_finite()))
    {
        return Err(RowError {
            code: "non_finite_score",
            message: format!(
                "step {} scored {:?}: the model or head produced a non-finite value",
                i + 1,
                score.step_scores[i].unwrap_or_default()
            ),
        });
    }
    Ok(score)
}
