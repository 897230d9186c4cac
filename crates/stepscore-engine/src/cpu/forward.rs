//! The CPU engine's forward pass over a [`Transformer`] in host memory:
//! embedding gather, pre-norm blocks of grouped-query causal attention with
//! rotary positions and a SwiGLU MLP, and a final RMSNorm, as the shared
//! block sequence (`model/decoder.rs`) orders them. It stops at the normed
//! hidden states: the vocabulary projection ([`Transformer::logits_for`]) is
//! a separate, optional step because score-head PRMs never need it.

use super::attention;
use crate::error::{Error, Result};
use crate::model::decoder::{self, Act, DecoderPass, Taps};
use crate::model::{Activation, Hidden, Matrix, RopeStyle, Transformer};
use crate::quant::{dot, QuantizedActs};

/// Keys and values of every position processed so far, per layer, so a later
/// `forward` can append tokens after a prefix without recomputing it.
#[derive(Debug, Clone)]
pub struct KvCache {
    kv_dim: usize,
    len: usize,
    k: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl KvCache {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps only the first `n` positions (no-op when `n >= len`).
    pub fn truncate(&mut self, n: usize) {
        if n < self.len {
            self.len = n;
            for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
                buf.truncate(n * self.kv_dim);
            }
        }
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }
}

impl Transformer {
    /// An empty cache shaped for this model.
    pub fn new_cache(&self) -> KvCache {
        KvCache {
            kv_dim: self.config().kv_dim(),
            len: 0,
            k: vec![Vec::new(); self.config().n_layers],
            v: vec![Vec::new(); self.config().n_layers],
        }
    }

    /// Runs `tokens` through the decoder and returns their final-normed hidden
    /// states. With a cache, the tokens continue the sequence it holds and
    /// their keys/values are appended to it; without one they start at
    /// position 0.
    pub fn forward(&self, tokens: &[u32], cache: Option<&mut KvCache>) -> Result<Hidden> {
        Ok(self.forward_tapped(tokens, cache, &[])?.last)
    }

    /// [`Transformer::forward`], also returning the hidden state of each
    /// layer of `taps` (strictly ascending). The hidden state of layer `L` (0 <= L <= n_layers)
    /// is the residual stream after the first `L` blocks (`L = 0`: the token
    /// embeddings) passed through the model's final RMSNorm, the convention
    /// of the "logit lens": `L = n_layers` is the final hidden state every
    /// head reads by default, and layer `L` of a model equals the final
    /// hidden state of the same model cut to its first `L` blocks.
    pub fn forward_tapped(
        &self,
        tokens: &[u32],
        cache: Option<&mut KvCache>,
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        let mut scratch;
        let cache = match cache {
            Some(c) => c,
            None => {
                scratch = self.new_cache();
                &mut scratch
            }
        };
        if cache.k.len() != self.config().n_layers || cache.kv_dim != self.config().kv_dim() {
            return Err(Error::InvalidArgument(
                "KV cache was made for a different model".into(),
            ));
        }
        let start = cache.len;
        decoder::check_input(self.config(), tokens, start, taps)?;
        let rows = tokens.len();
        self.forward_segments(tokens, vec![Seg { cache, start, rows }], taps)
    }

    /// One new token for each of several sequences, in one pass: token `i`
    /// continues `caches[i]`. The matmuls run once over all rows (a decode
    /// step of N candidates reads the weights once, not N times); each
    /// row's attention reads its own cache. Every row's result has the same
    /// bits as [`Transformer::forward`] of that token alone on its cache.
    pub fn forward_rows(&self, tokens: &[u32], caches: &mut [&mut KvCache]) -> Result<Hidden> {
        let parts: Vec<&[u32]> = tokens.iter().map(std::slice::from_ref).collect();
        Ok(self.forward_joined(&parts, caches, &[])?.last)
    }

