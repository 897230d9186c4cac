//! The engine a scorer runs on, chosen when the scorer is set up ([`Backend`]
//! says how the choice is made, `backend.rs`): the CPU engine (`cpu.rs`) or
//! the WGSL engine on a device (`gpu.rs`, feature `gpu`). The engine owns
//! the decoder's host weights and the head (the GPU engine uploads them
//! again after a device loss). Each operation below dispatches once on that
//! choice; the `Scorer` and its sessions only ever call these, never an
//! engine directly.
//!
//! The operations are async. Natively every GPU wait happens inside one poll
//! (`device.poll`) and [`block_on`] runs them; in a browser a GPU readback
//! needs the event loop, so the WebGPU engine is awaited through the
//! `*_async` methods (`blocking.rs`).

use std::fmt;

use super::backend::{Backend, BackendReport};
pub(crate) use super::blocking::block_on;
use super::head::{Head, HeadOutput};
use super::template::Encoded;
use crate::engine::KvCache;
use crate::engine::{Hidden, Taps, Transformer};
use crate::{Error, Result};

mod cpu;
#[cfg(feature = "gpu")]
mod gpu;

/// The engine behind a scorer, why it was chosen, and what it runs.
pub(crate) struct Engine {
    report: BackendReport,
    kind: Kind,
    model: Transformer,
    /// `None` for a backbone opened for feature extraction only.
    head: Option<Head>,
}

enum Kind {
    Cpu(cpu::CpuEngine),
    #[cfg(feature = "gpu")]
    Gpu(gpu::GpuEngine),
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("report", &self.report)
            .finish()
    }
}

/// One sequence of [`Engine::run_batch`]: its new tokens, the cache they
/// continue, and the head's layout over them (positions relative to `tokens`).
pub(crate) struct BatchPart<'a> {
    pub tokens: &'a [u32],
    pub cache: &'a mut EngineCache,
    pub enc: &'a Encoded,
}

/// A KV cache on whichever engine made it: what a [`Session`] keeps
/// between appends, and what [`Scorer::forward`] continues.
///
/// [`Session`]: super::Session
/// [`Scorer::forward`]: super::Scorer::forward
#[derive(Debug, Clone)]
pub struct EngineCache(CacheKind);

#[derive(Debug, Clone)]
enum CacheKind {
    Cpu(KvCache),
    /// Made on first use, and again after the device was recreated.
    #[cfg(feature = "gpu")]
    Gpu(Option<crate::engine::GpuKvCache>),
}

/// Cuts `cache` (holding `cached`) back to what agrees with `tokens`, stays
/// before `first_needed` (the first position whose output is read) and was
/// `valid` on the device; returns the positions kept, which need no forward.
pub(crate) fn keep_shared(
    cache: &mut EngineCache,
    cached: &mut Vec<u32>,
    tokens: &[u32],
    first_needed: usize,
    valid: usize,
) -> usize {
    let keep = cached
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(first_needed)
        .min(valid);
    cache.truncate(keep);
    cached.truncate(keep);
    keep
}

