//! The whole decoder on the device: a [`Transformer`] uploaded once, run as
//! one batch of dispatches (one submission) per forward, with its KV cache
//! on the device.
//!
//! Weights keep their quantized blocks where a matmul kernel reads them
//! (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K; f16/bf16 widen to f32) and the embedding
//! table is the same upload the tied vocabulary projection uses: the gather
//! kernel dequantizes the rows it needs, so no f32 copy of the table exists.
//! Activations live in pooled buffers reused across calls; keys and values
//! are written by the k/v matmuls straight into the cache at their
//! positions, then rotated there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::batch::{whole, Batch};
use super::context::GpuContext;
use super::matmul::GpuMatrix;
use super::ops::{self, AttentionShape, RopeShape};
use super::pool::{PooledBuffer, Usage};
use super::tensor::GpuTensor;
use crate::error::{Error, Result};
use crate::model::{Hidden, LmHead, ModelConfig, RopeStyle, States, Taps, Transformer};

/// Ids of uploads, so a cache is never used with another model or device.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct GpuLayer {
    attn_norm: GpuTensor,
    q: GpuMatrix,
    k: GpuMatrix,
    v: GpuMatrix,
    o: GpuMatrix,
    q_bias: Option<GpuTensor>,
    k_bias: Option<GpuTensor>,
    v_bias: Option<GpuTensor>,
    o_bias: Option<GpuTensor>,
    mlp_norm: GpuTensor,
    gate: GpuMatrix,
    up: GpuMatrix,
    down: GpuMatrix,
}

enum GpuLmHead {
    Tied,
    Separate(GpuMatrix),
    Absent,
}

/// A decoder uploaded to a device.
pub struct GpuTransformer {
    ctx: Arc<GpuContext>,
    id: u64,
    config: ModelConfig,
    rope_style: RopeStyle,
    inv_freq: Vec<f64>,
    embed: GpuMatrix,
    layers: Vec<GpuLayer>,
    norm: GpuTensor,
    lm_head: GpuLmHead,
}

/// Final-normed hidden states left on the device (token-major rows).
pub struct GpuHidden {
    pub(crate) t: GpuTensor,
    n_tokens: usize,
    width: usize,
}

impl States for GpuHidden {
    fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    fn width(&self) -> usize {
        self.width
    }
}

impl GpuHidden {
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn tensor(&self) -> &GpuTensor {
        &self.t
    }

    /// Copies the states to the host.
    pub async fn to_hidden_async(&self, ctx: &GpuContext) -> Result<Hidden> {
        let mut data = if self.n_tokens == 0 {
            Vec::new()
        } else {
            self.t.to_vec_async(ctx).await?
        };
        data.truncate(self.n_tokens * self.width);
        Ok(Hidden {
            n_tokens: self.n_tokens,
            width: self.width,
            data,
        })
    }

    /// Blocking [`GpuHidden::to_hidden_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn to_hidden(&self, ctx: &GpuContext) -> Result<Hidden> {
        pollster::block_on(self.to_hidden_async(ctx))
    }
}

/// Keys and values on the device, per layer. Cloning is cheap: clones
/// share the buffers until one of them runs a forward, which copies them
/// first (copy on write), so candidates branching from one prefix share it.
#[derive(Clone)]
pub struct GpuKvCache {
    model: u64,
    kv_dim: usize,
    len: usize,
    cap: usize,
    layers: Arc<Vec<(PooledBuffer, PooledBuffer)>>,
}

impl std::fmt::Debug for GpuKvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuKvCache")
            .field("len", &self.len)
            .field("capacity", &self.cap)
            .finish()
    }
}

