//! The decoder's and heads' kernels other than the matmuls: RMSNorm, RoPE,
//! attention, SwiGLU, residual and bias adds, row gather and the
//! confidence family's token statistics. Each has a `record_*` form that
//! adds one dispatch to a [`Batch`] (the forward pass records all of them
//! into one submission) and, with the `testing` feature, a public form over
//! [`GpuTensor`]s that records and submits it alone (the kernel tests'
//! entry point).

#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
pub use super::act::quantize_activations;
#[cfg(any(test, feature = "testing"))]
pub use super::act::{quantize_activations_async, ActBlocks};
use super::batch::{u32_of, whole, Batch, WG};
#[cfg(any(test, feature = "testing"))]
use super::context::GpuContext;
use super::shaders;
#[cfg(any(test, feature = "testing"))]
use super::tensor::GpuTensor;
use crate::error::{Error, Result};
use crate::model::{Activation, RopeStyle};

/// Shape of a rotary embedding application.
#[derive(Debug, Clone, Copy)]
pub struct RopeShape {
    pub n_tokens: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    /// Elements per token row of the buffer.
    pub row_stride: usize,
    /// First element rotated.
    pub base: usize,
    pub style: RopeStyle,
}

/// Shape of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub n_tokens: usize,
    /// Absolute position of the first query; keys `0..start + n_tokens`
    /// are in the cache.
    pub start: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub sliding_window: Option<usize>,
    /// The factor of every score ([`crate::model::ModelConfig::attention_scale`]).
    pub scale: f32,
}

/// The attention kernel keeps a query and its accumulator in registers.
pub(crate) const MAX_HEAD_DIM: usize = 256;

#[cfg(any(test, feature = "testing"))]
fn check_len(t: &GpuTensor, need: usize, what: &str) -> Result<()> {
    if t.len() < need {
        return Err(Error::InvalidArgument(format!(
            "{what}: needs {need} values, the tensor holds {}",
            t.len()
        )));
    }
    Ok(())
}

pub(crate) fn record_rms_norm(
    b: &mut Batch<'_>,
    x: &wgpu::Buffer,
    w: &wgpu::Buffer,
    out: &wgpu::Buffer,
    eps: f32,
    cols: usize,
    n_rows: usize,
) -> Result<()> {
    let p = [
        u32_of(cols, "cols")?,
        u32_of(n_rows, "rows")?,
        eps.to_bits(),
        1.0f32.to_bits(),
    ];
    b.dispatch(
        &shaders::RMS_NORM,
        &[whole(x), whole(w), whole(out)],
        &p,
        [p[1], 1, 1],
    )
}

/// Qwen3's per-head RMSNorm of the queries or keys, in place: `n_tokens`
/// rows of `n_heads` heads of `head_dim` elements from element `base` of `x`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_head_norm(
    b: &mut Batch<'_>,
    x: &wgpu::Buffer,
    w: &wgpu::Buffer,
    eps: f32,
    head_dim: usize,
    n_heads: usize,
    n_tokens: usize,
    base: usize,
) -> Result<()> {
    let p = [
        u32_of(head_dim, "head_dim")?,
        u32_of(n_heads, "heads")?,
        u32_of(base, "offset")?,
        eps.to_bits(),
        1.0f32.to_bits(),
        0,
        0,
        0,
    ];
    b.dispatch(
        &shaders::HEAD_NORM,
        &[whole(x), whole(w)],
        &p,
        [p[1], u32_of(n_tokens, "tokens")?, 1],
    )
}

pub(crate) fn record_rope(
    b: &mut Batch<'_>,
    x: &wgpu::Buffer,
    cs: &wgpu::Buffer,
    s: &RopeShape,
) -> Result<()> {
    if s.head_dim % 2 != 0 {
        return Err(Error::InvalidArgument(format!(
            "RoPE needs an even head_dim, got {}",
            s.head_dim
        )));
    }
    let p = [
        u32_of(s.n_tokens, "tokens")?,
        u32_of(s.n_heads, "heads")?,
        u32_of(s.head_dim, "head_dim")?,
        u32_of(s.row_stride, "row stride")?,
        u32_of(s.base, "offset")?,
        match s.style {
            RopeStyle::HalfSplit => 0,
            RopeStyle::AdjacentPairs => 1,
        },
        0,
        0,
    ];
    let pairs = u32_of(s.n_heads * s.head_dim / 2, "pairs")?;
    b.dispatch(
        &shaders::ROPE,
        &[whole(x), whole(cs)],
        &p,
        [pairs.div_ceil(WG), p[0], 1],
    )
}

