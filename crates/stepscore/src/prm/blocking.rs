//! Running an engine's async operations to completion on the calling
//! thread: how the `Scorer`'s blocking API wraps the async one.

use std::future::Future;

#[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
use crate::Error;
use crate::Result;

/// Runs an engine future to completion on this thread. Natively every wait
/// of the GPU engine happens inside the future (`device.poll`), and the CPU
/// engine's futures are ready at once; in a browser a GPU readback needs
/// the event loop, so a future still pending after one poll is refused
/// (callers check `Engine::async_only` first, so nothing is left
/// half-submitted).
pub(crate) fn block_on<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
    {
        pollster::block_on(f)
    }
    #[cfg(not(all(feature = "gpu", not(target_arch = "wasm32"))))]
    {
        use std::task::{Context, Poll, Waker};
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => Err(Error::InvalidArgument(ASYNC_ONLY.into())),
        }
    }
}

pub(crate) const ASYNC_ONLY: &str = "this scorer runs on WebGPU, where results arrive asynchronously: use the async methods (score_async, append_async)";