impl GpuKvCache {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the buffers have room for.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Keeps only the first `n` positions (no-op when `n >= len`).
    pub fn truncate(&mut self, n: usize) {
        self.len = self.len.min(n);
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether this cache was made by (and for) `model`.
    pub fn belongs_to(&self, model: &GpuTransformer) -> bool {
        self.model == model.id
    }
}

fn upload_vec(ctx: &GpuContext, v: &[f32]) -> Result<GpuTensor> {
    GpuTensor::from_slice(ctx, v)
}

fn upload_opt(ctx: &GpuContext, v: Option<&Vec<f32>>) -> Result<Option<GpuTensor>> {
    v.map(|v| upload_vec(ctx, v)).transpose()
}

fn named<T>(r: Result<T>, what: &str) -> Result<T> {
    r.map_err(|e| match e {
        Error::Gpu(m) => Error::Gpu(format!("{what}: {m}")),
        other => other,
    })
}

impl GpuTransformer {
    /// Uploads every weight of `model` (once; calls only allocate pooled
    /// activations).
    pub fn upload(ctx: Arc<GpuContext>, model: &Transformer) -> Result<GpuTransformer> {
        let c = &ctx;
        let config = model.config().clone();
        let embed = named(GpuMatrix::upload(c, model.embed()), "embed_tokens")?;
        let mut layers = Vec::with_capacity(model.layers().len());
        for (i, l) in model.layers().iter().enumerate() {
            let m = |x, what: &str| named(GpuMatrix::upload(c, x), &format!("layer {i} {what}"));
            layers.push(GpuLayer {
                attn_norm: upload_vec(c, &l.attn_norm)?,
                q: m(&l.q, "q_proj")?,
                k: m(&l.k, "k_proj")?,
                v: m(&l.v, "v_proj")?,
                o: m(&l.o, "o_proj")?,
                q_bias: upload_opt(c, l.q_bias.as_ref())?,
                k_bias: upload_opt(c, l.k_bias.as_ref())?,
                v_bias: upload_opt(c, l.v_bias.as_ref())?,
                o_bias: upload_opt(c, l.o_bias.as_ref())?,
                mlp_norm: upload_vec(c, &l.mlp_norm)?,
                gate: m(&l.gate, "gate_proj")?,
                up: m(&l.up, "up_proj")?,
                down: m(&l.down, "down_proj")?,
            });
        }
        let norm = upload_vec(c, model.final_norm())?;
        let lm_head = match model.lm_head() {
            LmHead::Tied => GpuLmHead::Tied,
            LmHead::Separate(m) => GpuLmHead::Separate(named(GpuMatrix::upload(c, m), "lm_head")?),
            LmHead::Absent => GpuLmHead::Absent,
        };
        if config.head_dim > ops::MAX_HEAD_DIM {
            return Err(Error::Gpu(format!(
                "head_dim {} is over the attention kernel's {}",
                config.head_dim,
                ops::MAX_HEAD_DIM
            )));
        }
        ctx.check()?;
        Ok(GpuTransformer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            inv_freq: model.inv_freq().to_vec(),
            rope_style: model.rope_style(),
            config,
            embed,
            layers,
            norm,
            lm_head,
            ctx,
        })
    }

    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The vocabulary projection (the embedding when tied), if any.
    pub fn lm_head(&self) -> Option<&GpuMatrix> {
        match &self.lm_head {
            GpuLmHead::Tied => Some(&self.embed),
            GpuLmHead::Separate(m) => Some(m),
            GpuLmHead::Absent => None,
        }
    }

    /// An empty cache for this model (buffers come with the first forward).
    pub fn new_cache(&self) -> GpuKvCache {
        GpuKvCache {
            model: self.id,
            kv_dim: self.config.kv_dim(),
            len: 0,
            cap: 0,
            layers: Arc::new(Vec::new()),
        }
    }

    /// Makes `cache` private to its owner and able to hold `need`
    /// positions, copying its current contents (its own submission, so a
    /// forward that fails later leaves the cache intact).
    fn reserve(&self, cache: &mut GpuKvCache, need: usize) -> Result<()> {
        let shared = Arc::strong_count(&cache.layers) > 1;
        if need <= cache.cap && !shared && cache.layers.len() == self.layers.len() {
            return Ok(());
        }
        let cap = if need <= cache.cap {
            cache.cap
        } else {
            need.max(cache.cap.saturating_mul(2))
                .max(64)
                .min(self.config.max_position_embeddings.max(need))
        };
        let row_bytes = cache.kv_dim as u64 * 4;
        let bytes = cap as u64 * row_bytes;
        if bytes > self.ctx.adapter_binding_limit() {
            return Err(Error::Gpu(format!(
                "a KV cache of {cap} positions takes {bytes} bytes per layer, over the adapter's storage binding limit of {} bytes",
                self.ctx.adapter_binding_limit()
            )));
        }
        let keep_bytes = cache.len as u64 * row_bytes;
        let mut b = Batch::new(&self.ctx, "kv cache");
        let mut fresh = Vec::with_capacity(self.layers.len());
        for i in 0..self.layers.len() {
            let k = self.ctx.pool.acquire(Usage::Storage, bytes.max(4))?;
            let v = self.ctx.pool.acquire(Usage::Storage, bytes.max(4))?;
            if let Some((ok, ov)) = cache.layers.get(i) {
                b.copy(ok.buffer()?, 0, k.buffer()?, 0, keep_bytes);
                b.copy(ov.buffer()?, 0, v.buffer()?, 0, keep_bytes);
            }
            fresh.push((k, v));
        }
        b.submit()?;
        cache.cap = cap;
        cache.layers = Arc::new(fresh);
        Ok(())
    }

