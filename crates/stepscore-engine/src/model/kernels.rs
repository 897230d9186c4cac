//! The kernel interface the engines implement for what runs after the
//! decoder. The PRM heads (`prm/head.rs`) are written once over it; the CPU
//! engine implements it in `cpu/kernels.rs`, the WGSL engine in `gpu/kernels.rs`. It is
//! deliberately small: a head's engine part is "rows of the hidden states,
//! through a few linear layers, read back" and "the LM's token statistics
//! over some steps"; everything after that (softmax of two logits, sigmoid,
//! value heads' dot products, means) is f64 arithmetic on the host, shared by
//! both engines.

use std::ops::Range;

use super::matrix::Matrix;
use super::transformer::Hidden;
use crate::error::Result;

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