    /// Several sequences' new tokens in one pass: `parts[i]` continues
    /// `caches[i]` (N candidates after a shared prompt, each on a copy of
    /// its cache). The matmuls run once over all parts' rows, so each
    /// weight matrix is read and unpacked once instead of N times; each
    /// part's attention reads its own cache. Returns each part's states,
    /// the bits [`Transformer::forward_tapped`] gives that part alone.
    pub fn forward_batch(
        &self,
        parts: &[&[u32]],
        caches: &mut [&mut KvCache],
        taps: &[usize],
    ) -> Result<Vec<Taps<Hidden>>> {
        let joined = self.forward_joined(parts, caches, taps)?;
        let rows: Vec<usize> = parts.iter().map(|p| p.len()).collect();
        let mut layers: Vec<_> = joined
            .layers
            .into_iter()
            .map(|h| h.split(&rows).into_iter())
            .collect();
        Ok(joined
            .last
            .split(&rows)
            .into_iter()
            .map(|last| Taps {
                last,
                layers: layers.iter_mut().filter_map(Iterator::next).collect(),
            })
            .collect())
    }

    /// [`Transformer::forward_batch`] with every part's rows left joined, in order.
    fn forward_joined(
        &self,
        parts: &[&[u32]],
        caches: &mut [&mut KvCache],
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        if parts.len() != caches.len() {
            return Err(Error::InvalidArgument(format!(
                "{} token sequences for {} caches: one per cache",
                parts.len(),
                caches.len()
            )));
        }
        let mut segs = Vec::with_capacity(caches.len());
        for (part, cache) in parts.iter().zip(caches.iter_mut()) {
            if cache.k.len() != self.config().n_layers || cache.kv_dim != self.config().kv_dim() {
                return Err(Error::InvalidArgument(
                    "KV cache was made for a different model".into(),
                ));
            }
            let start = cache.len;
            decoder::check_input(self.config(), part, start, taps)?;
            segs.push(Seg {
                cache: &mut **cache,
                start,
                rows: part.len(),
            });
        }
        let tokens: Vec<u32> = parts.concat();
        self.forward_segments(&tokens, segs, taps)
    }

    /// Runs the segments' token rows (consecutive in `tokens`) in one pass;
    /// on success each cache holds its new positions, on failure every
    /// cache is left as it was.
    fn forward_segments(
        &self,
        tokens: &[u32],
        mut segs: Vec<Seg<'_>>,
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        let result = crate::par::install(self.threads(), || {
            self.forward_inner(tokens, &mut segs, taps)
        });
        for seg in segs {
            match &result {
                Ok(_) => seg.cache.len = seg.start + seg.rows,
                Err(_) => {
                    let kvd = seg.cache.kv_dim;
                    for buf in seg.cache.k.iter_mut().chain(seg.cache.v.iter_mut()) {
                        buf.truncate(seg.start * kvd);
                    }
                }
            }
        }
        result
    }

