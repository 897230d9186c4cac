//! The PRM heads on the device: gather the hidden states the head reads,
//! run its matrices (score head MLP, value projection, the two vocabulary
//! rows of "+"/"-", or the full vocabulary projection with per-token
//! log-prob and entropy for the confidence family), and read back only the
//! few numbers per step the final f64 arithmetic needs. That arithmetic is
//! the CPU head's own (softmax of two logits, sigmoid, means).

use super::batch::{whole, Batch};
use super::matmul::GpuMatrix;
use super::ops;
use super::tensor::GpuTensor;
use super::transformer::{GpuHidden, GpuTransformer};
use crate::error::{Error, Result};
use crate::model::{LmHead, Matrix, Transformer};
use crate::prm::head::{sigmoid, softmax2, Head, HeadOutput, StepConfidence};
use crate::prm::template::Encoded;

/// A head's weights on the device.
pub enum GpuHead {
    Score {
        w0: GpuMatrix,
        b0: GpuTensor,
        w2: GpuMatrix,
        b2: [f64; 2],
    },
    Value {
        w: GpuMatrix,
        b: f64,
    },
    /// The vocabulary rows of "+" and "-", in that order.
    PlusMinus {
        rows: GpuMatrix,
    },
    Confidence,
}

/// Logit rows per confidence chunk: the logits of one chunk stay under
/// this many bytes (and the adapter's binding limit).
const LOGIT_CHUNK_BYTES: u64 = 64 << 20;

impl GpuHead {
    /// Uploads `head` (the "+"/"-" rows are cut from `model`'s vocabulary
    /// projection).
    pub fn upload(gm: &GpuTransformer, head: &Head, model: &Transformer) -> Result<GpuHead> {
        let ctx = gm.context();
        Ok(match head {
            Head::Score { w0, b0, w2, b2 } => GpuHead::Score {
                w0: GpuMatrix::upload(ctx, w0)?,
                b0: GpuTensor::from_slice(ctx, b0)?,
                w2: GpuMatrix::upload(ctx, w2)?,
                b2: [
                    b2.first().copied().unwrap_or(0.0) as f64,
                    b2.get(1).copied().unwrap_or(0.0) as f64,
                ],
            },
            Head::Value { w, b } => GpuHead::Value {
                w: GpuMatrix::upload(ctx, &Matrix::from_f32(1, w.len(), w.clone())?)?,
                b: *b as f64,
            },
            Head::PlusMinus { plus, minus } => {
                let lm = match model.lm_head() {
                    LmHead::Tied => model.embed(),
                    LmHead::Separate(m) => m,
                    LmHead::Absent => {
                        return Err(Error::InvalidArgument(
                            "the \"+\"/\"-\" head needs the vocabulary projection".into(),
                        ))
                    }
                };
                GpuHead::PlusMinus {
                    rows: GpuMatrix::upload(ctx, &lm.select_rows(&[*plus, *minus])?)?,
                }
            }
            Head::Confidence => GpuHead::Confidence,
        })
    }

    /// Scores every step of `enc` from `hidden` (the states of all its
    /// tokens, on the device).
    pub async fn apply_async(
        &self,
        gm: &GpuTransformer,
        hidden: &GpuHidden,
        enc: &Encoded,
    ) -> Result<HeadOutput> {
        let ctx = &**gm.context();
        let width = hidden.width();
        let n = enc.markers.len();
        if let Some(&p) = enc.markers.iter().find(|&&p| p >= hidden.n_tokens()) {
            return Err(Error::InvalidArgument(format!(
                "marker position {p} is past the prompt"
            )));
        }
        if n == 0 && !matches!(self, GpuHead::Confidence) {
            return Ok(HeadOutput {
                scores: Vec::new(),
                confidence: None,
            });
        }
        let markers: Vec<u32> = enc.markers.iter().map(|&p| p as u32).collect();
        let scores = match self {
            GpuHead::Score { w0, b0, w2, b2 } => {
                let x = GpuTensor::uninit(ctx, n * width)?;
                let mid = GpuTensor::uninit(ctx, n * w0.rows())?;
                let logits = GpuTensor::uninit(ctx, n * 2)?;
                let mut b = Batch::new(ctx, "score head");
                let idx = b.upload(bytemuck::cast_slice(&markers))?;
                let (xb, mb) = (x.buf.buffer()?, mid.buf.buffer()?);
                ops::record_gather_rows(
                    &mut b,
                    hidden.t.buf.buffer()?,
                    &idx,
                    xb,
                    width,
                    n,
                    hidden.n_tokens(),
                )?;
                w0.record(&mut b, whole(xb), mb, 0, n)?;
                ops::record_bias_add(&mut b, mb, b0.buf.buffer()?, b0.len(), n, b0.len(), 0, true)?;
                w2.record(&mut b, whole(mb), logits.buf.buffer()?, 0, n)?;
                b.submit()?;
                let l = logits.to_vec_async(ctx).await?;
                l.chunks_exact(2)
                    .map(|l| softmax2(l[0] as f64 + b2[0], l[1] as f64 + b2[1]).1)
                    .collect()
            }
            GpuHead::Value { w, b: bias } => {
                let z = self.marker_logits(gm, hidden, &markers, w).await?;
                z.iter().map(|&z| sigmoid(z as f64 + bias)).collect()
            }
            GpuHead::PlusMinus { rows } => {
                let l = self.marker_logits(gm, hidden, &markers, rows).await?;
                l.chunks_exact(2)
                    .map(|l| softmax2(l[0] as f64, l[1] as f64).0)
                    .collect()
            }
            GpuHead::Confidence => return confidence(gm, hidden, enc).await,
        };
        Ok(HeadOutput {
            scores,
            confidence: None,
        })
    }

