//! The Llama-family decoder forward pass (Llama, Qwen2, Mistral): embedding
//! gather, pre-norm blocks of grouped-query causal attention with rotary
//! positions and a SwiGLU MLP, and a final RMSNorm. It stops at the normed
//! hidden states: the vocabulary projection is a separate, optional step
//! because score-head PRMs never need it.

use super::config::ModelConfig;
use super::decoder::Taps;
use super::decoder::{self, Act, Block, DecoderPass, VocabHead, Weights};
use super::matrix::{effective_threads, Matrix};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::quant::QuantizedActs;

/// Which elements RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Hugging Face `rotate_half`: element `i` pairs with `i + head_dim/2`.
    /// Right for weights exactly as HF checkpoints store them.
    HalfSplit,
    /// Element `2i` pairs with `2i + 1`. Right for GGUF files, whose q/k
    /// weights llama.cpp's converter permuted for this rotation.
    AdjacentPairs,
}

/// One decoder block's weights on the CPU. Vectors are per-channel (norm gains, biases).
pub type Layer = Block<Matrix, Vec<f32>>;

/// Where the CPU engine's vocabulary projection comes from.
pub type LmHead = VocabHead<Matrix>;

/// Final-normed hidden states, token-major: row `t` is `data[t*width..(t+1)*width]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hidden {
    pub n_tokens: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

impl Hidden {
    /// Row `t`, or `None` past the end.
    pub fn row(&self, t: usize) -> Option<&[f32]> {
        (t < self.n_tokens)
            .then(|| self.data.get(t * self.width..(t + 1) * self.width))
            .flatten()
    }
}

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

/// A loaded decoder, ready to run.
#[derive(Debug, Clone)]
pub struct Transformer {
    config: ModelConfig,
    rope_style: RopeStyle,
    inv_freq: Vec<f64>,
    w: Weights<Matrix, Vec<f32>>,
    threads: usize,
}

fn shape_err(what: &str, want: (usize, usize), got: (usize, usize)) -> Error {
    Error::model(
        "transformer",
        format!(
            "{what}: expected shape [{}, {}], got [{}, {}]",
            want.0, want.1, got.0, got.1
        ),
    )
}

fn check_matrix(what: &str, m: &Matrix, rows: usize, cols: usize) -> Result<()> {
    if (m.rows(), m.cols()) != (rows, cols) {
        return Err(shape_err(what, (rows, cols), (m.rows(), m.cols())));
    }
    Ok(())
}

fn check_vec(what: &str, v: Option<&Vec<f32>>, len: usize, required: bool) -> Result<()> {
    match v {
        Some(v) if v.len() != len => Err(Error::model(
            "transformer",
            format!("{what}: expected {len} values, got {}", v.len()),
        )),
        None if required => Err(Error::model("transformer", format!("{what}: missing"))),
        _ => Ok(()),
    }
}