    /// Runs `tokens` through the decoder; with a cache they continue the
    /// sequence it holds (and their keys/values are appended), without one
    /// they start at position 0. Records one batch and submits it; the
    /// hidden states stay on the device.
    pub fn forward_gpu(&self, tokens: &[u32], cache: Option<&mut GpuKvCache>) -> Result<GpuHidden> {
        Ok(self.forward_gpu_tapped(tokens, cache, None)?.last)
    }

    /// [`GpuTransformer::forward_gpu`], also leaving the hidden state of
    /// layer `tap` on the device (the CPU engine's definition, see
    /// [`Transformer::forward_tapped`]), in the same submission.
    pub fn forward_gpu_tapped(
        &self,
        tokens: &[u32],
        cache: Option<&mut GpuKvCache>,
        tap: Option<usize>,
    ) -> Result<Taps<GpuHidden>> {
        let c = &self.config;
        if let Some(l) = tap.filter(|&l| l > c.n_layers) {
            return Err(Error::InvalidArgument(format!(
                "layer {l} does not exist: the model has {} layers (0 is the embeddings)",
                c.n_layers
            )));
        }
        let mut scratch;
        let cache = match cache {
            Some(cache) => cache,
            None => {
                scratch = self.new_cache();
                &mut scratch
            }
        };
        if cache.model != self.id {
            return Err(Error::InvalidArgument(
                "GPU KV cache was made for a different model or device".into(),
            ));
        }
        if let Some((i, &t)) = tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= c.vocab_size)
        {
            return Err(Error::InvalidArgument(format!(
                "token id {t} at position {i} is out of range for vocabulary size {}",
                c.vocab_size
            )));
        }
        let n = tokens.len();
        let start = cache.len;
        let total = start.saturating_add(n);
        if total > c.max_position_embeddings {
            return Err(Error::InvalidArgument(format!(
                "sequence of {total} tokens exceeds max_position_embeddings {}",
                c.max_position_embeddings
            )));
        }
        let max_groups = self.ctx.limits().max_compute_workgroups_per_dimension as usize;
        if n > max_groups {
            return Err(Error::InvalidArgument(format!(
                "{n} tokens in one forward is over the adapter's {max_groups} workgroups per dimension; run them in pieces with a cache"
            )));
        }
        let (h, qd, kvd, ff) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
        let x = GpuTensor::uninit(&self.ctx, n * h)?;
        let xn = GpuTensor::uninit(&self.ctx, n * h)?;
        let hidden = |t| GpuHidden {
            t,
            n_tokens: n,
            width: h,
        };
        let tapped = tap
            .map(|_| GpuTensor::uninit(&self.ctx, n * h))
            .transpose()?;
        if n == 0 {
            return Ok(Taps {
                last: hidden(xn),
                layer: tapped.map(hidden),
            });
        }
        self.reserve(cache, total)?;
        let ctx = &*self.ctx;
        let mut b = Batch::new(ctx, "forward");
        // Uploads first: their writes land before every recorded command.
        let ids = b.upload(bytemuck::cast_slice(tokens))?;
        let cs = b.upload(bytemuck::cast_slice(&ops::rope_table(
            &self.inv_freq,
            start,
            n,
        )))?;

