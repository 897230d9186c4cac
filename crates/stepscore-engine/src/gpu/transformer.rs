//! The whole decoder on the device: a [`Transformer`] uploaded once, run as
//! one batch of dispatches (one submission) per forward, with its KV cache
//! on the device.
//!
//! Weights keep their quantized blocks where a matmul kernel reads them
//! (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; f16/bf16 widen to f32)
//! and the embedding table is the same upload the tied vocabulary
//! projection uses: the gather kernel dequantizes the rows it needs, so no
//! f32 copy of the table exists.
//! Activations live in pooled buffers reused across calls; keys and values
//! are written by the k/v matmuls straight into the cache at their
//! positions, then rotated there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::act::record_quantize;
use super::act_layout::ACT_KINDS;
use super::batch::{whole, Batch};
use super::context::GpuContext;
use super::matmul::GpuMatrix;
use super::ops::{self, AttentionShape, RopeShape};
use super::pool::{PooledBuffer, Usage};
use super::tensor::GpuTensor;
use crate::error::{Error, Result};
use crate::model::decoder::{self, Act, DecoderPass, Weights};
use crate::model::{Hidden, ModelConfig, RopeStyle, States, Taps, Transformer};

/// Ids of uploads, so a cache is never used with another model or device.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A decoder uploaded to a device.
pub struct GpuTransformer {
    ctx: Arc<GpuContext>,
    id: u64,
    config: ModelConfig,
    rope_style: RopeStyle,
    inv_freq: Vec<f64>,
    inv_freq_local: Option<Vec<f64>>,
    w: Weights<GpuMatrix, GpuTensor>,
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