impl EngineCache {
    /// Positions whose keys and values the cache holds.
    pub fn len(&self) -> usize {
        match &self.0 {
            CacheKind::Cpu(c) => c.len(),
            #[cfg(feature = "gpu")]
            CacheKind::Gpu(c) => c.as_ref().map_or(0, |c| c.len()),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the first `n` positions.
    pub fn truncate(&mut self, n: usize) {
        match &mut self.0 {
            CacheKind::Cpu(c) => c.truncate(n),
            #[cfg(feature = "gpu")]
            CacheKind::Gpu(c) => {
                if let Some(c) = c {
                    c.truncate(n)
                }
            }
        }
    }

    fn cpu(&mut self) -> Result<&mut KvCache> {
        match &mut self.0 {
            CacheKind::Cpu(c) => Ok(c),
            #[cfg(feature = "gpu")]
            CacheKind::Gpu(_) => Err(mismatch()),
        }
    }

    #[cfg(feature = "gpu")]
    fn gpu(&mut self) -> Result<&mut Option<crate::engine::GpuKvCache>> {
        match &mut self.0 {
            CacheKind::Gpu(c) => Ok(c),
            CacheKind::Cpu(_) => Err(mismatch()),
        }
    }
}

#[cfg(feature = "gpu")]
fn mismatch() -> Error {
    Error::InvalidArgument(
        "this cache was made on another engine (the scorer's backend changed after it was started)"
            .into(),
    )
}

fn on_cpu(
    requested: Backend,
    adapter: Option<String>,
    reason: impl Into<String>,
) -> (BackendReport, Kind) {
    let report = BackendReport {
        requested,
        chosen: Backend::Cpu,
        adapter,
        reason: reason.into(),
    };
    (report, Kind::Cpu(cpu::CpuEngine))
}

impl Engine {
    /// Chooses and sets up the engine for `model` and its head, blocking.
    /// In a browser only the CPU engine can be set up this way (device
    /// creation is async there): `Auto` stays on the CPU with that reason
    /// and `Gpu` is refused; [`Engine::set_backend_async`] does the rest.
    pub fn new(requested: Backend, model: Transformer, head: Option<Head>) -> Result<Engine> {
        let (report, kind) = if cfg!(target_arch = "wasm32") && requested != Backend::Cpu {
            let why = "in a browser the WebGPU engine is set up asynchronously (Scorer::set_backend_async)";
            match requested {
                Backend::Gpu => return Err(Error::Gpu(format!("backend gpu: {why}"))),
                _ => on_cpu(requested, None, why),
            }
        } else {
            block_on(choose(requested, &model, head.as_ref()))?
        };
        Ok(Engine {
            report,
            kind,
            model,
            head,
        })
    }

    /// Moves to `requested` (see [`choose`]); on failure the engine stays
    /// as it was.
    pub async fn set_backend_async(&mut self, requested: Backend) -> Result<()> {
        let (report, kind) = choose(requested, &self.model, self.head.as_ref()).await?;
        self.report = report;
        self.kind = kind;
        Ok(())
    }

    /// The decoder's weights on the host.
    pub fn model(&self) -> &Transformer {
        &self.model
    }

    /// The head; `None` for a backbone opened for feature extraction.
    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    pub fn report(&self) -> &BackendReport {
        &self.report
    }

    /// Whether this engine's results can only be awaited (WebGPU in a browser).
    pub fn async_only(&self) -> bool {
        match &self.kind {
            Kind::Cpu(_) => false,
            #[cfg(feature = "gpu")]
            Kind::Gpu(_) => cfg!(target_arch = "wasm32"),
        }
    }

    /// An empty cache on this engine.
    pub fn new_cache(&self) -> EngineCache {
        EngineCache(match &self.kind {
            Kind::Cpu(e) => CacheKind::Cpu(e.new_cache(&self.model)),
            #[cfg(feature = "gpu")]
            Kind::Gpu(_) => CacheKind::Gpu(None),
        })
    }

    /// Makes `cache` usable on the current engine state and returns how
    /// many positions it still holds (0 when the device was recreated since
    /// it was filled).
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
    pub async fn cache_ready(&self, cache: &mut EngineCache) -> Result<usize> {
        match &self.kind {
            Kind::Cpu(_) => Ok(cache.cpu()?.len()),
            #[cfg(feature = "gpu")]
            Kind::Gpu(g) => {
                g.cache_ready(&self.model, self.head.as_ref(), cache.gpu()?)
                    .await
            }
        }
    }

    /// The hidden states of `tokens` (and those of each layer of `taps`) on the
    /// host: from position 0 without a cache, else after what `cache` holds
    /// (whose keys and values they extend).
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
    pub async fn forward(
        &self,
        tokens: &[u32],
        cache: Option<&mut EngineCache>,
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        let (model, head) = (&self.model, self.head.as_ref());
        match &self.kind {
            Kind::Cpu(e) => e.forward(
                model,
                tokens,
                cache.map(EngineCache::cpu).transpose()?,
                taps,
            ),
            #[cfg(feature = "gpu")]
            Kind::Gpu(g) => {
                let cache = cache.map(EngineCache::gpu).transpose()?;
                g.forward(model, head, tokens, cache, taps).await
            }
        }
    }

    /// [`Engine::forward`] of several token sequences, each after its own
    /// cache: entry i is what `forward(tokens[i], Some(caches[i]), taps)`
    /// gives, bit for bit. The CPU engine runs all rows in one pass (each
    /// weight matrix unpacked once); the GPU engine runs them in turn.
    pub async fn forward_batch(
        &self,
        tokens: &[&[u32]],
        caches: &mut [&mut EngineCache],
        taps: &[usize],
    ) -> Result<Vec<Taps<Hidden>>> {
        match &self.kind {
            Kind::Cpu(_) => {
                let mut cpu = Vec::with_capacity(caches.len());
                for c in caches.iter_mut() {
                    cpu.push(c.cpu()?);
                }
                self.model.forward_batch(tokens, &mut cpu, taps)
            }
            #[cfg(feature = "gpu")]
            Kind::Gpu(_) => {
                let mut out = Vec::with_capacity(tokens.len());
                for (t, c) in tokens.iter().zip(caches.iter_mut()) {
                    out.push(self.forward(t, Some(&mut **c), taps).await?);
                }
                Ok(out)
            }
        }
    }

    /// The logits over the whole vocabulary at the last of `tokens`, run
    /// after what `cache` holds (generation's step). The decoder runs on this
    /// engine; the vocabulary projection of that one row runs on the host's
    /// kernels for both engines (the hidden states are the same bits, so the
    /// logits are too). The GPU engine reads back only that row: one hidden
    /// state (6 KiB on a 1.5B) where the logits would be a vocabulary's worth.
    pub async fn last_logits(&self, tokens: &[u32], cache: &mut EngineCache) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("no tokens to run".into()));
        }
        let hidden = match &self.kind {
            Kind::Cpu(_) => self.forward(tokens, Some(cache), &[]).await?.last,
            #[cfg(feature = "gpu")]
            Kind::Gpu(g) => {
                g.last_row(&self.model, self.head.as_ref(), tokens, cache.gpu()?)
                    .await?
            }
        };
        // `tokens` is not empty, so a missing row is the engine's fault.
        let row = hidden
            .n_tokens
            .checked_sub(1)
            .and_then(|t| hidden.row(t))
            .ok_or_else(|| Error::Internal("the decoder returned no hidden row".into()))?;
        self.model.logits_for(row, None)
    }

    /// [`Engine::last_logits`] of one token for each of several caches:
    /// `tokens[i]` continues `caches[i]`, and the result's row `i` is what
    /// `last_logits(&[tokens[i]], caches[i])` gives, bit for bit. The CPU
    /// engine runs all rows in one pass (N candidates' decode step reads the
    /// weights once); the GPU engine runs them one after another.
    #[cfg_attr(not(feature = "gpu"), allow(unused_variables))]
    pub async fn last_logits_rows(
        &self,
        tokens: &[u32],
        caches: &mut [&mut EngineCache],
    ) -> Result<Vec<Vec<f32>>> {
        let model = &self.model;
        match &self.kind {
            Kind::Cpu(_) => {
                let mut cpu = Vec::with_capacity(caches.len());
                for c in caches.iter_mut() {
                    cpu.push(c.cpu()?);
                }
                let hidden = model.forward_rows(tokens, &mut cpu)?;
                let logits = model.logits_for(&hidden.data, None)?;
                let vocab = logits.len() / tokens.len().max(1);
                Ok(logits
                    .chunks_exact(vocab.max(1))
                    .map(<[f32]>::to_vec)
                    .collect())
            }
            #[cfg(feature = "gpu")]
            Kind::Gpu(_) => {
                let mut out = Vec::with_capacity(tokens.len());
                for (t, cache) in tokens.iter().zip(caches.iter_mut()) {
                    out.push(self.last_logits(std::slice::from_ref(t), cache).await?);
                }
                Ok(out)
            }
        }
    }

    /// Runs `tokens` (after what `cache` holds, when given) and, with `enc`
    /// (positions relative to `tokens`), applies `head` to them. The head's
    /// layer is tapped; `head` is also what the GPU engine uploads again
    /// after a device loss.
    pub async fn run(
        &self,
        tokens: &[u32],
        cache: Option<&mut EngineCache>,
        enc: Option<&Encoded>,
    ) -> Result<Option<HeadOutput>> {
        let (model, head) = (&self.model, self.head.as_ref());
        let tap: &[usize] = head.map_or(&[], Head::layers);
        match &self.kind {
            Kind::Cpu(e) => {
                let cache = cache.map(EngineCache::cpu).transpose()?;
                e.run(model, head, tokens, cache, enc, tap).await
            }
            #[cfg(feature = "gpu")]
            Kind::Gpu(g) => {
                let cache = cache.map(EngineCache::gpu).transpose()?;
                g.run(model, head, tokens, cache, enc, tap).await
            }
        }
    }

    /// [`Engine::run`] of several token sequences, each after its own
    /// cache and read by the head through its own layout: `parts[i]`'s
    /// output is what `run(tokens, Some(cache), Some(enc))` gives it, bit
    /// for bit. The CPU engine runs all parts' rows in one forward pass
    /// (each weight matrix read once for N candidates); the GPU engine runs
    /// them one after another.
    pub async fn run_batch(&self, parts: &mut [BatchPart<'_>]) -> Result<Vec<HeadOutput>> {
        let (model, head) = (&self.model, self.head.as_ref());
        let tap: &[usize] = head.map_or(&[], Head::layers);
        match &self.kind {
            Kind::Cpu(e) => {
                let tokens: Vec<&[u32]> = parts.iter().map(|p| p.tokens).collect();
                let encs: Vec<&Encoded> = parts.iter().map(|p| p.enc).collect();
                let mut caches = Vec::with_capacity(parts.len());
                for p in parts.iter_mut() {
                    caches.push(p.cache.cpu()?);
                }
                e.run_batch(model, need_head(head)?, &tokens, &mut caches, &encs, tap)
                    .await
            }
            #[cfg(feature = "gpu")]
            Kind::Gpu(g) => {
                let mut out = Vec::with_capacity(parts.len());
                for p in parts.iter_mut() {
                    let cache = p.cache.gpu()?;
                    let o = g
                        .run(model, head, p.tokens, Some(cache), Some(p.enc), tap)
                        .await?;
                    out.push(o.ok_or_else(|| {
                        Error::Internal("the head returned no output for a layout".into())
                    })?);
                }
                Ok(out)
            }
        }
    }

    /// Device buffers of the GPU engine (None on the CPU engine, or before
    /// a device exists).
    #[cfg(feature = "gpu")]
    pub fn pool_stats(&self) -> Option<crate::engine::PoolStats> {
        match &self.kind {
            Kind::Gpu(g) => g.pool_stats(),
            Kind::Cpu(_) => None,
        }
    }

    /// Destroys the GPU device as a driver reset would (recovery tests).
    #[cfg(all(feature = "gpu", any(test, feature = "testing")))]
    pub fn destroy_device(&self) {
        if let Kind::Gpu(g) = &self.kind {
            g.destroy_device();
        }
    }
}

