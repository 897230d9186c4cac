//! The decoder, written once for every engine: the weights' structure
//! (blocks, final norm, vocabulary projection) over an engine's storage,
//! the input checks, the RoPE tables, and the order of operations of a
//! forward pass, expressed over [`DecoderPass`]. The CPU engine
//! (`cpu/forward.rs`) implements a pass with its fused quantized
//! matmuls and threaded attention; the WGSL engine (`gpu/transformer.rs`)
//! records every step of a pass into one submission.
//!
//! The KV-cache contract both engines keep: a cache holds the keys and
//! values of positions `0..len` of one model; a forward over `n` tokens
//! with a cache continues at position `len` and, on success, leaves
//! `len + n`; on failure it leaves the cache as it was. `truncate(m)`
//! keeps the first `m` positions.

use super::config::ModelConfig;
use crate::error::{Error, Result};

/// One decoder block's weights: `M` matrices, `V` per-channel vectors
/// (norm gains, biases).
#[derive(Debug, Clone)]
pub struct Block<M, V> {
    pub attn_norm: V,
    pub q: M,
    pub k: M,
    pub v: M,
    pub o: M,
    pub q_bias: Option<V>,
    pub k_bias: Option<V>,
    pub v_bias: Option<V>,
    pub o_bias: Option<V>,
    /// Per-head RMSNorm gains of the queries and keys (`head_dim` values
    /// each), where the architecture has them ([`ModelConfig::has_qk_norm`]).
    pub q_norm: Option<V>,
    pub k_norm: Option<V>,
    /// RMSNorm gains of the attention output before the residual add
    /// ([`ModelConfig::has_post_norms`]).
    pub post_attn_norm: Option<V>,
    /// The norm before the MLP.
    pub mlp_norm: V,
    /// RMSNorm gains of the MLP output before the residual add.
    pub post_mlp_norm: Option<V>,
    pub gate: M,
    pub up: M,
    pub down: M,
}

/// Where the vocabulary projection comes from.
#[derive(Debug, Clone)]
pub enum VocabHead<M> {
    /// Reuse the embedding matrix (`tie_word_embeddings`).
    Tied,
    Separate(M),
    /// The checkpoint has none (e.g. `Qwen2ForProcessRewardModel`); only
    /// hidden states are available.
    Absent,
}

/// A decoder's weights over one engine's storage.
#[derive(Debug, Clone)]
pub struct Weights<M, V> {
    pub embed: M,
    pub layers: Vec<Block<M, V>>,
    pub norm: V,
    pub lm_head: VocabHead<M>,
}

impl<M, V> Weights<M, V> {
    /// The vocabulary projection (the embedding when tied), if any.
    pub fn vocab_projection(&self) -> Option<&M> {
        match &self.lm_head {
            VocabHead::Tied => Some(&self.embed),
            VocabHead::Separate(m) => Some(m),
            VocabHead::Absent => None,
        }
    }

    /// The same structure in another storage: `m` converts a matrix (named
    /// as in error messages, e.g. "layer 3 q_proj"), `v` a vector.
    pub fn map<M2, V2>(
        &self,
        mut m: impl FnMut(&M, &str) -> Result<M2>,
        mut v: impl FnMut(&V) -> Result<V2>,
    ) -> Result<Weights<M2, V2>> {
        let mut layers = Vec::with_capacity(self.layers.len());
        for (i, l) in self.layers.iter().enumerate() {
            let mut mm = |x: &M, what: &str| m(x, &format!("layer {i} {what}"));
            let (q, k, vv, o) = (
                mm(&l.q, "q_proj")?,
                mm(&l.k, "k_proj")?,
                mm(&l.v, "v_proj")?,
                mm(&l.o, "o_proj")?,
            );
            let (gate, up, down) = (
                mm(&l.gate, "gate_proj")?,
                mm(&l.up, "up_proj")?,
                mm(&l.down, "down_proj")?,
            );
            layers.push(Block {
                attn_norm: v(&l.attn_norm)?,
                q,
                k,
                v: vv,
                o,
                q_bias: l.q_bias.as_ref().map(&mut v).transpose()?,
                k_bias: l.k_bias.as_ref().map(&mut v).transpose()?,
                v_bias: l.v_bias.as_ref().map(&mut v).transpose()?,
                o_bias: l.o_bias.as_ref().map(&mut v).transpose()?,
                q_norm: l.q_norm.as_ref().map(&mut v).transpose()?,
                k_norm: l.k_norm.as_ref().map(&mut v).transpose()?,
                post_attn_norm: l.post_attn_norm.as_ref().map(&mut v).transpose()?,
                mlp_norm: v(&l.mlp_norm)?,
                post_mlp_norm: l.post_mlp_norm.as_ref().map(&mut v).transpose()?,
                gate,
                up,
                down,
            });
        }
        Ok(Weights {
            embed: m(&self.embed, "embed_tokens")?,
            layers,
            norm: v(&self.norm)?,
            lm_head: match &self.lm_head {
                VocabHead::Tied => VocabHead::Tied,
                VocabHead::Separate(x) => VocabHead::Separate(m(x, "lm_head")?),
                VocabHead::Absent => VocabHead::Absent,
            },
        })
    }
}