impl Transformer {
    /// Assembles a decoder, checking every weight's shape against `config`.
    pub fn new(
        config: ModelConfig,
        rope_style: RopeStyle,
        embed: Matrix,
        layers: Vec<Layer>,
        norm: Vec<f32>,
        lm_head: LmHead,
    ) -> Result<Transformer> {
        config.validate()?;
        let (h, q, kv, ff) = (
            config.hidden_size,
            config.q_dim(),
            config.kv_dim(),
            config.intermediate_size,
        );
        check_matrix("embed_tokens", &embed, config.vocab_size, h)?;
        if layers.len() != config.n_layers {
            return Err(Error::model(
                "transformer",
                format!(
                    "config has {} layers, weights have {}",
                    config.n_layers,
                    layers.len()
                ),
            ));
        }
        for (i, l) in layers.iter().enumerate() {
            let p = |s: &str| format!("layer {i} {s}");
            check_vec(&p("input_layernorm"), Some(&l.attn_norm), h, true)?;
            check_matrix(&p("q_proj"), &l.q, q, h)?;
            check_matrix(&p("k_proj"), &l.k, kv, h)?;
            check_matrix(&p("v_proj"), &l.v, kv, h)?;
            check_matrix(&p("o_proj"), &l.o, h, q)?;
            check_vec(
                &p("q_proj.bias"),
                l.q_bias.as_ref(),
                q,
                config.attention_bias,
            )?;
            check_vec(
                &p("k_proj.bias"),
                l.k_bias.as_ref(),
                kv,
                config.attention_bias,
            )?;
            check_vec(
                &p("v_proj.bias"),
                l.v_bias.as_ref(),
                kv,
                config.attention_bias,
            )?;
            check_vec(&p("o_proj.bias"), l.o_bias.as_ref(), h, config.o_bias)?;
            check_vec(&p("post_attention_layernorm"), Some(&l.mlp_norm), h, true)?;
            check_matrix(&p("gate_proj"), &l.gate, ff, h)?;
            check_matrix(&p("up_proj"), &l.up, ff, h)?;
            check_matrix(&p("down_proj"), &l.down, h, ff)?;
        }
        check_vec("norm", Some(&norm), h, true)?;
        if let LmHead::Separate(m) = &lm_head {
            check_matrix("lm_head", m, config.vocab_size, h)?;
        }
        let threads = crate::par::available();
        Ok(Transformer {
            inv_freq: config.rope_inv_freq(),
            config,
            rope_style,
            w: Weights {
                embed,
                layers,
                norm,
                lm_head,
            },
            threads,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn rope_style(&self) -> RopeStyle {
        self.rope_style
    }

    /// The weights, for uploading to another engine (the GPU's) and for
    /// timing each matrix (`stepscore bench --decode`).
    pub fn weights(&self) -> &Weights<Matrix, Vec<f32>> {
        &self.w
    }

    /// RoPE inverse frequencies (f64, as the CPU tables use them).
    #[cfg(feature = "gpu")]
    pub(crate) fn inv_freq(&self) -> &[f64] {
        &self.inv_freq
    }

    /// Threads used by matmuls and attention (at least 1; on wasm32 at most
    /// what the build's pool has, see [`crate::par`]).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = effective_threads(threads);
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether [`Transformer::logits_for`] can run.
    /// A copy with every weight expanded to f32, so products run on exact
    /// f32 activations instead of the quantized ones ggml's scheme uses: the
    /// reference path for checking the forward pass on quantized checkpoints.
    pub fn dequantized(&self) -> Result<Transformer> {
        let mut t = self.clone();
        t.w.embed = t.w.embed.to_f32()?;
        for l in &mut t.w.layers {
            for m in [
                &mut l.q,
                &mut l.k,
                &mut l.v,
                &mut l.o,
                &mut l.gate,
                &mut l.up,
                &mut l.down,
            ] {
                *m = m.to_f32()?;
            }
        }
        if let LmHead::Separate(m) = &mut t.w.lm_head {
            *m = m.to_f32()?;
        }
        Ok(t)
    }

    /// Quantizes every f32 weight matrix to `ty` (Q8_0 or Q4_0), as llama.cpp's
    /// converter would: the Hugging Face path's optional load-time quantization.
    /// F16 and BF16 convert them to 16-bit rows instead (see
    /// [`crate::quant::quantize_weights`]).
    pub fn quantize_weights(&mut self, ty: GgmlType) -> Result<()> {
        self.w.embed = self.w.embed.quantized(ty)?;
        for l in &mut self.w.layers {
            for m in [
                &mut l.q,
                &mut l.k,
                &mut l.v,
                &mut l.o,
                &mut l.gate,
                &mut l.up,
                &mut l.down,
            ] {
                *m = m.quantized(ty)?;
            }
        }
        if let LmHead::Separate(m) = &mut self.w.lm_head {
            *m = m.quantized(ty)?;
        }
        Ok(())
    }

    /// Frees the vocabulary projection when the head never needs it (score
    /// and value heads): for a 1.5B Qwen2 that is ~230M parameters.
    pub(crate) fn drop_lm_head(&mut self) {
        if let LmHead::Separate(_) = self.w.lm_head {
            self.w.lm_head = LmHead::Absent;
        }
    }

    pub fn has_lm_head(&self) -> bool {
        self.w.vocab_projection().is_some()
    }

    /// Keeps only the first `n` blocks (no-op when `n` is not smaller), for
    /// a head that reads layer `n` and nothing after it: the final-normed
    /// output of the truncated model is by definition the hidden state of
    /// layer `n` (see [`Transformer::forward_tapped`]), and the later blocks
    /// are never run. Caches made before the call no longer fit.
    pub(crate) fn truncate_layers(&mut self, n: usize) {
        if n < self.w.layers.len() {
            self.w.layers.truncate(n);
            self.config.n_layers = n;
        }
    }

    /// An empty cache shaped for this model.
    pub fn new_cache(&self) -> KvCache {
        KvCache {
            kv_dim: self.config.kv_dim(),
            len: 0,
            k: vec![Vec::new(); self.config.n_layers],
            v: vec![Vec::new(); self.config.n_layers],
        }
    }

    /// Runs `tokens` through the decoder and returns their final-normed hidden
    /// states. With a cache, the tokens continue the sequence it holds and
    /// their keys/values are appended to it; without one they start at
    /// position 0.
    pub fn forward(&self, tokens: &[u32], cache: Option<&mut KvCache>) -> Result<Hidden> {
        Ok(self.forward_tapped(tokens, cache, None)?.last)
    }

    /// [`Transformer::forward`], also returning the hidden state of layer
    /// `tap` when asked. The hidden state of layer `L` (0 <= L <= n_layers)
    /// is the residual stream after the first `L` blocks (`L = 0`: the token
    /// embeddings) passed through the model's final RMSNorm, the convention
    /// of the "logit lens": `L = n_layers` is the final hidden state every
    /// head reads by default, and layer `L` of a model equals the final
    /// hidden state of the same model cut to its first `L` blocks.
    pub fn forward_tapped(
        &self,
        tokens: &[u32],
        cache: Option<&mut KvCache>,
        tap: Option<usize>,
    ) -> Result<Taps<Hidden>> {
        let mut scratch;
        let cache = match cache {
            Some(c) => c,
            None => {
                scratch = self.new_cache();
                &mut scratch
            }
        };
        if cache.k.len() != self.config.n_layers || cache.kv_dim != self.config.kv_dim() {
            return Err(Error::InvalidArgument(
                "KV cache was made for a different model".into(),
            ));
        }
        let start = cache.len;
        decoder::check_input(&self.config, tokens, start, tap)?;
        let rows = tokens.len();
        self.forward_segments(tokens, vec![Seg { cache, start, rows }], tap)
    }

    /// One new token for each of several sequences, in one pass: token `i`
    /// continues `caches[i]`. The matmuls run once over all rows (a decode
    /// step of N candidates reads the weights once, not N times); each
    /// row's attention reads its own cache. Every row's result has the same
    /// bits as [`Transformer::forward`] of that token alone on its cache.
    pub fn forward_rows(&self, tokens: &[u32], caches: &mut [&mut KvCache]) -> Result<Hidden> {
        if tokens.len() != caches.len() {
            return Err(Error::InvalidArgument(format!(
                "{} tokens for {} caches: one token per cache",
                tokens.len(),
                caches.len()
            )));
        }
        let mut segs = Vec::with_capacity(caches.len());
        for (t, cache) in tokens.iter().zip(caches.iter_mut()) {
            if cache.k.len() != self.config.n_layers || cache.kv_dim != self.config.kv_dim() {
                return Err(Error::InvalidArgument(
                    "KV cache was made for a different model".into(),
                ));
            }
            let start = cache.len;
            decoder::check_input(&self.config, std::slice::from_ref(t), start, None)?;
            segs.push(Seg {
                cache: &mut **cache,
                start,
                rows: 1,
            });
        }
        Ok(self.forward_segments(tokens, segs, None)?.last)
    }

    /// Runs the segments' token rows (consecutive in `tokens`) in one pass;
    /// on success each cache holds its new positions, on failure every
    /// cache is left as it was.
    fn forward_segments(
        &self,
        tokens: &[u32],
        mut segs: Vec<Seg<'_>>,
        tap: Option<usize>,
    ) -> Result<Taps<Hidden>> {
        let result = crate::par::install(|| self.forward_inner(tokens, &mut segs, tap));
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
        tap: Option<usize>,
    ) -> Result<Taps<Hidden>> {
        let c = &self.config;
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
                layer: tap.map(|_| hidden(Vec::new())),
            });
        }
        let mut x = vec![0.0f32; n * h];
        for (row, &t) in x.chunks_exact_mut(h).zip(tokens) {
            self.w.embed.gather_row(t as usize, row)?;
        }
        let len = |a: Act| match a {
            Act::X | Act::Xn | Act::Proj => n * h,
            Act::Q | Act::Attn => n * qd,
            Act::K | Act::V => n * kvd,
            Act::Gate | Act::Up => n * ff,
        };
        let mut rope = Vec::new();
        for seg in segs.iter() {
            rope.extend(decoder::rope_table(&self.inv_freq, seg.start, seg.rows));
        }
        let mut pass = CpuPass {
            model: self,
            segs,
            n,
            layer: 0,
            rope,
            bufs: ACTS.map(|a| {
                if a == Act::X {
                    Vec::new()
                } else {
                    vec![0.0f32; len(a)]
                }
            }),
            tapped: None,
            acts: None,
        };
        pass.bufs[Act::X as usize] = x;
        decoder::run(&mut pass, &self.w, tap)?;
        let last = std::mem::take(&mut pass.bufs[Act::Xn as usize]);
        let tapped = match tap {
            Some(l) if l == self.w.layers.len() => Some(last.clone()),
            _ => pass.tapped.take(),
        };
        Ok(Taps {
            last: hidden(last),
            layer: tapped.map(hidden),
        })
    }