/// Chooses and sets up an engine for `model` and `head` (see [`Backend`]):
/// device creation and the upload happen now, so a model that cannot run on
/// the GPU fails (or, under `Auto`, falls back to the CPU with the reason)
/// at load.
async fn choose(
    requested: Backend,
    model: &Transformer,
    head: Option<&Head>,
) -> Result<(BackendReport, Kind)> {
    if requested == Backend::Cpu {
        return Ok(on_cpu(requested, None, "requested"));
    }
    #[cfg(feature = "gpu")]
    {
        if requested == Backend::Auto {
            let pref = super::backend::auto_preference_async().await;
            if pref.chosen == Backend::Cpu {
                return Ok(on_cpu(requested, pref.adapter, pref.reason));
            }
        }
        match gpu::GpuEngine::new(model, head).await {
            Ok((g, adapter)) => Ok((
                BackendReport {
                    requested,
                    chosen: Backend::Gpu,
                    adapter: Some(adapter.name.clone()),
                    reason: adapter.reason.clone(),
                },
                Kind::Gpu(g),
            )),
            Err(e) if requested == Backend::Auto => Ok(on_cpu(
                requested,
                None,
                format!("GPU unavailable, using the CPU engine: {e}"),
            )),
            Err(e) => Err(e),
        }
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (model, head);
        let why = "built without the `gpu` feature";
        match requested {
            Backend::Gpu => Err(Error::Gpu(format!("backend gpu: {why}"))),
            _ => Ok(on_cpu(requested, None, why)),
        }
    }
}

/// The head, or the error a backbone opened without one gives.
fn need_head<W>(head: Option<&Head<W>>) -> Result<&Head<W>> {
    head.ok_or_else(|| {
        Error::InvalidArgument(
            "this model was opened as a backbone for feature extraction, without a head: it cannot score"
                .into(),
        )
    })
}
