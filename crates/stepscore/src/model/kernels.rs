//! The kernel interface the engines implement for what runs after the
//! decoder. The PRM heads (`prm/head.rs`) are written once over it; the CPU
//! engine implements it here, the WGSL engine in `gpu/kernels.rs`. It is
//! deliberately small: a head's engine part is "rows of the hidden states,
//! through a few linear layers, read back" and "the LM's token statistics
//! over some steps"; everything after that (softmax of two logits, sigmoid,
//! value heads' dot products, means) is f64 arithmetic on the host, shared by
//! both engines.

use std::ops::Range;

use super::matrix::Matrix;
use super::transformer::{Hidden, Transformer};
use crate::error::{Error, Result};

/// Hidden states an engine holds, on the host or on a device (token-major).
pub trait States {
    fn n_tokens(&self) -> usize;
    fn width(&self) -> usize;
}

impl States for Hidden {
    fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    fn width(&self) -> usize {
        self.width
    }
}

/// One linear layer of a head's engine part: `y = W x (+ b)`, then ReLU when `relu`.
pub struct Linear<'a, W> {
    pub weight: &'a W,
    pub bias: Option<&'a [f32]>,
    pub relu: bool,
}

/// The LM's predictive distribution at one position, for the token that
/// follows it: log of the partition function of the logits, the logit of
/// that token (log-probability = `logit - log_z`), and the entropy in nats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenStat {
    pub log_z: f64,
    pub logit: f64,
    pub entropy: f64,
}

/// What an engine computes for the heads. Inputs are validated by the
/// caller (positions inside the states, step ranges starting past 0 and
/// inside `tokens`, targets inside the vocabulary); implementations still
/// return errors rather than panic when they are not.
// The futures are polled on the calling thread (natively inside one
// `block_on`, in browsers by the event loop), so no `Send` bound is wanted.
#[allow(async_fn_in_trait)]
pub trait Kernels {
    type Hidden: States;
    /// A weight matrix in the engine's own storage.
    type Weights;

    /// Copies `m` into the engine's storage.
    fn upload(&self, m: &Matrix) -> Result<Self::Weights>;

    /// The vocabulary size when the model can compute logits.
    fn vocab(&self) -> Option<usize>;

    /// The rows of `hidden` at `positions`, through `layers` in order,
    /// read back: `positions.len()` rows of the last layer's width (of the
    /// states' width when `layers` is empty).
    async fn rows(
        &self,
        hidden: &Self::Hidden,
        positions: &[usize],
        layers: &[Linear<'_, Self::Weights>],
    ) -> Result<Vec<f32>>;

    /// For every token `j` of every step range, the statistics of the
    /// distribution at `j - 1` for `tokens[j]`, in order.
    async fn token_stats(
        &self,
        hidden: &Self::Hidden,
        steps: &[Range<usize>],
        tokens: &[u32],
    ) -> Result<Vec<TokenStat>>;
}

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
            l.weight.matmul(&x, n, &mut y, self.threads())?;
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
        let mut out = Vec::with_capacity(steps.iter().map(|r| r.len()).sum());
        // One product per step keeps the logits of one step in memory.
        for range in steps {
            let x = gather(hidden, range.clone().map(|j| j.wrapping_sub(1)))?;
            let mut logits = vec![0.0f32; range.len() * lm.rows()];
            lm.matmul(&x, range.len(), &mut logits, self.threads())?;
            for (row, j) in logits.chunks_exact(lm.rows().max(1)).zip(range.clone()) {
                let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
                let z: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
                let log_z = max + z.ln();
                let target = tokens.get(j).copied().ok_or_else(|| {
                    Error::InvalidArgument(format!("token {j} is past the prompt"))
                })? as usize;
                let logit = *row.get(target).ok_or_else(|| {
                    Error::InvalidArgument(format!("token {target} outside the vocabulary"))
                })? as f64;
                // H = log Z - sum p * logit
                let expect: f64 = row
                    .iter()
                    .map(|&v| ((v as f64 - log_z).exp()) * v as f64)
                    .sum();
                out.push(TokenStat {
                    log_z,
                    logit,
                    entropy: log_z - expect,
                });
            }
        }
        Ok(out)
    }
}

impl Transformer {
    /// The vocabulary projection: the embedding when tied.
    pub(crate) fn vocab_projection(&self) -> Result<&Matrix> {
        self.weights().vocab_projection().ok_or_else(|| {
            Error::InvalidArgument(
                "this checkpoint has no lm_head; only hidden states are available".into(),
            )
        })
    }
}