pub(crate) fn record_attention(
    b: &mut Batch<'_>,
    q: &wgpu::Buffer,
    k: &wgpu::Buffer,
    v: &wgpu::Buffer,
    out: &wgpu::Buffer,
    s: &AttentionShape,
) -> Result<()> {
    if s.head_dim == 0 || s.head_dim > MAX_HEAD_DIM {
        return Err(Error::Gpu(format!(
            "the attention kernel supports head_dim 1..={MAX_HEAD_DIM}, got {}",
            s.head_dim
        )));
    }
    if s.n_kv_heads == 0 || s.n_heads % s.n_kv_heads != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} query heads are not a multiple of {} KV heads",
            s.n_heads, s.n_kv_heads
        )));
    }
    let p = [
        u32_of(s.n_tokens, "tokens")?,
        u32_of(s.start, "start")?,
        u32_of(s.head_dim, "head_dim")?,
        u32_of(s.n_heads, "heads")?,
        u32_of(s.n_heads / s.n_kv_heads, "group")?,
        u32_of(s.n_heads * s.head_dim, "q_dim")?,
        u32_of(s.n_kv_heads * s.head_dim, "kv_dim")?,
        u32_of(s.sliding_window.unwrap_or(0), "sliding window")?,
        s.scale.to_bits(),
        0,
        0,
        0,
    ];
    b.dispatch(
        &shaders::ATTENTION,
        &[whole(q), whole(k), whole(v), whole(out)],
        &p,
        [p[0].div_ceil(WG), p[3], 1],
    )
}

/// `gate = act(gate) * up`, in place, over `n` values.
pub(crate) fn record_glu(
    b: &mut Batch<'_>,
    gate: &wgpu::Buffer,
    up: &wgpu::Buffer,
    n: usize,
    act: Activation,
) -> Result<()> {
    let p = [
        u32_of(n, "elements")?,
        u32::from(act == Activation::GeluTanh),
    ];
    b.dispatch_flat(&shaders::SWIGLU, &[whole(gate), whole(up)], &p, n)
}

/// `x *= s`, in place, over `n` values.
pub(crate) fn record_scale(b: &mut Batch<'_>, x: &wgpu::Buffer, s: f32, n: usize) -> Result<()> {
    let p = [u32_of(n, "elements")?, s.to_bits()];
    b.dispatch_flat(&shaders::SCALE, &[whole(x)], &p, n)
}

pub(crate) fn record_add(
    b: &mut Batch<'_>,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    n: usize,
) -> Result<()> {
    let p = [u32_of(n, "elements")?];
    b.dispatch_flat(&shaders::RESIDUAL_ADD, &[whole(x), whole(y)], &p, n)
}

/// `x[base + t * stride + c] += bias[c]` for `n_rows` rows (then ReLU).
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_bias_add(
    b: &mut Batch<'_>,
    x: &wgpu::Buffer,
    bias: &wgpu::Buffer,
    len: usize,
    n_rows: usize,
    stride: usize,
    base: usize,
    relu: bool,
) -> Result<()> {
    let p = [
        u32_of(n_rows, "rows")?,
        u32_of(len, "bias length")?,
        u32_of(stride, "stride")?,
        u32_of(base, "offset")?,
        relu as u32,
    ];
    b.dispatch(
        &shaders::BIAS_ADD,
        &[whole(x), whole(bias)],
        &p,
        [p[1].div_ceil(WG), p[0], 1],
    )
}

pub(crate) fn record_gather_rows(
    b: &mut Batch<'_>,
    src: &wgpu::Buffer,
    idx: &wgpu::Buffer,
    out: &wgpu::Buffer,
    cols: usize,
    n_rows: usize,
    src_rows: usize,
) -> Result<()> {
    let p = [
        u32_of(cols, "cols")?,
        u32_of(n_rows, "rows")?,
        u32_of(src_rows, "rows")?,
        0,
    ];
    b.dispatch(
        &shaders::GATHER_ROWS,
        &[whole(src), whole(idx), whole(out)],
        &p,
        [p[0].div_ceil(WG), p[1], 1],
    )
}