    /// Logits for the rows of `hidden` (any number of `hidden_size`-wide rows):
    /// over the whole vocabulary, or only the listed vocabulary rows, in order.
    /// Returns `[n_rows × (rows.len() or vocab_size)]`.
    pub fn logits_for(&self, hidden: &[f32], rows: Option<&[u32]>) -> Result<Vec<f32>> {
        let h = self.config.hidden_size;
        if hidden.len() % h != 0 {
            return Err(Error::InvalidArgument(format!(
                "hidden rows hold {} values, not a multiple of hidden_size {h}",
                hidden.len()
            )));
        }
        let n = hidden.len() / h;
        let head = self.vocab_projection()?;
        crate::par::install(|| self.project(head, hidden, n, rows))
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
                head.matmul(hidden, n, &mut out, self.threads)?;
                Ok(out)
            }
            Some(rows) => {
                if let Some(&r) = rows.iter().find(|&&r| r as usize >= self.config.vocab_size) {
                    return Err(Error::InvalidArgument(format!(
                        "vocabulary row {r} is out of range for vocabulary size {}",
                        self.config.vocab_size
                    )));
                }
                let sub = head.select_rows(rows)?;
                let mut out = vec![0.0f32; n * rows.len()];
                sub.matmul(hidden, n, &mut out, self.threads)?;
                Ok(out)
            }
        }
    }

    /// Rotates each head of each token row of `x` (`n_heads * head_dim`
    /// wide) by the interleaved (cos, sin) table of [`decoder::rope_table`].
    fn apply_rope(&self, x: &mut [f32], n_heads: usize, table: &[f32]) {
        let hd = self.config.head_dim;
        let half = hd / 2;
        for (row, cs) in x
            .chunks_exact_mut(n_heads * hd)
            .zip(table.chunks_exact(2 * half))
        {
            for head in row.chunks_exact_mut(hd) {
                match self.rope_style {
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

    /// Causal grouped-query attention of `n` new queries (absolute positions
    /// `start..start+n`) over all cached keys/values; writes `[n × q_dim]`.
    /// Work is split over threads by interleaved blocks of query tokens, since
    /// later tokens attend to more keys.
    fn attention(
        &self,
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        start: usize,
        n: usize,
        out: &mut [f32],
    ) {
        let c = &self.config;
        let qd = c.q_dim();
        let all = effective_threads(self.threads);
        if n < all && c.n_heads > 1 {
            // Fewer queries than threads (decode): split each query's heads.
            let threads = all.min(c.n_heads);
            let per = c.n_heads.div_ceil(threads) * c.head_dim;
            let mut jobs: Vec<Vec<(usize, usize, &mut [f32])>> =
                (0..threads).map(|_| Vec::new()).collect();
            for (t, orow) in out.chunks_exact_mut(qd).enumerate() {
                for (k, part) in orow.chunks_mut(per).enumerate() {
                    if let Some(list) = jobs.get_mut(k % threads) {
                        list.push((t, k * per, part));
                    }
                }
            }
            crate::par::for_each(jobs, |list| {
                for (t, at, part) in list {
                    let qs = &q[t * qd + at..t * qd + at + part.len()];
                    let h0 = at / c.head_dim;
                    self.attend_one(qs, keys, values, start + t, h0, part);
                }
            });
            return;
        }
        let threads = all.min(n);
        let block = n.div_ceil(threads * 4).max(1);
        let mut jobs: Vec<Vec<(usize, &mut [f32])>> = (0..threads).map(|_| Vec::new()).collect();
        for (bi, chunk) in out.chunks_mut(block * qd).enumerate() {
            if let Some(list) = jobs.get_mut(bi % threads) {
                list.push((bi * block, chunk));
            }
        }
        let run = |list: Vec<(usize, &mut [f32])>| {
            for (t0, chunk) in list {
                for (dt, orow) in chunk.chunks_exact_mut(qd).enumerate() {
                    let t = t0 + dt;
                    self.attend_one(&q[t * qd..(t + 1) * qd], keys, values, start + t, 0, orow);
                }
            }
        };
        crate::par::for_each(jobs, run);
    }

    /// One query token at absolute position `pos`: heads `h0..` (as many
    /// as `q` and `out` hold; every head is computed on its own).
    fn attend_one(
        &self,
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        pos: usize,
        h0: usize,
        out: &mut [f32],
    ) {
        let c = &self.config;
        let first = match c.sliding_window {
            Some(w) => (pos + 1).saturating_sub(w),
            None => 0,
        };
        let shape = AttnShape {
            hd: c.head_dim,
            kvd: c.kv_dim(),
            group: c.n_heads / c.n_kv_heads,
            first,
            pos,
            h0,
        };
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                // SAFETY: the CPU supports the features the functions are compiled for.
                if std::is_x86_feature_detected!("avx512f") {
                    unsafe { attend_one_avx512(&shape, q, keys, values, out) };
                } else {
                    unsafe { attend_one_avx2(&shape, q, keys, values, out) };
                }
                return;
            }
        }
        attend_one_body::<false>(&shape, q, keys, values, out);
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
    bufs: [Vec<f32>; 9],
    tapped: Option<Vec<f32>>,
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

    fn rms_norm(&mut self, src: Act, w: &Vec<f32>, dst: Act) -> Result<()> {
        self.acts = None;
        let eps = self.model.config.rms_norm_eps;
        self.with2(src, dst, |x, out| {
            rms_norm(x, w, eps, out);
            Ok(())
        })
    }

    fn matmul(&mut self, w: &Matrix, src: Act, dst: Act) -> Result<()> {
        let (n, threads) = (self.n, self.model.threads);
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

    fn rope(&mut self, dst: Act) -> Result<()> {
        self.acts = None;
        let c = &self.model.config;
        let heads = if dst == Act::Q {
            c.n_heads
        } else {
            c.n_kv_heads
        };
        self.model
            .apply_rope(&mut self.bufs[dst as usize], heads, &self.rope);
        Ok(())
    }

    fn attention(&mut self) -> Result<()> {
        self.acts = None;
        let (kvd, qd) = (self.model.config.kv_dim(), self.model.config.q_dim());
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
            self.model.attention(
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

    fn swiglu(&mut self) -> Result<()> {
        self.acts = None;
        self.with2(Act::Up, Act::Gate, |up, gate| {
            for (g, u) in gate.iter_mut().zip(up) {
                // SiLU(g) * u
                *g = *g / (1.0 + super::exp::exp(-*g)) * u;
            }
            Ok(())
        })
    }

    fn tap(&mut self, w: &Vec<f32>) -> Result<()> {
        let x = &self.bufs[Act::X as usize];
        let mut out = vec![0.0f32; x.len()];
        rms_norm(x, w, self.model.config.rms_norm_eps, &mut out);
        self.tapped = Some(out);
        Ok(())
    }
}

/// Geometry of one query's attention (see [`attend_one_body`]).
struct AttnShape {
    hd: usize,
    kvd: usize,
    group: usize,
    first: usize,
    pos: usize,
    /// Head index of the first head in the query and output slices.
    h0: usize,
}

/// [`attend_one_body`] compiled with AVX2 (the baseline x86_64 target only
/// has SSE2): the same operations in the same order, so the same results,
/// with twice the vector width. Attention is the engine's largest cost
/// outside the quantized matmuls, and this is the cheapest way to speed it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_one_avx2(s: &AttnShape, q: &[f32], keys: &[f32], values: &[f32], out: &mut [f32]) {
    attend_one_body::<false>(s, q, keys, values, out)
}

/// [`attend_one_avx2`] with the weighted sum of values in AVX-512 registers
/// ([`weigh_values_avx512`]): the same per-element operations, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
unsafe fn attend_one_avx512(
    s: &AttnShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    attend_one_body::<true>(s, q, keys, values, out)
}

/// `oh[i] = 0 + Σ_j (scores[j] / sum) * v_j[i]` over keys `first..` in order,
/// with `oh` held in up to 8 zmm registers per 128 values instead of being
/// loaded and stored for every key. No fused multiply-add: each element
/// gets exactly the portable loop's operations.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weigh_values_avx512(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    use std::arch::x86_64::*;
    let hd = oh.len();
    if (first + scores.len()) * kvd > values.len() || off + hd > kvd {
        // not a cache this pass built; the portable loop checks every index
        return weigh_values(scores, sum, values, kvd, off, first, oh);
    }
    let mut c0 = 0;
    while c0 + 16 <= hd {
        let n = ((hd - c0) / 16).min(8);
        let mut acc = [_mm512_setzero_ps(); 8];
        for (k, &sc) in scores.iter().enumerate() {
            let p = _mm512_set1_ps(sc / sum);
            let v = values.as_ptr().add((first + k) * kvd + off + c0);
            for (i, a) in acc.iter_mut().enumerate().take(n) {
                *a = _mm512_add_ps(*a, _mm512_mul_ps(p, _mm512_loadu_ps(v.add(16 * i))));
            }
        }
        for (i, a) in acc.iter().enumerate().take(n) {
            _mm512_storeu_ps(oh.as_mut_ptr().add(c0 + 16 * i), *a);
        }
        c0 += 16 * n;
    }
    weigh_values(scores, sum, values, kvd, off + c0, first, &mut oh[c0..]);
}

/// The portable form of the values' weighted sum.
#[inline(always)]
fn weigh_values(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    let hd = oh.len();
    oh.fill(0.0);
    for (k, sc) in scores.iter().enumerate() {
        let p = sc / sum;
        let j = first + k;
        let vj = &values[j * kvd + off..j * kvd + off + hd];
        for (o, v) in oh.iter_mut().zip(vj) {
            *o += p * v;
        }
    }
}

/// Softmax attention of one query row (all heads) over keys/values
/// `first..=pos`; inlined into each instruction-set variant.
/// `WIDE`: the weighted sum of values in AVX-512 registers (callers check
/// the CPU has AVX-512F).
#[inline(always)]
fn attend_one_body<const WIDE: bool>(
    s: &AttnShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    let (hd, kvd) = (s.hd, s.kvd);
    let scale = 1.0 / (hd as f32).sqrt();
    let mut scores = vec![0.0f32; s.pos + 1 - s.first];
    for (h, (qh, oh)) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)).enumerate() {
        let off = ((s.h0 + h) / s.group) * hd;
        let mut max = f32::NEG_INFINITY;
        for (sc, j) in scores.iter_mut().zip(s.first..=s.pos) {
            let kj = &keys[j * kvd + off..j * kvd + off + hd];
            *sc = attn_dot(qh, kj) * scale;
            max = max.max(*sc);
        }
        let mut sum = 0.0f32;
        for sc in scores.iter_mut() {
            *sc = super::exp::exp(*sc - max);
            sum += *sc;
        }
        #[cfg(target_arch = "x86_64")]
        if WIDE {
            // SAFETY: `WIDE` is only set by `attend_one_avx512`, whose callers
            // checked for AVX-512F; the value rows are in bounds as below.
            unsafe { weigh_values_avx512(&scores, sum, values, kvd, off, s.first, oh) };
            continue;
        }
        // SIMD128 in registers across the keys, with the portable loop's bits.
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if crate::quant::wasm::weigh_values(&scores, sum, values, kvd, off, s.first, oh) {
            continue;
        }
        weigh_values(&scores, sum, values, kvd, off, s.first, oh);
    }
}

/// Query . key: [`dot_inline`], as SIMD128 intrinsics on wasm32 (the same
/// lanes summed in the same order, so the same bits).
#[inline(always)]
fn attn_dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return crate::quant::wasm::dot_attn(a, b);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    dot_inline(a, b)
}

