//! The WGSL engine's side of the kernel interface the heads are written
//! over ([`Kernels`]): gather the rows a head reads and run its matrices in
//! one submission, or compute the vocabulary projection of the positions
//! before each step token and reduce it on the device to (log Z, target
//! logit, entropy) per token, so only a few numbers per step come back.

use std::ops::Range;

use super::batch::{whole, Batch};
use super::matmul::GpuMatrix;
use super::ops;
use super::tensor::GpuTensor;
use super::transformer::{GpuHidden, GpuTransformer};
use crate::error::{Error, Result};
use crate::model::{Kernels, Linear, Matrix, TokenStat};

/// Logit rows per token-statistics chunk: the logits of one chunk stay
/// under this many bytes (and the adapter's binding limit).
const LOGIT_CHUNK_BYTES: u64 = 64 << 20;

fn index(p: usize) -> Result<u32> {
    u32::try_from(p).map_err(|_| Error::InvalidArgument(format!("position {p} is out of range")))
}

impl Kernels for GpuTransformer {
    type Hidden = GpuHidden;
    type Weights = GpuMatrix;

    fn upload(&self, m: &Matrix) -> Result<GpuMatrix> {
        GpuMatrix::upload(self.context(), m)
    }

    fn vocab(&self) -> Option<usize> {
        self.lm_head().map(|m| m.rows())
    }

    async fn rows(
        &self,
        hidden: &GpuHidden,
        positions: &[usize],
        layers: &[Linear<'_, GpuMatrix>],
    ) -> Result<Vec<f32>> {
        let ctx = &**self.context();
        let n = positions.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        if let Some(&p) = positions.iter().find(|&&p| p >= hidden.n_tokens()) {
            return Err(Error::InvalidArgument(format!(
                "position {p} is past the prompt"
            )));
        }
        let idx: Vec<u32> = positions.iter().map(|&p| index(p)).collect::<Result<_>>()?;
        let mut b = Batch::new(ctx, "head");
        let idx = b.upload(bytemuck::cast_slice(&idx))?;
        let mut x = GpuTensor::uninit(ctx, n * hidden.width())?;
        ops::record_gather_rows(
            &mut b,
            hidden.t.buf.buffer()?,
            &idx,
            x.buf.buffer()?,
            hidden.width(),
            n,
            hidden.n_tokens(),
        )?;
        for l in layers {
            let out = l.weight.rows();
            let y = GpuTensor::uninit(ctx, n * out)?;
            let yb = y.buf.buffer()?;
            l.weight.record(&mut b, whole(x.buf.buffer()?), yb, 0, n)?;
            if l.bias.is_some() || l.relu {
                let zeros;
                let bias = match l.bias {
                    Some(bias) => bias,
                    None => {
                        zeros = vec![0.0f32; out];
                        &zeros
                    }
                };
                let bb = b.upload(bytemuck::cast_slice(bias))?;
                ops::record_bias_add(&mut b, yb, &bb, out, n, out, 0, l.relu)?;
            }
            x = y;
        }
        b.submit()?;
        let mut v = x.to_vec_async(ctx).await?;
        v.truncate(n * layers.last().map_or(hidden.width(), |l| l.weight.rows()));
        Ok(v)
    }

    async fn token_stats(
        &self,
        hidden: &GpuHidden,
        steps: &[Range<usize>],
        tokens: &[u32],
    ) -> Result<Vec<TokenStat>> {
        let ctx = &**self.context();
        let lm = self.lm_head().ok_or_else(|| {
            Error::InvalidArgument(
                "this checkpoint has no lm_head; only hidden states are available".into(),
            )
        })?;
        let (width, vocab) = (hidden.width(), lm.rows());
        let mut pos = Vec::new();
        let mut targets = Vec::new();
        for j in steps.iter().flat_map(|r| r.clone()) {
            let t = *tokens
                .get(j)
                .ok_or_else(|| Error::InvalidArgument(format!("token {j} is past the prompt")))?;
            if j == 0 || j > hidden.n_tokens() || t as usize >= vocab {
                return Err(Error::InvalidArgument(format!(
                    "token {j} ({t}) has no prediction in these states"
                )));
            }
            pos.push(index(j - 1)?);
            targets.push(t);
        }
        let m = pos.len();
        if m == 0 {
            return Ok(Vec::new());
        }
        let limit = LOGIT_CHUNK_BYTES.min(ctx.adapter_binding_limit());
        let chunk = ((limit / (vocab as u64 * 4).max(1)) as usize).clamp(1, m);
        let x = GpuTensor::uninit(ctx, chunk * width)?;
        let logits = GpuTensor::uninit(ctx, chunk * vocab)?;
        let out = GpuTensor::uninit(ctx, m * 3)?;
        let mut b = Batch::new(ctx, "token statistics");
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
        let stats = out.to_vec_async(ctx).await?;
        if stats.len() < 3 * m {
            return Err(Error::Gpu("token statistics shorter than the steps".into()));
        }
        Ok(stats
            .chunks_exact(3)
            .take(m)
            .map(|s| TokenStat {
                log_z: s[0] as f64,
                logit: s[1] as f64,
                entropy: s[2] as f64,
            })
            .collect())
    }
}
