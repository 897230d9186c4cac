//! A scorer's GPU state (device, uploaded model and head) and its recovery:
//! a call that fails with [`Error::Gpu`] drops the state, and the next call
//! creates a new device and uploads again, so a lost device costs one
//! failed call. The same async code runs natively (where every wait inside
//! completes before the future returns) and in browsers (where the event
//! loop drives device creation and readbacks).

use std::sync::{Arc, Mutex, MutexGuard};

use super::head::Head;
use crate::error::{Error, Result};
use crate::gpu::{AdapterReport, GpuContext, GpuMatrix, GpuOptions, GpuTransformer, PoolStats};
use crate::model::Transformer;

/// Device, model and head, uploaded together.
pub(crate) struct GpuState {
    pub ctx: Arc<GpuContext>,
    pub model: GpuTransformer,
    pub head: Option<Head<GpuMatrix>>,
}

impl GpuState {
    async fn build(model: &Transformer, head: Option<&Head>) -> Result<GpuState> {
        let ctx = Arc::new(GpuContext::new_async(GpuOptions::default()).await?);
        let gm = GpuTransformer::upload(ctx.clone(), model)?;
        let head = head.map(|h| h.upload(&gm)).transpose()?;
        #[cfg(not(target_arch = "wasm32"))]
        ctx.wait_idle()?;
        // Upload errors are reported by the device callback, not the calls.
        ctx.check()?;
        Ok(GpuState {
            ctx,
            model: gm,
            head,
        })
    }

    pub fn head(&self) -> Result<&Head<GpuMatrix>> {
        self.head.as_ref().ok_or_else(|| {
            Error::InvalidArgument(
                "this model was opened as a backbone for feature extraction, without a head: it cannot score"
                    .into(),
            )
        })
    }
}

pub(crate) struct GpuRuntime {
    state: Mutex<Option<Arc<GpuState>>>,
}

fn lock(m: &Mutex<Option<Arc<GpuState>>>) -> MutexGuard<'_, Option<Arc<GpuState>>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuRuntime {
    /// Creates the device and uploads `model` (and `head`) now, so a
    /// scorer that cannot run on the GPU fails (or falls back) at load.
    pub async fn new(
        model: &Transformer,
        head: Option<&Head>,
    ) -> Result<(GpuRuntime, AdapterReport)> {
        let st = GpuState::build(model, head).await?;
        let report = st.ctx.adapter().clone();
        let state = Mutex::new(Some(Arc::new(st)));
        Ok((GpuRuntime { state }, report))
    }

    /// Runs `f` on the current state (recreated first if a previous call
    /// failed on the device). An [`Error::Gpu`] from `f` drops the state.
    /// No lock is held while `f` runs, so concurrent calls (browser
    /// promises) share the state.
    pub async fn run<T>(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        f: impl AsyncFnOnce(&GpuState) -> Result<T>,
    ) -> Result<T> {
        let current = lock(&self.state).clone();
        let st = match current {
            Some(st) => st,
            None => {
                let st = Arc::new(GpuState::build(model, head).await?);
                // Another call may have rebuilt it meanwhile; the first one stays.
                lock(&self.state).get_or_insert_with(|| st.clone()).clone()
            }
        };
        let out = match st.ctx.check() {
            Ok(()) => f(&st).await,
            Err(e) => Err(e),
        };
        if let Err(Error::Gpu(_)) = &out {
            let mut guard = lock(&self.state);
            if guard.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, &st)) {
                *guard = None;
            }
        }
        out
    }

    pub fn pool_stats(&self) -> Option<PoolStats> {
        lock(&self.state).as_ref().map(|st| st.ctx.pool_stats())
    }

    pub fn destroy_device(&self) {
        if let Some(st) = lock(&self.state).as_ref() {
            st.ctx.destroy_device();
        }
    }
}