/// The same sum, in the same order, as `matrix::dot`, but always inlined so
/// it takes the caller's instruction set.
#[cfg_attr(
    all(target_arch = "wasm32", target_feature = "simd128"),
    allow(dead_code)
)]
#[inline(always)]
fn dot_inline(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 8;
    let mut acc = [0.0f32; LANES];
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (pa, pb) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += pa[i] * pb[i];
        }
    }
    let mut tail = 0.0f32;
    for (p, q) in ra.iter().zip(rb) {
        tail += p * q;
    }
    acc.iter().sum::<f32>() + tail
}

/// `out = x / sqrt(mean(x²) + eps) * weight`, per row.
fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let h = weight.len();
    for (xr, or) in x.chunks_exact(h).zip(out.chunks_exact_mut(h)) {
        let ms = super::matrix::dot(xr, xr) / h as f32;
        let inv = 1.0 / (ms + eps).sqrt();
        for ((o, &a), &w) in or.iter_mut().zip(xr).zip(weight) {
            *o = a * inv * w;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// On wasm32 (wasm-bindgen-test, scripts/test-wasm-kernels.sh): the
    /// SIMD128 attention sums against this file's portable loops, bit for bit,
    /// for head sizes with and without a tail.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[wasm_bindgen_test::wasm_bindgen_test]
    fn simd128_attention_sums_equal_the_portable_loops() {
        use crate::quant::wasm;
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for (hd, kv_heads, keys, first) in
            [(64, 3, 37, 0), (72, 2, 9, 1), (6, 1, 3, 0), (130, 1, 5, 2)]
        {
            let kvd = hd * kv_heads;
            let values: Vec<f32> = (0..(first + keys) * kvd).map(|_| next()).collect();
            let scores: Vec<f32> = (0..keys).map(|_| (next() * 4.0).exp()).collect();
            let sum: f32 = scores.iter().sum();
            for h in 0..kv_heads {
                let off = h * hd;
                let mut want = vec![f32::NAN; hd];
                let mut got = vec![f32::NAN; hd];
                weigh_values(&scores, sum, &values, kvd, off, first, &mut want);
                assert!(wasm::weigh_values(
                    &scores, sum, &values, kvd, off, first, &mut got
                ));
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "hd {hd}, head {h}: {got:?} vs {want:?}"
                );
                let (q, k) = (&values[off..off + hd], &values[kvd + off..kvd + off + hd]);
                assert_eq!(wasm::dot_attn(q, k).to_bits(), dot_inline(q, k).to_bits());
            }
            // Rows past the cache: refused, the portable loop takes over.
            let mut out = vec![0.0f32; hd];
            assert!(!wasm::weigh_values(
                &scores,
                sum,
                &values[..kvd],
                kvd,
                0,
                first,
                &mut out
            ));
        }
    }

    /// The AVX-512 weighted sum of values keeps each element's operations
    /// (0 + p_0 v_0 + p_1 v_1 ..., no fused multiply-add), so it must give
    /// the portable loop's bits, for head sizes with and without a tail.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_weighted_values_equal_the_portable_loop_bit_for_bit() {
        if !std::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512F on this CPU: the wide weighted sum is not exercised");
            return;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for (hd, kv_heads, keys, first) in [
            (128, 2, 37, 0),
            (64, 3, 5, 2),
            (72, 2, 9, 1),
            (8, 1, 3, 0),
            (272, 1, 4, 0),
        ] {
            let kvd = hd * kv_heads;
            let values: Vec<f32> = (0..(first + keys) * kvd).map(|_| next()).collect();
            let scores: Vec<f32> = (0..keys).map(|_| (next() * 4.0).exp()).collect();
            let sum: f32 = scores.iter().sum();
            for h in 0..kv_heads {
                let off = h * hd;
                let mut want = vec![f32::NAN; hd];
                let mut got = vec![f32::NAN; hd];
                weigh_values(&scores, sum, &values, kvd, off, first, &mut want);
                // SAFETY: AVX-512F checked above.
                unsafe { weigh_values_avx512(&scores, sum, &values, kvd, off, first, &mut got) };
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "hd {hd}, head {h}: {got:?} vs {want:?}"
                );
            }
        }
    }
}
