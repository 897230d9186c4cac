//! Request bodies into memory, bounded three ways: each body's size
//! (`--max-body-bytes`, 413), the bytes held by all requests at once
//! (`--max-body-memory`, 503 with Retry-After: a byte budget taken before
//! the bytes are read and held until the answer is built), and the time a
//! body may take to arrive (`--body-timeout`, 408: a client that sent
//! headers and stalls cannot hold a slot or delay shutdown for long).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, StatusCode};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::answer::{error, ApiError};
use super::metrics::Metrics;

pub struct BodyLimits {
    pub max_body_bytes: usize,
    pub timeout: Duration,
    /// One permit per byte of `--max-body-memory`.
    pub budget: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
}

/// A body read whole, with the budget its bytes hold until dropped.
pub struct Held {
    pub bytes: Vec<u8>,
    permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.metrics
            .body_bytes
            .dec_by(self.permit.num_permits() as i64);
    }
}

impl BodyLimits {
    pub async fn read(&self, headers: &HeaderMap, body: Body) -> Result<Held, ApiError> {
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(n) = declared {
            if n > self.max_body_bytes as u64 {
                return Err(self.too_large(n));
            }
        }
        // A declared length is reserved whole before reading; a chunked
        // body reserves each chunk as it comes.
        let mut held = Held {
            bytes: Vec::with_capacity(declared.unwrap_or(0) as usize),
            permit: self.reserve(declared.unwrap_or(0) as usize)?,
            metrics: Arc::clone(&self.metrics),
        };
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut body = body;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => {
                    return Err(error(
                        StatusCode::REQUEST_TIMEOUT,
                        "body_timeout",
                        format!(
                            "the body did not arrive within {:.1}s (--body-timeout)",
                            self.timeout.as_secs_f64()
                        ),
                    ))
                }
                Ok(None) => return Ok(held),
                Ok(Some(Err(e))) => {
                    return Err(error(
                        StatusCode::BAD_REQUEST,
                        "bad_body",
                        format!("reading the body: {e}"),
                    ))
                }
                Ok(Some(Ok(frame))) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue; // trailers
            };
            let total = held.bytes.len() + data.len();
            if total > self.max_body_bytes {
                return Err(self.too_large(total as u64));
            }
            let reserved = held.permit.num_permits();
            if total > reserved {
                held.permit.merge(self.reserve(total - reserved)?);
            }
            held.bytes.extend_from_slice(&data);
        }
    }

    fn reserve(&self, n: usize) -> Result<OwnedSemaphorePermit, ApiError> {
        let busy = || {
            ApiError {
            retry_after: Some(Duration::from_secs(1)),
            ..error(
                StatusCode::SERVICE_UNAVAILABLE,
                "memory_busy",
                "request bodies held in memory are at the server's limit (--max-body-memory); retry later",
            )
        }
        };
        let n32 = u32::try_from(n).map_err(|_| busy())?;
        let permit = Arc::clone(&self.budget)
            .try_acquire_many_owned(n32)
            .map_err(|_| busy())?;
        self.metrics.body_bytes.inc_by(n as i64);
        Ok(permit)
    }

    fn too_large(&self, n: u64) -> ApiError {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!(
                "the body is {n} bytes or more, over the limit of {} (--max-body-bytes)",
                self.max_body_bytes
            ),
        )
    }
}
