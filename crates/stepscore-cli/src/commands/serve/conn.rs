//! Connections: hyper's HTTP/1 server under the router, with a header
//! read timeout (which also closes keep-alive connections idle that long),
//! a write timeout (a client that leaves its answers unread, e.g. one that
//! pipelines requests and never reads, is closed once the server's writes
//! have made no progress that long), a bound on open connections, and
//! hyper-util's graceful shutdown with a
//! deadline: on the signal the listener closes, idle connections close,
//! requests being answered finish, and whatever is still open at the
//! deadline (a client stalled mid-body) is dropped. hyper's own
//! rejections (400, 414, 431 for a head it cannot parse) are answered in
//! JSON and counted (see `rejection.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::metrics::Metrics;
use super::rejection::{describe, Rejections};

/// The `/metrics` route label of hyper's own rejections: no route was read.
const UNPARSED_ROUTE: &str = "unparsed";

pub struct ConnLimits {
    pub header_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    pub shutdown_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` resolves, then drains.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ConnLimits,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    tokio::pin!(shutdown);
    loop {
        // At the limit, new connections wait in the kernel's backlog until
        // one closes (a stalled one closes at the header timeout).
        let slot = tokio::select! {
            s = Arc::clone(&slots).acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: pause, then go on
                    // (stalled connections are closed by their timeouts).
                    eprintln!("stepscore: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let io = Rejections::new(WriteTimeout::new(
            TokioIo::new(stream),
            limits.write_timeout,
        ));
        let rejected = io.seen();
        let conn = builder.serve_connection(io, TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        let metrics = Arc::clone(&metrics);
        metrics.connections.inc();
        tokio::spawn(async move {
            let _ = conn.await;
            // hyper's own rejection of a head it could not parse (it never
            // reached the router's metrics layer).
            let status = rejected.load(Ordering::Relaxed);
            if let Some((code, _)) = describe(status) {
                metrics.record_rejection(UNPARSED_ROUTE, status, code);
            }
            metrics.connections.dec();
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        eprintln!(
            "stepscore: {} connection(s) still open at the shutdown deadline ({:.1}s); dropped",
            metrics.connections.get(),
            limits.shutdown_timeout.as_secs_f64()
        );
    }
}

/// A connection whose writes fail (`TimedOut`) once they have made no
/// progress for `timeout`: the client is not reading (its receive window and
/// our send buffer are full). hyper then closes the connection and its slot
/// is free. The clock starts when a write, flush or shutdown is pending and
/// stops whenever one completes; reads are not timed here (the header and
/// body timeouts do that).
struct WriteTimeout<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteTimeout<T> {
    fn new(inner: T, timeout: Duration) -> Self {
        WriteTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Passes on a write's result, timing it while it is pending.
    fn timed<R>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<R>>,
    ) -> Poll<std::io::Result<R>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing of its answer for {:.1}s (--write-timeout)",
                    timeout.as_secs_f64()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: hyper::rt::Read + Unpin> hyper::rt::Read for WriteTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: hyper::rt::Write + Unpin> hyper::rt::Write for WriteTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.timed(cx, r)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.timed(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.timed(cx, r)
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
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.timed(cx, r)
    }
}
