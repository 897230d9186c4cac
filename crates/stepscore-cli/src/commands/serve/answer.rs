//! Error answers: every one is JSON, `{"error": {"code", "message"}}`,
//! with a stable `code` that `/metrics` counts (the code travels to the
//! metrics layer as a response extension).

use std::time::Duration;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The code and message of an error answer, for the metrics layer (and
/// for the vLLM routes, which answer errors in vLLM's shape).
#[derive(Clone, Debug)]
pub struct ErrorCode {
    pub code: &'static str,
    pub message: String,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Option<Duration>,
    /// `WWW-Authenticate: Bearer` (401 answers).
    pub challenge: bool,
}

pub fn error(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        status,
        code,
        message: message.into(),
        retry_after: None,
        challenge: false,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": &self.message}});
        let mut resp = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response();
        if let Some(after) = self.retry_after {
            if let Ok(v) = HeaderValue::from_str(&after.as_secs().max(1).to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if self.challenge {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp.extensions_mut().insert(ErrorCode {
            code: self.code,
            message: self.message,
        });
        resp
    }
}

pub fn ok_json(v: Value) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}
