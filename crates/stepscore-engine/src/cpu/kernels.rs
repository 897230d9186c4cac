//! The CPU engine's part of the heads' kernel interface ([`Kernels`]):
//! weights are host matrices, hidden states host buffers.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::model::{Hidden, Kernels, Linear, Matrix, TokenStat, Transformer};

/// Gathers rows `positions` of `hidden` into one token-major buffer.
fn gather(hidden: &Hidden, positions: impl Iterator<Item = usize>) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    for p in positions {
        out.extend_from_slice(
            hidden.row(p).ok_or_else(|| {
                Error::InvalidArgument(format!("position {p} is past the prompt"))
            })?,
        );
    }
    Ok(out)
}

/// The CPU engine: weights are host matrices, states host buffers.
impl Kernels for Transformer {
    type Hidden = Hidden;
    type Weights = Matrix;

    fn upload(&self, m: &Matrix) -> Result<Matrix> {
        Ok(m.clone())
    }

    fn vocab(&self) -> Option<usize> {
        self.has_lm_head().then_some(self.config().vocab_size)
    }

    async fn rows(
        &self,
        hidden: &Hidden,
        positions: &[usize],
        layers: &[Linear<'_, Matrix>],
    ) -> Result<Vec<f32>> {
        let n = positions.len();
        let mut x = gather(hidden, positions.iter().copied())?;
        for l in layers {
            let mut y = vec![0.0f32; n * l.weight.rows()];
            let threads = self.threads();
            crate::par::install(threads, || l.weight.matmul(&x, n, &mut y, threads))?;
            if l.bias.is_some() || l.relu {
                for row in y.chunks_mut(l.weight.rows().max(1)) {
                    if let Some(b) = l.bias {
                        for (v, b) in row.iter_mut().zip(b) {
                            *v += b;
                        }
                    }
                    if l.relu {
                        for v in row.iter_mut() {
                            *v = v.max(0.0);
                        }
                    }
                }
            }
            x = y;
        }
        Ok(x)
    }

    async fn token_stats(
        &self,
        hidden: &Hidden,
        steps: &[Range<usize>],
        tokens: &[u32],
    ) -> Result<Vec<TokenStat>> {
        let lm = self.vocab_projection()?;
        let vocab = lm.rows().max(1);
        let mut out = Vec::with_capacity(steps.iter().map(|r| r.len()).sum());
        // The steps' positions in order, in products of up to ROWS rows: few
        // enough to bound the logits in memory (ROWS x vocab floats), many
        // enough that the vocabulary matrix is read once per ROWS rows, not
        // once per step. Every row's logits are the same bits either way.
        const ROWS: usize = 64;
        let positions: Vec<usize> = steps.iter().flat_map(|r| r.clone()).collect();
        for chunk in positions.chunks(ROWS) {
            let x = gather(hidden, chunk.iter().map(|&j| j.wrapping_sub(1)))?;
            let mut logits = vec![0.0f32; chunk.len() * lm.rows()];
            let threads = self.threads();
            crate::par::install(threads, || lm.matmul(&x, chunk.len(), &mut logits, threads))?;
            // Each row's statistics are two passes of e^x over the whole
            // vocabulary, independent of the other rows: the rows are split
            // over the threads, each row summed in the same order as alone.
            let rows: Vec<(usize, &[f32])> = chunk
                .iter()
                .copied()
                .zip(logits.chunks_exact(vocab))
                .collect();
            let per = rows.len().div_ceil(self.threads().max(1)).max(1);
            let parts = crate::par::install(self.threads(), || {
                crate::par::map(rows.chunks(per).collect(), |part: &[(usize, &[f32])]| {
                    part.iter()
                        .map(|&(j, row)| row_stat(row, j, tokens))
                        .collect::<Result<Vec<_>>>()
                })
            });
            for part in parts {
                out.extend(part?);
            }
        }
        Ok(out)
    }
}

/// The statistics of one row of logits for the token at position `j`.
fn row_stat(row: &[f32], j: usize, tokens: &[u32]) -> Result<TokenStat> {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let z: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_z = max + z.ln();
    let target = tokens
        .get(j)
        .copied()
        .ok_or_else(|| Error::InvalidArgument(format!("token {j} is past the prompt")))?
        as usize;
    let logit = *row
        .get(target)
        .ok_or_else(|| Error::InvalidArgument(format!("token {target} outside the vocabulary")))?
        as f64;
    // H = log Z - sum p * logit
    let expect: f64 = row
        .iter()
        .map(|&v| ((v as f64 - log_z).exp()) * v as f64)
        .sum();
    Ok(TokenStat {
        log_z,
        logit,
        entropy: log_z - expect,
    })
}