    fn forward_inner(
        &self,
        tokens: &[u32],
        segs: &mut [Seg<'_>],
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        let c = self.config();
        let n = tokens.len();
        let (h, qd, kvd, ff) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
        let hidden = |data| Hidden {
            n_tokens: n,
            width: h,
            data,
        };
        if n == 0 {
            return Ok(Taps {
                last: hidden(Vec::new()),
                layers: taps.iter().map(|_| hidden(Vec::new())).collect(),
            });
        }
        let mut x = vec![0.0f32; n * h];
        for (row, &t) in x.chunks_exact_mut(h).zip(tokens) {
            self.weights().embed.gather_row(t as usize, row)?;
        }
        let len = |a: Act| match a {
            Act::X | Act::Xn | Act::Proj => n * h,
            Act::Q | Act::Attn => n * qd,
            Act::K | Act::V => n * kvd,
            Act::Gate | Act::Up => n * ff,
        };
        let table = |inv_freq: &[f64]| {
            let mut t = Vec::new();
            for seg in segs.iter() {
                t.extend(decoder::rope_table(inv_freq, seg.start, seg.rows));
            }
            t
        };
        let rope = table(self.inv_freq());
        let rope_local = self.inv_freq_local().map(table);
        let mut pass = CpuPass {
            model: self,
            segs,
            n,
            layer: 0,
            rope,
            rope_local,
            bufs: ACTS.map(|a| {
                if a == Act::X {
                    Vec::new()
                } else {
                    vec![0.0f32; len(a)]
                }
            }),
            tapped: Vec::with_capacity(taps.len()),
            acts: None,
        };
        pass.bufs[Act::X as usize] = x;
        decoder::run(&mut pass, self.config(), self.weights(), taps)?;
        let last = std::mem::take(&mut pass.bufs[Act::Xn as usize]);
        // The pass tapped every layer below the last, in order; a tap of
        // the last layer is the final states themselves.
        let mut tapped = std::mem::take(&mut pass.tapped).into_iter();
        let n_layers = self.weights().layers.len();
        let layers = taps
            .iter()
            .map(|&l| {
                if l == n_layers {
                    Ok(hidden(last.clone()))
                } else {
                    tapped.next().map(hidden).ok_or_else(|| {
                        Error::Internal(format!("layer {l} was asked for but not tapped"))
                    })
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Taps {
            last: hidden(last),
            layers,
        })
    }

    /// Logits for the rows of `hidden` (any number of `hidden_size`-wide rows):
    /// over the whole vocabulary, or only the listed vocabulary rows, in order.
    /// Returns `[n_rows × (rows.len() or vocab_size)]`.
    pub fn logits_for(&self, hidden: &[f32], rows: Option<&[u32]>) -> Result<Vec<f32>> {
        let h = self.config().hidden_size;
        if hidden.len() % h != 0 {
            return Err(Error::InvalidArgument(format!(
                "hidden rows hold {} values, not a multiple of hidden_size {h}",
                hidden.len()
            )));
        }
        let n = hidden.len() / h;
        let head = self.vocab_projection()?;
        crate::par::install(self.threads(), || self.project(head, hidden, n, rows))
    }

    /// [`Transformer::logits_for`] after its checks, on the pool.
    fn project(
        &self,
        head: &Matrix,
        hidden: &[f32],
        n: usize,
        rows: Option<&[u32]>,
    ) -> Result<Vec<f32>> {
        match rows {
            None => {
                let mut out = vec![0.0f32; n * head.rows()];
                head.matmul(hidden, n, &mut out, self.threads())?;
                Ok(out)
            }
            Some(rows) => {
                if let Some(&r) = rows
                    .iter()
                    .find(|&&r| r as usize >= self.config().vocab_size)
                {
                    return Err(Error::InvalidArgument(format!(
                        "vocabulary row {r} is out of range for vocabulary size {}",
                        self.config().vocab_size
                    )));
                }
                let sub = head.select_rows(rows)?;
                let mut out = vec![0.0f32; n * rows.len()];
                sub.matmul(hidden, n, &mut out, self.threads())?;
                Ok(out)
            }
        }
    }

    /// Rotates each head of each token row of `x` (`n_heads * head_dim`
    /// wide) by the interleaved (cos, sin) table of [`decoder::rope_table`].
    fn apply_rope(&self, x: &mut [f32], n_heads: usize, table: &[f32]) {
        let hd = self.config().head_dim;
        let half = hd / 2;
        for (row, cs) in x
            .chunks_exact_mut(n_heads * hd)
            .zip(table.chunks_exact(2 * half))
        {
            for head in row.chunks_exact_mut(hd) {
                match self.rope_style() {
                    RopeStyle::HalfSplit => {
                        let (lo, hi) = head.split_at_mut(half);
                        for i in 0..half {
                            let (c, s) = (cs[2 * i], cs[2 * i + 1]);
                            let (a, b) = (lo[i], hi[i]);
                            lo[i] = a * c - b * s;
                            hi[i] = b * c + a * s;
                        }
                    }
                    RopeStyle::AdjacentPairs => {
                        for (i, pair) in head.chunks_exact_mut(2).enumerate() {
                            let (c, s) = (cs[2 * i], cs[2 * i + 1]);
                            let (a, b) = (pair[0], pair[1]);
                            pair[0] = a * c - b * s;
                            pair[1] = b * c + a * s;
                        }
                    }
                }
            }
        }
    }
}

/// Every activation of a pass, in [`Act`] order.
const ACTS: [Act; 9] = [
    Act::X,
    Act::Xn,
    Act::Q,
    Act::K,
    Act::V,
    Act::Attn,
    Act::Proj,
    Act::Gate,
    Act::Up,
];

/// One CPU forward pass: host buffers per activation, the quantized
/// matmuls and threaded attention of [`Transformer`].
struct CpuPass<'a, 'c> {
    model: &'a Transformer,
    /// The sequences whose rows the pass runs, in row order.
    segs: &'a mut [Seg<'c>],
    n: usize,
    layer: usize,
    rope: Vec<f32>,
    /// The local layers' table, where their RoPE base differs.
    rope_local: Option<Vec<f32>>,
    bufs: [Vec<f32>; 9],
    /// The tapped layers' states so far, in block order.
    tapped: Vec<Vec<f32>>,
    /// The last matmul input converted for block weights, reused while that
    /// activation is unchanged (q/k/v share one, gate/up another).
    acts: Option<(Act, QuantizedActs)>,
}

/// One sequence of a pass: its cache, the positions it holds before the
/// pass, and how many of the pass's rows continue it.
struct Seg<'c> {
    cache: &'c mut KvCache,
    start: usize,
    rows: usize,
}

impl CpuPass<'_, '_> {
    /// `f(src, dst)` over two distinct activations.
    fn with2(
        &mut self,
        src: Act,
        dst: Act,
        f: impl FnOnce(&[f32], &mut [f32]) -> Result<()>,
    ) -> Result<()> {
        let mut out = std::mem::take(&mut self.bufs[dst as usize]);
        let r = f(&self.bufs[src as usize], &mut out);
        self.bufs[dst as usize] = out;
        r
    }
}

impl DecoderPass for CpuPass<'_, '_> {
    type M = Matrix;
    type V = Vec<f32>;