    /// Copies only the last token's state to the host (one row; none when
    /// there are no tokens): what a decode step's sampler needs, where
    /// [`GpuHidden::to_hidden_async`] would carry the whole chunk.
    pub async fn last_row_async(&self, ctx: &GpuContext) -> Result<Hidden> {
        let Some(last) = self.n_tokens.checked_sub(1) else {
            return self.to_hidden_async(ctx).await;
        };
        let start = last * self.width;
        Ok(Hidden {
            n_tokens: 1,
            width: self.width,
            data: self.t.range_async(ctx, start..start + self.width).await?,
        })
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
        let config = model.config().clone();
        if config.head_dim > ops::MAX_HEAD_DIM {
            return Err(Error::Gpu(format!(
                "head_dim {} is over the attention kernel's {}",
                config.head_dim,
                ops::MAX_HEAD_DIM
            )));
        }
        let w = model.weights().map(
            |m, what| named(GpuMatrix::upload(&ctx, m), what),
            |v| GpuTensor::from_slice(&ctx, v),
        )?;
        ctx.check()?;
        Ok(GpuTransformer {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            inv_freq: model.inv_freq().to_vec(),
            inv_freq_local: model.inv_freq_local().map(<[f64]>::to_vec),
            rope_style: model.rope_style(),
            config,
            w,
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
        self.w.vocab_projection()
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
        if need <= cache.cap && !shared && cache.layers.len() == self.w.layers.len() {
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
        let mut fresh = Vec::with_capacity(self.w.layers.len());
        for i in 0..self.w.layers.len() {
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
        Ok(self.forward_gpu_tapped(tokens, cache, &[])?.last)
    }

    /// [`GpuTransformer::forward_gpu`], also leaving the hidden state of
    /// each layer of `taps` (strictly ascending) on the device (the CPU engine's definition, see
    /// [`Transformer::forward_tapped`]), in the same submission.
    pub fn forward_gpu_tapped(
        &self,
        tokens: &[u32],
        cache: Option<&mut GpuKvCache>,
        taps: &[usize],
    ) -> Result<Taps<GpuHidden>> {
        let c = &self.config;
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
        let n = tokens.len();
        let start = cache.len;
        let total = decoder::check_input(c, tokens, start, taps)?;
        let max_groups = self.ctx.limits().max_compute_workgroups_per_dimension as usize;
        if n > max_groups {
            return Err(Error::InvalidArgument(format!(
                "{n} tokens in one forward is over the adapter's {max_groups} workgroups per dimension; run them in pieces with a cache"
            )));
        }
        let (h, qd, ff) = (c.hidden_size, c.q_dim(), c.intermediate_size);
        let ctx = &*self.ctx;
        let hidden = |t| GpuHidden {
            t,
            n_tokens: n,
            width: h,
        };
        let x = GpuTensor::uninit(ctx, n * h)?;
        let xn = GpuTensor::uninit(ctx, n * h)?;
        // One buffer per tap below the last layer (the pass fills them in
        // block order); a tap of the last layer copies the final states.
        let n_layers = self.w.layers.len();
        let tapped = taps
            .iter()
            .filter(|&&l| l < n_layers)
            .map(|_| GpuTensor::uninit(ctx, n * h))
            .collect::<Result<Vec<_>>>()?;
        if n == 0 {
            return Ok(Taps {
                last: hidden(xn),
                layers: taps
                    .iter()
                    .map(|_| GpuTensor::uninit(ctx, 0).map(hidden))
                    .collect::<Result<Vec<_>>>()?,
            });
        }
        self.reserve(cache, total)?;
        let mut b = Batch::new(ctx, "forward");
        // Uploads first: their writes land before every recorded command.
        let ids = b.upload(bytemuck::cast_slice(tokens))?;
        let rope = b.upload(bytemuck::cast_slice(&decoder::rope_table(
            &self.inv_freq,
            start,
            n,
        )))?;
        let rope_local = match &self.inv_freq_local {
            Some(f) => Some(b.upload(bytemuck::cast_slice(&decoder::rope_table(f, start, n)))?),
            None => None,
        };
        let q = GpuTensor::uninit(ctx, n * qd)?;
        let attn = GpuTensor::uninit(ctx, n * qd)?;
        let proj = GpuTensor::uninit(ctx, n * h)?;
        let gate = GpuTensor::uninit(ctx, n * ff)?;
        let up = GpuTensor::uninit(ctx, n * ff)?;
        let bufs = [
            x.buf.buffer()?,
            xn.buf.buffer()?,
            q.buf.buffer()?,
            attn.buf.buffer()?,
            proj.buf.buffer()?,
            gate.buf.buffer()?,
            up.buf.buffer()?,
        ];
        self.w.embed.record_gather(&mut b, &ids, bufs[0], n)?;
        let mut pass = GpuPass {
            model: self,
            b,
            cache,
            bufs,
            rope,
            rope_local,
            layer: 0,
            taps: tapped
                .iter()
                .map(|t| t.buf.buffer())
                .collect::<Result<Vec<_>>>()?,
            next_tap: 0,
            start,
            n,
            kv: None,
            held: [None; ACT_KINDS],
        };
        decoder::run(&mut pass, c, &self.w, taps)?;
        pass.b.submit()?;
        cache.len = total;
        let mut tapped = tapped.into_iter();
        let mut layers = Vec::with_capacity(taps.len());
        for &l in taps {
            let t = if l == n_layers {
                // The final states are the tapped layer's: copy them.
                let t = GpuTensor::uninit(ctx, n * h)?;
                let mut b = Batch::new(ctx, "tap");
                b.copy(xn.buf.buffer()?, 0, t.buf.buffer()?, 0, (n * h * 4) as u64);
                b.submit()?;
                t
            } else {
                tapped
                    .next()
                    .ok_or_else(|| Error::Gpu(format!("layer {l} was asked for but not tapped")))?
            };
            layers.push(hidden(t));
        }
        Ok(Taps {
            last: hidden(xn),
            layers,
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

/// One forward pass being recorded: the activations' buffers (keys and
/// values are written straight into the cache at their positions) and the
/// batch every step of the decoder is recorded into.
struct GpuPass<'a> {
    model: &'a GpuTransformer,
    b: Batch<'a>,
    cache: &'a GpuKvCache,
    /// X, Xn, Q, Attn, Proj, Gate, Up.
    bufs: [&'a wgpu::Buffer; 7],
    rope: wgpu::Buffer,
    /// The local layers' table, where their RoPE base differs.
    rope_local: Option<wgpu::Buffer>,
    /// The block being recorded.
    layer: usize,
    /// The tapped layers' buffers, in block order, and the next one to fill.
    taps: Vec<&'a wgpu::Buffer>,
    next_tap: usize,
    start: usize,
    n: usize,
    /// The current block's cache buffers (keys, values).
    kv: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer)>,
    /// Which activation the batch's 8-bit buffer of each form holds, while
    /// it is unchanged (q/k/v share one conversion, gate/up another, as on
    /// the CPU).
    held: [Option<Act>; ACT_KINDS],
}

impl<'a> GpuPass<'a> {
    /// The buffer of `a` and the first element the pass writes there.
    fn buf(&self, a: Act) -> Result<(&'a wgpu::Buffer, usize)> {
        let kv_base = self.start * self.model.config.kv_dim();
        let kv = || {
            self.kv
                .ok_or_else(|| Error::Gpu("keys used before a block began".into()))
        };
        let i = match a {
            Act::X => 0,
            Act::Xn => 1,
            Act::Q => 2,
            Act::Attn => 3,
            Act::Proj => 4,
            Act::Gate => 5,
            Act::Up => 6,
            Act::K => return Ok((kv()?.0, kv_base)),
            Act::V => return Ok((kv()?.1, kv_base)),
        };
        Ok((self.bufs[i], 0))
    }

    /// `a` was written: its 8-bit forms are stale.
    fn wrote(&mut self, a: Act) {
        for h in &mut self.held {
            if *h == Some(a) {
                *h = None;
            }
        }
    }
}

impl<'a> DecoderPass for GpuPass<'a> {
    type M = GpuMatrix;
    type V = GpuTensor;

    fn begin_block(&mut self, layer: usize) -> Result<()> {
        let cache: &'a GpuKvCache = self.cache;
        self.kv = match cache.layers.get(layer) {
            Some((k, v)) => Some((k.buffer()?, v.buffer()?)),
            None => return Err(Error::Gpu("KV cache has too few layers".into())),
        };
        self.layer = layer;
        Ok(())
    }

    fn scale(&mut self, dst: Act, s: f32) -> Result<()> {
        self.wrote(dst);
        let (buf, _) = self.buf(dst)?;
        let c = &self.model.config;
        let width = match dst {
            Act::X | Act::Xn | Act::Proj => c.hidden_size,
            Act::Q | Act::Attn => c.q_dim(),
            Act::Gate | Act::Up => c.intermediate_size,
            // They live in the cache, past its earlier positions.
            Act::K | Act::V => return Err(Error::Gpu("scaling cached keys or values".into())),
        };
        ops::record_scale(&mut self.b, buf, s, self.n * width)
    }

    fn rms_norm(&mut self, src: Act, w: &GpuTensor, dst: Act) -> Result<()> {
        self.wrote(dst);
        let (src, _) = self.buf(src)?;
        let (dst, _) = self.buf(dst)?;
        let c = &self.model.config;
        ops::record_rms_norm(
            &mut self.b,
            src,
            w.buf.buffer()?,
            dst,
            c.rms_norm_eps,
            c.hidden_size,
            self.n,
        )
    }

    fn matmul(&mut self, w: &GpuMatrix, src: Act, dst: Act) -> Result<()> {
        let (sbuf, _) = self.buf(src)?;
        let (dbuf, at) = self.buf(dst)?;
        let r = match w.act_kind() {
            None => w.record(&mut self.b, whole(sbuf), dbuf, at, self.n),
            Some(kind) => {
                // One activation has one width, so the buffer only grows (and
                // is replaced) for another activation, which is converted anew.
                let acts = self.b.act_buffer(kind, kind.bytes(self.n, w.cols())?)?;
                if self.held[kind as usize] != Some(src) {
                    record_quantize(&mut self.b, kind, whole(sbuf), &acts, self.n, w.cols())?;
                    self.held[kind as usize] = Some(src);
                }
                w.record_on(&mut self.b, whole(&acts), dbuf, at, self.n)
            }
        };
        self.wrote(dst);
        r
    }

    fn add_bias(&mut self, dst: Act, bias: &GpuTensor) -> Result<()> {
        self.wrote(dst);
        let (dst, at) = self.buf(dst)?;
        let len = bias.len();
        ops::record_bias_add(
            &mut self.b,
            dst,
            bias.buf.buffer()?,
            len,
            self.n,
            len,
            at,
            false,
        )
    }

    fn head_norm(&mut self, dst: Act, w: &GpuTensor) -> Result<()> {
        self.wrote(dst);
        let c = &self.model.config;
        let heads = if dst == Act::Q {
            c.n_heads
        } else {
            c.n_kv_heads
        };
        let (buf, at) = self.buf(dst)?;
        ops::record_head_norm(
            &mut self.b,
            buf,
            w.buf.buffer()?,
            c.rms_norm_eps,
            c.head_dim,
            heads,
            self.n,
            at,
        )
    }

    fn rope(&mut self, dst: Act) -> Result<()> {
        self.wrote(dst);
        let c = &self.model.config;
        let (heads, stride) = if dst == Act::Q {
            (c.n_heads, c.q_dim())
        } else {
            (c.n_kv_heads, c.kv_dim())
        };
        let (buf, at) = self.buf(dst)?;
        let shape = RopeShape {
            n_tokens: self.n,
            n_heads: heads,
            head_dim: c.head_dim,
            row_stride: stride,
            base: at,
            style: self.model.rope_style,
        };
        let table = match &self.rope_local {
            Some(local) if c.local_rope(self.layer) => local,
            _ => &self.rope,
        };
        ops::record_rope(&mut self.b, buf, table, &shape)
    }

    fn attention(&mut self) -> Result<()> {
        self.wrote(Act::Attn);
        let c = &self.model.config;
        let (q, _) = self.buf(Act::Q)?;
        let (k, _) = self.buf(Act::K)?;
        let (v, _) = self.buf(Act::V)?;
        let (out, _) = self.buf(Act::Attn)?;
        let shape = AttentionShape {
            n_tokens: self.n,
            start: self.start,
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            sliding_window: c.window(self.layer),
            scale: c.attention_scale(),
        };
        ops::record_attention(&mut self.b, q, k, v, out, &shape)
    }

    fn add(&mut self, dst: Act, src: Act) -> Result<()> {
        self.wrote(dst);
        let (dst, _) = self.buf(dst)?;
        let (src, _) = self.buf(src)?;
        ops::record_add(
            &mut self.b,
            dst,
            src,
            self.n * self.model.config.hidden_size,
        )
    }

    fn glu(&mut self) -> Result<()> {
        self.wrote(Act::Gate);
        let (g, _) = self.buf(Act::Gate)?;
        let (u, _) = self.buf(Act::Up)?;
        let c = &self.model.config;
        ops::record_glu(
            &mut self.b,
            g,
            u,
            self.n * c.intermediate_size,
            c.activation,
        )
    }

    fn tap(&mut self, w: &GpuTensor) -> Result<()> {
        let out = *self
            .taps
            .get(self.next_tap)
            .ok_or_else(|| Error::Gpu("a layer tap without its buffer".into()))?;
        self.next_tap += 1;
        let (x, _) = self.buf(Act::X)?;
        let c = &self.model.config;
        ops::record_rms_norm(
            &mut self.b,
            x,
            w.buf.buffer()?,
            out,
            c.rms_norm_eps,
            c.hidden_size,
            self.n,
        )
    }
}