/// Checks a forward's input: token ids inside the vocabulary, layer taps
/// that exist (strictly ascending, so each is tapped once in block order),
/// and the sequence (`start` cached positions plus `tokens`)
/// inside the context. Returns the sequence length after the forward.
pub(crate) fn check_input(
    c: &ModelConfig,
    tokens: &[u32],
    start: usize,
    taps: &[usize],
) -> Result<usize> {
    if let Some(&l) = taps.iter().find(|&&l| l > c.n_layers) {
        return Err(Error::InvalidArgument(format!(
            "layer {l} does not exist: the model has {} layers (0 is the embeddings)",
            c.n_layers
        )));
    }
    if taps.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::InvalidArgument(format!(
            "layer taps {taps:?} must be strictly ascending"
        )));
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
    let total = start.saturating_add(tokens.len());
    if total > c.max_position_embeddings {
        return Err(Error::InvalidArgument(format!(
            "sequence of {total} tokens exceeds max_position_embeddings {}",
            c.max_position_embeddings
        )));
    }
    Ok(total)
}

/// (cos, sin) of every (token, frequency) pair for positions
/// `start..start + n`, token-major and interleaved, computed in f64 and
/// rounded to f32: the one table both engines rotate with.
pub(crate) fn rope_table(inv_freq: &[f64], start: usize, n: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(n * inv_freq.len() * 2);
    for t in 0..n {
        let pos = (start + t) as f64;
        for f in inv_freq {
            let (s, c) = (pos * f).sin_cos();
            out.push(c as f32);
            out.push(s as f32);
        }
    }
    out
}

/// The activations of one forward pass, as the decoder definition names
/// them. `K` and `V` are the current block's new keys and values (an
/// engine may keep them in its cache directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// The residual stream.
    X,
    /// The normed residual, input of the projections.
    Xn,
    Q,
    K,
    V,
    Attn,
    Proj,
    Gate,
    Up,
}

/// The operations of a forward pass over `n` tokens continuing a cache
/// (the engine holds the tokens, positions, buffers and cache).
pub trait DecoderPass {
    type M;
    type V;
    /// The block whose keys and values `Act::K` / `Act::V` are now (and
    /// whose attention window, scale and RoPE base the next calls use:
    /// [`ModelConfig::window`], [`ModelConfig::local_rope`]).
    fn begin_block(&mut self, layer: usize) -> Result<()>;
    /// `dst *= s`, every element.
    fn scale(&mut self, dst: Act, s: f32) -> Result<()>;
    /// `dst = src / sqrt(mean(src²) + eps) * w`, per token.
    fn rms_norm(&mut self, src: Act, w: &Self::V, dst: Act) -> Result<()>;
    /// `dst = src · Wᵀ`, per token.
    fn matmul(&mut self, w: &Self::M, src: Act, dst: Act) -> Result<()>;
    fn add_bias(&mut self, dst: Act, b: &Self::V) -> Result<()>;
    /// RMSNorm of each `head_dim` slice of `Act::Q` or `Act::K` in place,
    /// with the gains `w` (the same arithmetic as `rms_norm`, per head).
    fn head_norm(&mut self, dst: Act, w: &Self::V) -> Result<()>;
    /// Rotates `Act::Q` or `Act::K` by the positions' RoPE angles.
    fn rope(&mut self, dst: Act) -> Result<()>;
    /// Appends the block's keys and values to the cache, then causal
    /// grouped-query attention of `Act::Q` over the cache into `Act::Attn`.
    fn attention(&mut self) -> Result<()>;
    /// `dst += src`.
    fn add(&mut self, dst: Act, src: Act) -> Result<()>;
    /// `Gate = act(Gate) * Up` with the model's [`Activation`]
    /// (`crate::model::Activation`).
    fn glu(&mut self) -> Result<()>;
    /// Keeps `RMSNorm(X)` with the final norm `w` as the next tapped layer's states.
    fn tap(&mut self, w: &Self::V) -> Result<()>;
}