    fn begin_block(&mut self, layer: usize) -> Result<()> {
        self.layer = layer;
        Ok(())
    }

    fn scale(&mut self, dst: Act, s: f32) -> Result<()> {
        self.acts = None;
        self.bufs[dst as usize].iter_mut().for_each(|x| *x *= s);
        Ok(())
    }

    fn rms_norm(&mut self, src: Act, w: &Vec<f32>, dst: Act) -> Result<()> {
        self.acts = None;
        let eps = self.model.config().rms_norm_eps;
        self.with2(src, dst, |x, out| {
            rms_norm(x, w, eps, out);
            Ok(())
        })
    }

    fn matmul(&mut self, w: &Matrix, src: Act, dst: Act) -> Result<()> {
        let (n, threads) = (self.n, self.model.threads());
        let ty = w.act_type().filter(|_| n > 0);
        let Some(ty) = ty else {
            self.acts = None;
            return self.with2(src, dst, |x, out| w.matmul(x, n, out, threads));
        };
        let fresh = matches!(&self.acts, Some((a, q)) if *a == src && q.ty() == ty);
        if !fresh {
            let x = &self.bufs[src as usize];
            let cols = x.len() / n;
            self.acts = Some((src, QuantizedActs::new_threaded(ty, x, n, cols, threads)?));
        }
        let mut out = std::mem::take(&mut self.bufs[dst as usize]);
        let r = match &self.acts {
            Some((_, q)) => w.matmul_acts(q, &mut out, threads),
            None => Err(Error::Internal(
                "matmul: activations were not converted".into(),
            )),
        };
        self.bufs[dst as usize] = out;
        if dst == src {
            self.acts = None;
        }
        r
    }

    fn add_bias(&mut self, dst: Act, b: &Vec<f32>) -> Result<()> {
        self.acts = None;
        add_bias(&mut self.bufs[dst as usize], Some(b));
        Ok(())
    }

    fn head_norm(&mut self, dst: Act, w: &Vec<f32>) -> Result<()> {
        self.acts = None;
        let eps = self.model.config().rms_norm_eps;
        rms_norm_in_place(&mut self.bufs[dst as usize], w, eps);
        Ok(())
    }

    fn rope(&mut self, dst: Act) -> Result<()> {
        self.acts = None;
        let c = self.model.config();
        let heads = if dst == Act::Q {
            c.n_heads
        } else {
            c.n_kv_heads
        };
        let table = match &self.rope_local {
            Some(local) if c.local_rope(self.layer) => local,
            _ => &self.rope,
        };
        self.model
            .apply_rope(&mut self.bufs[dst as usize], heads, table);
        Ok(())
    }

