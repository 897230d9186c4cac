//! hyper's own rejections, answered in the server's error shape and counted.
//!
//! A request whose head hyper cannot parse never reaches the router: hyper
//! (1.x, `proto::h1` `on_parse_error`) writes an automatic answer itself —
//! 400 for a malformed request line or header, 431 for a head over
//! `max_buf_size` or `max_headers`, 414 for an over-long URI — with an empty
//! body, and closes the connection. Its builder has no hook for that answer
//! (the service is never called; the connection future only returns the
//! `hyper::Error` after the answer is written). So the connection's IO is
//! wrapped: a write that is exactly such an automatic answer (one of those
//! three statuses, `content-length: 0`, no `content-type`, the whole head
//! and nothing else in one buffer) is replaced by the same head with a JSON
//! body `{"error": {"code", "message"}}` and `connection: close`. Every
//! answer of the router carries `content-type: application/json`, so none
//! is mistaken for one. The status seen is kept for `/metrics`
//! ([`Rejections::seen`]).
//!
//! One case is left as hyper writes it: a malformed head pipelined behind
//! a request whose answer hyper could not yet flush (the client is not
//! reading) shares hyper's write buffer with that answer, so the buffer is
//! not a head alone; hyper's empty answer then goes out unchanged and is
//! not counted (the bytes before it are a body whose framing this wrapper
//! does not parse).

use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};

/// What a rejection is counted and answered as: (code, message).
pub fn describe(status: u16) -> Option<(&'static str, &'static str)> {
    match status {
        400 => Some((
            "malformed_request",
            "the request is not valid HTTP/1.1: its request line or a header could not be parsed",
        )),
        431 => Some((
            "headers_too_large",
            "the request's head is too large: over the server's limit on header bytes or on the number of headers",
        )),
        414 => Some(("uri_too_long", "the request's URI is too long")),
        _ => None,
    }
}

/// The JSON answer replacing `head` when it is one of hyper's automatic
/// rejections; `None` for anything else.
fn replacement(head: &[u8]) -> Option<(u16, Vec<u8>)> {
    let text = std::str::from_utf8(head).ok()?;
    let text = text.strip_suffix("\r\n\r\n")?;
    if text.contains("\r\n\r\n") {
        return None;
    }
    let mut lines = text.split("\r\n");
    let status_line = lines.next()?;
    let status: u16 = status_line
        .strip_prefix("HTTP/1.1 ")?
        .get(..3)?
        .parse()
        .ok()?;
    let (code, message) = describe(status)?;
    let mut kept = Vec::new();
    let mut empty = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let name = name.trim().to_ascii_lowercase();
        match name.as_str() {
            "content-length" => empty = value.trim() == "0",
            "content-type" | "transfer-encoding" => return None,
            "connection" => {}
            _ => kept.push(line),
        }
    }
    if !empty {
        return None;
    }
    let body = serde_json::json!({"error": {"code": code, "message": message}}).to_string();
    let mut out = format!("{status_line}\r\ncontent-type: application/json\r\n");
    out += &format!("content-length: {}\r\nconnection: close\r\n", body.len());
    for line in kept {
        out += line;
        out += "\r\n";
    }
    out += "\r\n";
    out += &body;
    Some((status, out.into_bytes()))
}

/// The connection's IO with hyper's automatic rejections replaced (module
/// docs).
pub struct Rejections<T> {
    inner: T,
    /// The replacement still being written, and how much of it is out; the
    /// length of hyper's buffer it stands for.
    pending: Option<(Vec<u8>, usize, usize)>,
    seen: Arc<AtomicU16>,
}

impl<T> Rejections<T> {
    pub fn new(inner: T) -> Self {
        Rejections {
            inner,
            pending: None,
            seen: Arc::new(AtomicU16::new(0)),
        }
    }

    /// The status of the automatic rejection answered on this connection
    /// (0: none), readable after the connection is gone.
    pub fn seen(&self) -> Arc<AtomicU16> {
        Arc::clone(&self.seen)
    }
}

impl<T: hyper::rt::Write + Unpin> Rejections<T> {
    /// Writes the pending replacement; `Ready(Ok(n))` with the length of
    /// hyper's buffer once all of it is out.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        while let Some((bytes, done, stands_for)) = self.pending.as_mut() {
            if *done == bytes.len() {
                let n = *stands_for;
                self.pending = None;
                return Poll::Ready(Ok(n));
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*done..]))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            *done += n;
        }
        Poll::Ready(Ok(0))
    }

    /// Starts replacing `buf` when it is an automatic rejection.
    fn intercept(&mut self, buf: &[u8]) {
        if self.pending.is_none() {
            if let Some((status, bytes)) = replacement(buf) {
                self.seen.store(status, Ordering::Relaxed);
                self.pending = Some((bytes, 0, buf.len()));
            }
        }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for Rejections<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for Rejections<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        this.intercept(buf);
        if this.pending.is_some() {
            return this.drain(cx);
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // A pending replacement is finished by hyper's next `poll_write` of
        // the same buffer (draining it here would let that call start it
        // again).
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.pending.is_some() {
            ready!(this.drain(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        // An automatic rejection is a head alone: one non-empty slice.
        let mut nonempty = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(first), None) = (nonempty.next(), nonempty.next()) {
            this.intercept(first);
        }
        if this.pending.is_some() {
            return this.drain(cx);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_empty_rejections_are_replaced_and_others_kept() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Sat, 05 Dec 2026 07:00:00 GMT\r\n\r\n";
        let (status, out) = replacement(head).expect("replaced");
        assert_eq!(status, 431);
        let out = String::from_utf8(out).unwrap();
        let (h, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(
            h.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{h}"
        );
        assert!(h.contains("content-type: application/json"), "{h}");
        assert!(
            h.contains(&format!("content-length: {}", body.len())),
            "{h}"
        );
        assert!(h.contains("date: Sat, 05 Dec 2026"), "{h}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "headers_too_large");
        // The router's own answers carry a content type, or a body.
        for other in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        ] {
            assert!(replacement(other).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }
}
