//! The WGSL engine: a scorer's GPU state (device, uploaded model and head),
//! the engine operations on it, and its recovery:
//! a call that fails with [`Error::Gpu`] drops the state, and the next call
//! creates a new device and uploads again, so a lost device costs one
//! failed call. The same async code runs natively (where every wait inside
//! completes before the future returns) and in browsers (where the event
//! loop drives device creation and readbacks).

use std::sync::{Arc, Mutex, MutexGuard};

use super::need_head;
use crate::engine::{
    AdapterReport, GpuContext, GpuKvCache, GpuMatrix, GpuOptions, GpuTransformer, PoolStats,
};
use crate::engine::{Hidden, Taps, Transformer};
use crate::prm::head::{Head, HeadOutput};
use crate::prm::template::Encoded;
use crate::{Error, Result};

/// Device, model and head, uploaded together.
struct GpuState {
    ctx: Arc<GpuContext>,
    model: GpuTransformer,
    head: Option<Head<GpuMatrix>>,
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
}

pub(super) struct GpuEngine {
    state: Mutex<Option<Arc<GpuState>>>,
}

fn lock(m: &Mutex<Option<Arc<GpuState>>>) -> MutexGuard<'_, Option<Arc<GpuState>>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GpuEngine {
    /// Creates the device and uploads `model` (and `head`) now, so a
    /// scorer that cannot run on the GPU fails (or falls back) at load.
    pub async fn new(
        model: &Transformer,
        head: Option<&Head>,
    ) -> Result<(GpuEngine, AdapterReport)> {
        let st = GpuState::build(model, head).await?;
        let report = st.ctx.adapter().clone();
        let state = Mutex::new(Some(Arc::new(st)));
        Ok((GpuEngine { state }, report))
    }

    /// Runs `f` on the current state (recreated first if a previous call
    /// failed on the device). An [`Error::Gpu`] from `f` drops the state.
    /// No lock is held while `f` runs, so concurrent calls (browser
    /// promises) share the state.
    async fn with_state<T>(
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

    /// Makes `cache` usable on the current device and returns how many
    /// positions it holds: a cache of a device since recreated is replaced
    /// by an empty one.
    pub async fn cache_ready(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        cache: &mut Option<GpuKvCache>,
    ) -> Result<usize> {
        self.with_state(model, head, async |st: &GpuState| {
            let valid = cache.as_ref().is_some_and(|c| c.belongs_to(&st.model));
            if !valid {
                *cache = Some(st.model.new_cache());
            }
            Ok(cache.as_ref().map_or(0, |c| c.len()))
        })
        .await
    }

    /// Hidden states read back to the host (see `Engine::forward`).
    pub async fn forward(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        tokens: &[u32],
        cache: Option<&mut Option<GpuKvCache>>,
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        self.with_state(model, head, async |st: &GpuState| {
            let cache = cache.map(|c| current(c, st)).transpose()?;
            let h = st.model.forward_gpu_tapped(tokens, cache, taps)?;
            let last = h.last.to_hidden_async(&st.ctx).await?;
            let mut layers = Vec::with_capacity(h.layers.len());
            for l in &h.layers {
                layers.push(l.to_hidden_async(&st.ctx).await?);
            }
            Ok(Taps { last, layers })
        })
        .await
    }

    /// The last token's hidden state, the only row read back (see
    /// `Engine::last_logits`).
    pub async fn last_row(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        tokens: &[u32],
        cache: &mut Option<GpuKvCache>,
    ) -> Result<Hidden> {
        self.with_state(model, head, async |st: &GpuState| {
            let cache = current(cache, st)?;
            let h = st.model.forward_gpu_tapped(tokens, Some(cache), &[])?;
            h.last.last_row_async(&st.ctx).await
        })
        .await
    }

    /// The decoder and, with `enc`, the uploaded head, in one submission
    /// (see `Engine::run`).
    pub async fn run(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        tokens: &[u32],
        cache: Option<&mut Option<GpuKvCache>>,
        enc: Option<&Encoded>,
        taps: &[usize],
    ) -> Result<Option<HeadOutput>> {
        self.with_state(model, head, async |st: &GpuState| {
            let cache = cache.map(|c| current(c, st)).transpose()?;
            let h = st.model.forward_gpu_tapped(tokens, cache, taps)?;
            match enc {
                Some(e) => Ok(Some(
                    need_head(st.head.as_ref())?.apply(&st.model, &h, e).await?,
                )),
                None => Ok(None),
            }
        })
        .await
    }

    pub fn pool_stats(&self) -> Option<PoolStats> {
        lock(&self.state).as_ref().map(|st| st.ctx.pool_stats())
    }

    #[cfg(any(test, feature = "testing"))]
    pub fn destroy_device(&self) {
        if let Some(st) = lock(&self.state).as_ref() {
            st.ctx.destroy_device();
        }
    }
}

/// The cache, when it belongs to the current device (see `cache_ready`).
fn current<'c>(cache: &'c mut Option<GpuKvCache>, st: &GpuState) -> Result<&'c mut GpuKvCache> {
    match cache {
        Some(c) if c.belongs_to(&st.model) => Ok(c),
        _ => Err(Error::Gpu(
            "the session's GPU cache belongs to a device that was recreated".into(),
        )),
    }
}