    fn attention(&mut self) -> Result<()> {
        self.acts = None;
        let (kvd, qd) = (self.model.config().kv_dim(), self.model.config().q_dim());
        let mut attn = std::mem::take(&mut self.bufs[Act::Attn as usize]);
        let mut row = 0;
        for seg in self.segs.iter_mut() {
            let (ck, cv) = match (
                seg.cache.k.get_mut(self.layer),
                seg.cache.v.get_mut(self.layer),
            ) {
                (Some(ck), Some(cv)) => (ck, cv),
                _ => return Err(Error::InvalidArgument("KV cache has too few layers".into())),
            };
            let rows = row..row + seg.rows;
            ck.truncate(seg.start * kvd);
            cv.truncate(seg.start * kvd);
            ck.extend_from_slice(&self.bufs[Act::K as usize][rows.start * kvd..rows.end * kvd]);
            cv.extend_from_slice(&self.bufs[Act::V as usize][rows.start * kvd..rows.end * kvd]);
            attention::attention(
                self.model.config(),
                self.layer,
                self.model.threads(),
                &self.bufs[Act::Q as usize][rows.start * qd..rows.end * qd],
                ck,
                cv,
                seg.start,
                seg.rows,
                &mut attn[rows.start * qd..rows.end * qd],
            );
            row = rows.end;
        }
        self.bufs[Act::Attn as usize] = attn;
        Ok(())
    }

    fn add(&mut self, dst: Act, src: Act) -> Result<()> {
        self.acts = None;
        self.with2(src, dst, |y, x| {
            for (a, b) in x.iter_mut().zip(y) {
                *a += b;
            }
            Ok(())
        })
    }

    fn glu(&mut self) -> Result<()> {
        self.acts = None;
        let threads = self.model.threads().max(1);
        let gelu = self.model.config().activation == Activation::GeluTanh;
        self.with2(Act::Up, Act::Gate, |up, gate| {
            // Element by element, so split over the threads in equal parts
            // (an e^x each: 7% of a prefill when run on one thread).
            let per = gate.len().div_ceil(threads).max(1);
            let parts: Vec<(&mut [f32], &[f32])> =
                gate.chunks_mut(per).zip(up.chunks(per)).collect();
            crate::par::for_each(parts, |(gate, up)| {
                for (g, u) in gate.iter_mut().zip(up) {
                    *g = gate_activation(*g, gelu) * u;
                }
            });
            Ok(())
        })
    }

    fn tap(&mut self, w: &Vec<f32>) -> Result<()> {
        let x = &self.bufs[Act::X as usize];
        let mut out = vec![0.0f32; x.len()];
        rms_norm(x, w, self.model.config().rms_norm_eps, &mut out);
        self.tapped.push(out);
        Ok(())
    }
}

/// SiLU(a) = a / (1 + e^-a), or GELU's tanh form written the same way:
/// 0.5 a (1 + tanh(z)) = a / (1 + e^(-2z)), 2z = 2 sqrt(2/pi) (a + 0.044715 a³).
/// swiglu.wgsl takes the same steps.
#[inline]
fn gate_activation(a: f32, gelu: bool) -> f32 {
    let z = if gelu {
        GELU_2Z * (a + GELU_CUBIC * a * a * a)
    } else {
        a
    };
    a / (1.0 + crate::quant::exp::exp(-z))
}

/// 2 sqrt(2/pi) and the cubic coefficient of GELU's tanh approximation,
/// written with the digits swiglu.wgsl uses (the same f32).
#[allow(clippy::excessive_precision)]
const GELU_2Z: f32 = 1.595_769_1;
const GELU_CUBIC: f32 = 0.044_715;

/// `1 / sqrt(mean(row²) + eps)`: the one scale every RMSNorm here takes
/// (shaders/rms_norm.wgsl and head_norm.wgsl take the same steps).
fn rms_scale(row: &[f32], eps: f32) -> f32 {
    let ms = dot(row, row) / row.len() as f32;
    1.0 / (ms + eps).sqrt()
}

/// `out = x / sqrt(mean(x²) + eps) * weight`, per row.
fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let h = weight.len();
    for (xr, or) in x.chunks_exact(h).zip(out.chunks_exact_mut(h)) {
        let inv = rms_scale(xr, eps);
        for ((o, &a), &w) in or.iter_mut().zip(xr).zip(weight) {
            *o = a * inv * w;
        }
    }
}

/// [`rms_norm`] in place over every `weight.len()`-wide slice (one head).
fn rms_norm_in_place(x: &mut [f32], weight: &[f32], eps: f32) {
    for row in x.chunks_exact_mut(weight.len()) {
        let inv = rms_scale(row, eps);
        for (a, &w) in row.iter_mut().zip(weight) {
            *a = *a * inv * w;
        }
    }
}

fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            for (a, c) in row.iter_mut().zip(b) {
                *a += c;
            }
        }
    }
}