        let q = GpuTensor::uninit(ctx, n * qd)?;
        let attn = GpuTensor::uninit(ctx, n * qd)?;
        let proj = GpuTensor::uninit(ctx, n * h)?;
        let gate = GpuTensor::uninit(ctx, n * ff)?;
        let up = GpuTensor::uninit(ctx, n * ff)?;
        let (xb, xnb, qb, ab, pb, gb, ub) = (
            x.buf.buffer()?,
            xn.buf.buffer()?,
            q.buf.buffer()?,
            attn.buf.buffer()?,
            proj.buf.buffer()?,
            gate.buf.buffer()?,
            up.buf.buffer()?,
        );
        let eps = c.rms_norm_eps;
        let base = start * kvd;
        let norm = self.norm.buf.buffer()?;
        let tb = tapped.as_ref().map(|t| t.buf.buffer()).transpose()?;
        self.embed.record_gather(&mut b, &ids, xb, n)?;
        if let (Some(0), Some(tb)) = (tap, tb) {
            ops::record_rms_norm(&mut b, xb, norm, tb, eps, h, n)?;
        }
        for (li, l) in self.layers.iter().enumerate() {
            let (ck, cv) = match cache.layers.get(li) {
                Some((k, v)) => (k.buffer()?, v.buffer()?),
                None => return Err(Error::Gpu("KV cache has too few layers".into())),
            };
            ops::record_rms_norm(&mut b, xb, l.attn_norm.buf.buffer()?, xnb, eps, h, n)?;
            l.q.record(&mut b, whole(xnb), qb, 0, n)?;
            l.k.record(&mut b, whole(xnb), ck, base, n)?;
            l.v.record(&mut b, whole(xnb), cv, base, n)?;
            if let Some(bias) = &l.q_bias {
                ops::record_bias_add(&mut b, qb, bias.buf.buffer()?, qd, n, qd, 0, false)?;
            }
            if let Some(bias) = &l.k_bias {
                ops::record_bias_add(&mut b, ck, bias.buf.buffer()?, kvd, n, kvd, base, false)?;
            }
            if let Some(bias) = &l.v_bias {
                ops::record_bias_add(&mut b, cv, bias.buf.buffer()?, kvd, n, kvd, base, false)?;
            }
            let rope = |heads: usize, stride: usize, at: usize| RopeShape {
                n_tokens: n,
                n_heads: heads,
                head_dim: c.head_dim,
                row_stride: stride,
                base: at,
                style: self.rope_style,
            };
            ops::record_rope(&mut b, qb, &cs, &rope(c.n_heads, qd, 0))?;
            ops::record_rope(&mut b, ck, &cs, &rope(c.n_kv_heads, kvd, base))?;
            ops::record_attention(
                &mut b,
                qb,
                ck,
                cv,
                ab,
                &AttentionShape {
                    n_tokens: n,
                    start,
                    n_heads: c.n_heads,
                    n_kv_heads: c.n_kv_heads,
                    head_dim: c.head_dim,
                    sliding_window: c.sliding_window,
                },
            )?;
            l.o.record(&mut b, whole(ab), pb, 0, n)?;
            if let Some(bias) = &l.o_bias {
                ops::record_bias_add(&mut b, pb, bias.buf.buffer()?, h, n, h, 0, false)?;
            }
            ops::record_add(&mut b, xb, pb, n * h)?;
            ops::record_rms_norm(&mut b, xb, l.mlp_norm.buf.buffer()?, xnb, eps, h, n)?;
            l.gate.record(&mut b, whole(xnb), gb, 0, n)?;
            l.up.record(&mut b, whole(xnb), ub, 0, n)?;
            ops::record_swiglu(&mut b, gb, ub, n * ff)?;
            l.down.record(&mut b, whole(gb), pb, 0, n)?;
            ops::record_add(&mut b, xb, pb, n * h)?;
            if let Some(tb) = tb.filter(|_| tap == Some(li + 1)) {
                ops::record_rms_norm(&mut b, xb, norm, tb, eps, h, n)?;
            }
        }
        ops::record_rms_norm(&mut b, xb, norm, xnb, eps, h, n)?;
        b.submit()?;
        cache.len = total;
        Ok(Taps {
            last: hidden(xn),
            layer: tapped.map(hidden),
        })
    }

    /// [`GpuTransformer::forward_gpu`], then the hidden states read back.
    pub async fn forward_async(
        &self,
        tokens: &[u32],
        cache: Option<&mut GpuKvCache>,
    ) -> Result<Hidden> {
        let h = self.forward_gpu(tokens, cache)?;
        h.to_hidden_async(&self.ctx).await
    }

    /// Blocking [`GpuTransformer::forward_async`]: the same contract as
    /// [`Transformer::forward`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn forward(&self, tokens: &[u32], cache: Option<&mut GpuKvCache>) -> Result<Hidden> {
        pollster::block_on(self.forward_async(tokens, cache))
    }

    /// Logits of every row of `hidden` over the whole vocabulary, left on
    /// the device (`n_tokens * vocab` values).
    pub fn logits_gpu(&self, hidden: &GpuHidden) -> Result<GpuTensor> {
        let head = self.lm_head().ok_or_else(|| {
            Error::InvalidArgument(
                "this checkpoint has no lm_head; only hidden states are available".into(),
            )
        })?;
        head.matmul(&self.ctx, &hidden.t, hidden.n_tokens)
    }
}