pub(crate) fn record_token_stats(
    b: &mut Batch<'_>,
    logits: &wgpu::Buffer,
    targets: &wgpu::Buffer,
    out: &wgpu::Buffer,
    vocab: usize,
    n_rows: usize,
    out_row: usize,
) -> Result<()> {
    let p = [
        u32_of(vocab, "vocabulary")?,
        u32_of(n_rows, "rows")?,
        u32_of(out_row, "rows")?,
        0,
    ];
    b.dispatch(
        &shaders::TOKEN_STATS,
        &[whole(logits), whole(targets), whole(out)],
        &p,
        [p[1], 1, 1],
    )
}

/// RMSNorm of `x` (rows of `w.len()` values) with gain `w`.
#[cfg(any(test, feature = "testing"))]
pub fn rms_norm(ctx: &GpuContext, x: &GpuTensor, w: &GpuTensor, eps: f32) -> Result<GpuTensor> {
    let cols = w.len();
    if cols == 0 || x.len() % cols != 0 {
        return Err(Error::InvalidArgument(format!(
            "rms_norm: {} values are not rows of {cols}",
            x.len()
        )));
    }
    let out = GpuTensor::uninit(ctx, x.len())?;
    if x.is_empty() {
        return Ok(out);
    }
    let mut b = Batch::new(ctx, "rms_norm");
    record_rms_norm(
        &mut b,
        x.buf.buffer()?,
        w.buf.buffer()?,
        out.buf.buffer()?,
        eps,
        cols,
        x.len() / cols,
    )?;
    b.submit()?;
    Ok(out)
}

/// Rotates `x` in place at positions `start..start + n_tokens`.
#[cfg(any(test, feature = "testing"))]
pub fn rope(
    ctx: &GpuContext,
    x: &mut GpuTensor,
    inv_freq: &[f64],
    start: usize,
    shape: &RopeShape,
) -> Result<()> {
    if inv_freq.len() * 2 != shape.head_dim {
        return Err(Error::InvalidArgument(format!(
            "rope: {} frequencies for head_dim {}",
            inv_freq.len(),
            shape.head_dim
        )));
    }
    if shape.n_tokens == 0 {
        return Ok(());
    }
    let last =
        shape.base + (shape.n_tokens - 1) * shape.row_stride + shape.n_heads * shape.head_dim;
    check_len(x, last, "rope")?;
    let mut b = Batch::new(ctx, "rope");
    let cs = b.upload(bytemuck::cast_slice(&crate::model::decoder::rope_table(
        inv_freq,
        start,
        shape.n_tokens,
    )))?;
    record_rope(&mut b, x.buf.buffer()?, &cs, shape)?;
    b.submit()?;
    Ok(())
}

/// Causal attention of `q` (`n_tokens` rows of `n_heads * head_dim`) over
/// keys/values `k`, `v` (`start + n_tokens` rows of `n_kv_heads * head_dim`).
#[cfg(any(test, feature = "testing"))]
pub fn attention(
    ctx: &GpuContext,
    q: &GpuTensor,
    k: &GpuTensor,
    v: &GpuTensor,
    shape: &AttentionShape,
) -> Result<GpuTensor> {
    let qd = shape.n_heads * shape.head_dim;
    let kvd = shape.n_kv_heads * shape.head_dim;
    check_len(q, shape.n_tokens * qd, "attention queries")?;
    check_len(k, (shape.start + shape.n_tokens) * kvd, "attention keys")?;
    check_len(v, (shape.start + shape.n_tokens) * kvd, "attention values")?;
    let out = GpuTensor::uninit(ctx, shape.n_tokens * qd)?;
    if shape.n_tokens == 0 {
        return Ok(out);
    }
    let mut b = Batch::new(ctx, "attention");
    record_attention(
        &mut b,
        q.buf.buffer()?,
        k.buf.buffer()?,
        v.buf.buffer()?,
        out.buf.buffer()?,
        shape,
    )?;
    b.submit()?;
    Ok(out)
}

/// `gate = act(gate) * up`, in place.
#[cfg(any(test, feature = "testing"))]
pub fn glu(ctx: &GpuContext, gate: &mut GpuTensor, up: &GpuTensor, act: Activation) -> Result<()> {
    check_len(up, gate.len(), "glu")?;
    if gate.is_empty() {
        return Ok(());
    }
    let mut b = Batch::new(ctx, "glu");
    record_glu(
        &mut b,
        gate.buf.buffer()?,
        up.buf.buffer()?,
        gate.len(),
        act,
    )?;
    b.submit()?;
    Ok(())
}

