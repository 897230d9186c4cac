//! Connections: hyper's HTTP/1 server under the router, with a header
//! read timeout (which also closes keep-alive connections idle that long),
//! a bound on open connections, and hyper-util's graceful shutdown with a
//! deadline: on the signal the listener closes, idle connections close,
//! requests being answered finish, and whatever is still open at the
//! deadline (a client stalled mid-body) is dropped.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::metrics::Metrics;

pub struct ConnLimits {
    pub header_timeout: Duration,
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
        let conn =
            builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        let metrics = Arc::clone(&metrics);
        metrics.connections.inc();
        tokio::spawn(async move {
            let _ = conn.await;
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