/// The decoder blocks and the final norm over a pass whose `Act::X` holds
/// the token embeddings as stored; afterwards `Act::Xn` holds the
/// final-normed states, and the pass has tapped each layer of `taps` below
/// the last, in ascending order (the last layer's states are `Act::Xn`
/// itself).
pub fn run<P: DecoderPass>(
    p: &mut P,
    c: &ModelConfig,
    w: &Weights<P::M, P::V>,
    taps: &[usize],
) -> Result<()> {
    use Act::*;
    if let Some(s) = c.embed_scale() {
        p.scale(X, s)?;
    }
    let last = w.layers.len();
    if taps.contains(&0) && last > 0 {
        p.tap(&w.norm)?;
    }
    for (li, l) in w.layers.iter().enumerate() {
        p.begin_block(li)?;
        p.rms_norm(X, &l.attn_norm, Xn)?;
        p.matmul(&l.q, Xn, Q)?;
        p.matmul(&l.k, Xn, K)?;
        p.matmul(&l.v, Xn, V)?;
        for (bias, dst) in [(&l.q_bias, Q), (&l.k_bias, K), (&l.v_bias, V)] {
            if let Some(b) = bias {
                p.add_bias(dst, b)?;
            }
        }
        for (norm, dst) in [(&l.q_norm, Q), (&l.k_norm, K)] {
            if let Some(w) = norm {
                p.head_norm(dst, w)?;
            }
        }
        p.rope(Q)?;
        p.rope(K)?;
        p.attention()?;
        p.matmul(&l.o, Attn, Proj)?;
        if let Some(b) = &l.o_bias {
            p.add_bias(Proj, b)?;
        }
        residual(p, &l.post_attn_norm)?;
        p.rms_norm(X, &l.mlp_norm, Xn)?;
        p.matmul(&l.gate, Xn, Gate)?;
        p.matmul(&l.up, Xn, Up)?;
        p.glu()?;
        p.matmul(&l.down, Gate, Proj)?;
        residual(p, &l.post_mlp_norm)?;
        if li + 1 < last && taps.contains(&(li + 1)) {
            p.tap(&w.norm)?;
        }
    }
    p.rms_norm(X, &w.norm, Xn)
}

/// `X += Proj`, through the post-norm where the block has one (into
/// `Xn`, free until the next pre-norm writes it).
fn residual<P: DecoderPass>(p: &mut P, post_norm: &Option<P::V>) -> Result<()> {
    match post_norm {
        Some(w) => {
            p.rms_norm(Act::Proj, w, Act::Xn)?;
            p.add(Act::X, Act::Xn)
        }
        None => p.add(Act::X, Act::Proj),
    }
}

/// What one forward pass leaves for the heads: the final-normed states of
/// every token and, when asked for, those of tapped layers, one per tap in
/// the taps' order (see `Transformer::forward_tapped` for what "the hidden
/// state of layer L" is).
#[derive(Debug, Clone)]
pub struct Taps<H> {
    pub last: H,
    pub layers: Vec<H>,
}

impl<H> Taps<H> {
    /// The states a head over one layer reads: the first tapped layer's,
    /// else the final ones.
    pub fn head_input(&self) -> &H {
        self.layers.first().unwrap_or(&self.last)
    }
}