/// `x *= s`, in place.
#[cfg(any(test, feature = "testing"))]
pub fn scale(ctx: &GpuContext, x: &mut GpuTensor, s: f32) -> Result<()> {
    if x.is_empty() {
        return Ok(());
    }
    let mut b = Batch::new(ctx, "scale");
    record_scale(&mut b, x.buf.buffer()?, s, x.len())?;
    b.submit()?;
    Ok(())
}

/// `x += y`, in place.
#[cfg(any(test, feature = "testing"))]
pub fn add(ctx: &GpuContext, x: &mut GpuTensor, y: &GpuTensor) -> Result<()> {
    check_len(y, x.len(), "add")?;
    if x.is_empty() {
        return Ok(());
    }
    let mut b = Batch::new(ctx, "add");
    record_add(&mut b, x.buf.buffer()?, y.buf.buffer()?, x.len())?;
    b.submit()?;
    Ok(())
}

/// Adds `bias` to every row of `x` (rows of `bias.len()`), then ReLU if asked.
#[cfg(any(test, feature = "testing"))]
pub fn bias_add(ctx: &GpuContext, x: &mut GpuTensor, bias: &GpuTensor, relu: bool) -> Result<()> {
    let len = bias.len();
    if len == 0 || x.len() % len != 0 {
        return Err(Error::InvalidArgument(format!(
            "bias_add: {} values are not rows of {len}",
            x.len()
        )));
    }
    if x.is_empty() {
        return Ok(());
    }
    let mut b = Batch::new(ctx, "bias_add");
    record_bias_add(
        &mut b,
        x.buf.buffer()?,
        bias.buf.buffer()?,
        len,
        x.len() / len,
        len,
        0,
        relu,
    )?;
    b.submit()?;
    Ok(())
}

/// Rows `idx` of `src` (rows of `cols` values).
#[cfg(any(test, feature = "testing"))]
pub fn gather_rows(
    ctx: &GpuContext,
    src: &GpuTensor,
    cols: usize,
    idx: &[u32],
) -> Result<GpuTensor> {
    if cols == 0 || src.len() % cols != 0 {
        return Err(Error::InvalidArgument(format!(
            "gather_rows: {} values are not rows of {cols}",
            src.len()
        )));
    }
    let src_rows = src.len() / cols;
    if let Some(&bad) = idx.iter().find(|&&i| i as usize >= src_rows) {
        return Err(Error::InvalidArgument(format!(
            "gather_rows: row {bad} is past the {src_rows} rows"
        )));
    }
    let out = GpuTensor::uninit(ctx, idx.len() * cols)?;
    if idx.is_empty() {
        return Ok(out);
    }
    let mut b = Batch::new(ctx, "gather_rows");
    let ib = b.upload(bytemuck::cast_slice(idx))?;
    record_gather_rows(
        &mut b,
        src.buf.buffer()?,
        &ib,
        out.buf.buffer()?,
        cols,
        idx.len(),
        src_rows,
    )?;
    b.submit()?;
    Ok(out)
}

/// Per row of `logits` (rows of `vocab`): (log Z, logit of the target,
/// entropy), 3 values per row.
#[cfg(any(test, feature = "testing"))]
pub fn token_stats(
    ctx: &GpuContext,
    logits: &GpuTensor,
    vocab: usize,
    targets: &[u32],
) -> Result<GpuTensor> {
    if vocab == 0 || logits.len() != targets.len() * vocab {
        return Err(Error::InvalidArgument(format!(
            "token_stats: {} logits for {} rows of {vocab}",
            logits.len(),
            targets.len()
        )));
    }
    if let Some(&bad) = targets.iter().find(|&&t| t as usize >= vocab) {
        return Err(Error::InvalidArgument(format!(
            "token_stats: target {bad} outside the vocabulary of {vocab}"
        )));
    }
    let out = GpuTensor::uninit(ctx, targets.len() * 3)?;
    if targets.is_empty() {
        return Ok(out);
    }
    let mut b = Batch::new(ctx, "token_stats");
    let tb = b.upload(bytemuck::cast_slice(targets))?;
    record_token_stats(
        &mut b,
        logits.buf.buffer()?,
        &tb,
        out.buf.buffer()?,
        vocab,
        targets.len(),
        0,
    )?;
    b.submit()?;
    Ok(out)
}