    /// `m` applied to the hidden states at `markers`, read back.
    async fn marker_logits(
        &self,
        gm: &GpuTransformer,
        hidden: &GpuHidden,
        markers: &[u32],
        m: &GpuMatrix,
    ) -> Result<Vec<f32>> {
        let ctx = &**gm.context();
        let n = markers.len();
        let x = GpuTensor::uninit(ctx, n * hidden.width())?;
        let out = GpuTensor::uninit(ctx, n * m.rows())?;
        let mut b = Batch::new(ctx, "head");
        let idx = b.upload(bytemuck::cast_slice(markers))?;
        ops::record_gather_rows(
            &mut b,
            hidden.t.buf.buffer()?,
            &idx,
            x.buf.buffer()?,
            hidden.width(),
            n,
            hidden.n_tokens(),
        )?;
        m.record(&mut b, whole(x.buf.buffer()?), out.buf.buffer()?, 0, n)?;
        b.submit()?;
        out.to_vec_async(ctx).await
    }

    /// Blocking [`GpuHead::apply_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn apply(
        &self,
        gm: &GpuTransformer,
        hidden: &GpuHidden,
        enc: &Encoded,
    ) -> Result<HeadOutput> {
        pollster::block_on(self.apply_async(gm, hidden, enc))
    }
}

/// The confidence family: token `j` of a step is predicted by the logits at
/// `j - 1`. The logits of those positions are computed and reduced on the
/// device in chunks; only (log Z, target logit, entropy) per token return.
async fn confidence(gm: &GpuTransformer, hidden: &GpuHidden, enc: &Encoded) -> Result<HeadOutput> {
    let ctx = &**gm.context();
    let lm = gm.lm_head().ok_or_else(|| {
        Error::InvalidArgument(
            "this checkpoint has no lm_head; only hidden states are available".into(),
        )
    })?;
    let (width, vocab) = (hidden.width(), lm.rows());
    let mut pos = Vec::new();
    let mut targets = Vec::new();
    for (i, range) in enc.step_tokens.iter().enumerate() {
        if range.start == 0 || range.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "step {i} has no predictable tokens"
            )));
        }
        for j in range.clone() {
            if j > hidden.n_tokens() {
                return Err(Error::InvalidArgument(format!(
                    "step {i} runs past the prompt"
                )));
            }
            let t = *enc
                .tokens
                .get(j)
                .ok_or_else(|| Error::InvalidArgument(format!("step {i} runs past the prompt")))?;
            if t as usize >= vocab {
                return Err(Error::InvalidArgument(format!(
                    "token {t} outside the vocabulary"
                )));
            }
            pos.push((j - 1) as u32);
            targets.push(t);
        }
    }
    let m = pos.len();
    let stats = if m == 0 {
        Vec::new()
    } else {
        let limit = LOGIT_CHUNK_BYTES.min(ctx.adapter_binding_limit());
        let chunk = ((limit / (vocab as u64 * 4).max(1)) as usize).clamp(1, m);
        let x = GpuTensor::uninit(ctx, chunk * width)?;
        let logits = GpuTensor::uninit(ctx, chunk * vocab)?;
        let out = GpuTensor::uninit(ctx, m * 3)?;
        let mut b = Batch::new(ctx, "confidence head");
        let (xb, lb, ob) = (x.buf.buffer()?, logits.buf.buffer()?, out.buf.buffer()?);
        for first in (0..m).step_by(chunk) {
            let rows = chunk.min(m - first);
            let idx = b.upload(bytemuck::cast_slice(&pos[first..first + rows]))?;
            let tgt = b.upload(bytemuck::cast_slice(&targets[first..first + rows]))?;
            ops::record_gather_rows(
                &mut b,
                hidden.t.buf.buffer()?,
                &idx,
                xb,
                width,
                rows,
                hidden.n_tokens(),
            )?;
            lm.record(&mut b, whole(xb), lb, 0, rows)?;
            ops::record_token_stats(&mut b, lb, &tgt, ob, vocab, rows, first)?;
        }
        b.submit()?;
        out.to_vec_async(ctx).await?
    };
    let mut scores = Vec::with_capacity(enc.step_tokens.len());
    let mut steps = Vec::with_capacity(enc.step_tokens.len());
    let mut row = 0usize;
    for range in &enc.step_tokens {
        let (mut sum_lp, mut min_lp, mut sum_h) = (0.0f64, f64::INFINITY, 0.0f64);
        for _ in range.clone() {
            let s = stats
                .get(3 * row..3 * row + 3)
                .ok_or_else(|| Error::Gpu("token statistics shorter than the steps".into()))?;
            let lp = s[1] as f64 - s[0] as f64;
            sum_lp += lp;
            min_lp = min_lp.min(lp);
            sum_h += s[2] as f64;
            row += 1;
        }
        let len = range.len() as f64;
        let mean_lp = sum_lp / len;
        scores.push(mean_lp.exp());
        steps.push(StepConfidence {
            tokens: range.len(),
            mean_logprob: mean_lp,
            min_logprob: min_lp,
            mean_entropy: sum_h / len,
        });
    }
    Ok(HeadOutput {
        scores,
        confidence: Some(steps),
    })
}
