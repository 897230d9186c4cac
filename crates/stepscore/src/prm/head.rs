//! Heads: from the decoder's hidden states at marker positions to one score
//! per step. The final arithmetic runs in f64.

use super::family::Family;
use super::template::{Encoded, Protocol};
use crate::error::{Error, Result};
use crate::model::{Hidden, Matrix, Transformer};

/// Tensor names of the heads, as the reference checkpoints store them.
pub const SCORE_0_WEIGHT: &str = "score.0.weight";
pub const SCORE_0_BIAS: &str = "score.0.bias";
pub const SCORE_2_WEIGHT: &str = "score.2.weight";
pub const SCORE_2_BIAS: &str = "score.2.bias";
pub const V_HEAD_WEIGHT: &str = "v_head.summary.weight";
pub const V_HEAD_BIAS: &str = "v_head.summary.bias";

/// A family's head and its weights.
#[derive(Debug, Clone)]
pub enum Head {
    /// Linear(h,h) -> ReLU -> Linear(h,2), softmax, class 1.
    Score {
        w0: Matrix,
        b0: Vec<f32>,
        w2: Matrix,
        b2: Vec<f32>,
    },
    /// Linear(h,1) -> sigmoid.
    Value { w: Vec<f32>, b: f32 },
    /// Softmax over the "+" and "-" logits, probability of "+".
    PlusMinus { plus: u32, minus: u32 },
    /// Token log-probabilities of each step under the LM itself.
    Confidence,
}

/// What the confidence family measures on one step's tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepConfidence {
    pub tokens: usize,
    pub mean_logprob: f64,
    pub min_logprob: f64,
    /// Mean entropy (nats) of the predictive distributions of the step's tokens.
    pub mean_entropy: f64,
}

/// A head's result for one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadOutput {
    pub scores: Vec<f64>,
    pub confidence: Option<Vec<StepConfidence>>,
}

/// A named tensor as (shape, f32 values), or `None` when absent.
pub type TensorLookup<'a> = dyn Fn(&str) -> Result<Option<(Vec<usize>, Vec<f32>)>> + 'a;

fn require(get: &TensorLookup<'_>, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
    match get(name)? {
        None => Err(Error::model(
            name,
            format!("missing head tensor (expected shape {shape:?})"),
        )),
        Some((s, _)) if s != shape => Err(Error::model(
            name,
            format!("head tensor has shape {s:?}, expected {shape:?}"),
        )),
        Some((_, data)) => Ok(data),
    }
}

impl Head {
    /// Builds the head `protocol`'s family needs for a model of width `h`.
    pub fn load(protocol: &Protocol, h: usize, get: &TensorLookup<'_>) -> Result<Head> {
        Ok(match protocol.family {
            Family::ScoreHead => Head::Score {
                w0: Matrix::from_f32(h, h, require(get, SCORE_0_WEIGHT, &[h, h])?)?,
                b0: require(get, SCORE_0_BIAS, &[h])?,
                w2: Matrix::from_f32(2, h, require(get, SCORE_2_WEIGHT, &[2, h])?)?,
                b2: require(get, SCORE_2_BIAS, &[2])?,
            },
            Family::ValueHead => Head::Value {
                w: require(get, V_HEAD_WEIGHT, &[1, h])?,
                b: match get(V_HEAD_BIAS)? {
                    None => 0.0,
                    Some((s, d)) if s == [1] => d[0],
                    Some((s, _)) => {
                        return Err(Error::model(
                            V_HEAD_BIAS,
                            format!("has shape {s:?}, expected [1]"),
                        ))
                    }
                },
            },
            Family::MathShepherd | Family::Rlhflow => {
                let (plus, minus) = protocol
                    .plus_minus
                    .ok_or_else(|| Error::Tokenizer("no \"+\"/\"-\" token ids resolved".into()))?;
                Head::PlusMinus { plus, minus }
            }
            Family::Confidence => Head::Confidence,
        })
    }

    /// Scores every step of `enc` from the hidden states of all its tokens.
    pub fn apply(&self, model: &Transformer, hidden: &Hidden, enc: &Encoded) -> Result<HeadOutput> {
        let rows = |positions: &[usize]| -> Result<Vec<f32>> {
            let mut out = Vec::with_capacity(positions.len() * hidden.width);
            for &p in positions {
                out.extend_from_slice(hidden.row(p).ok_or_else(|| {
                    Error::InvalidArgument(format!("marker position {p} is past the prompt"))
                })?);
            }
            Ok(out)
        };
        let n = enc.markers.len();
        let scores = match self {
            Head::Score { w0, b0, w2, b2 } => {
                let x = rows(&enc.markers)?;
                let mut mid = vec![0.0f32; n * w0.rows()];
                w0.matmul(&x, n, &mut mid, model.threads())?;
                for row in mid.chunks_mut(b0.len()) {
                    for (v, b) in row.iter_mut().zip(b0) {
                        *v = (*v + b).max(0.0);
                    }
                }
                let mut logits = vec![0.0f32; n * 2];
                w2.matmul(&mid, n, &mut logits, model.threads())?;
                logits
                    .chunks(2)
                    .map(|l| softmax2(l[0] as f64 + b2[0] as f64, l[1] as f64 + b2[1] as f64).1)
                    .collect()
            }
            Head::Value { w, b } => enc
                .markers
                .iter()
                .map(|&p| {
                    let row = hidden.row(p).ok_or_else(|| {
                        Error::InvalidArgument(format!("marker {p} past the prompt"))
                    })?;
                    let z: f64 = row
                        .iter()
                        .zip(w)
                        .map(|(x, w)| *x as f64 * *w as f64)
                        .sum::<f64>()
                        + *b as f64;
                    Ok(sigmoid(z))
                })
                .collect::<Result<Vec<f64>>>()?,
            Head::PlusMinus { plus, minus } => {
                let logits = model.logits_for(&rows(&enc.markers)?, Some(&[*plus, *minus]))?;
                logits
                    .chunks(2)
                    .map(|l| softmax2(l[0] as f64, l[1] as f64).0)
                    .collect()
            }
            Head::Confidence => return confidence(model, hidden, enc),
        };
        Ok(HeadOutput {
            scores,
            confidence: None,
        })
    }
}

/// The two probabilities of a 2-way softmax, computed stably.
pub(crate) fn softmax2(a: f64, b: f64) -> (f64, f64) {
    let pa = sigmoid(a - b);
    (pa, 1.0 - pa)
}

pub(crate) fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Log-probability and entropy of each step's tokens: token `j` is
/// predicted by the logits at position `j - 1`.
fn confidence(model: &Transformer, hidden: &Hidden, enc: &Encoded) -> Result<HeadOutput> {
    let mut scores = Vec::with_capacity(enc.step_tokens.len());
    let mut stats = Vec::with_capacity(enc.step_tokens.len());
    for (i, range) in enc.step_tokens.iter().enumerate() {
        if range.start == 0 || range.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "step {i} has no predictable tokens"
            )));
        }
        let mut x = Vec::with_capacity(range.len() * hidden.width);
        for j in range.clone() {
            x.extend_from_slice(
                hidden.row(j - 1).ok_or_else(|| {
                    Error::InvalidArgument(format!("step {i} runs past the prompt"))
                })?,
            );
        }
        let logits = model.logits_for(&x, None)?;
        let vocab = logits.len() / range.len();
        let (mut sum_lp, mut min_lp, mut sum_h) = (0.0f64, f64::INFINITY, 0.0f64);
        for (k, j) in range.clone().enumerate() {
            let row = &logits[k * vocab..(k + 1) * vocab];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let z: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
            let log_z = max + z.ln();
            let target = enc.tokens[j] as usize;
            let lp = *row.get(target).ok_or_else(|| {
                Error::InvalidArgument(format!("token {target} outside the vocabulary"))
            })? as f64
                - log_z;
            // H = log Z - sum p * logit
            let expect: f64 = row
                .iter()
                .map(|&v| ((v as f64 - log_z).exp()) * v as f64)
                .sum();
            sum_lp += lp;
            min_lp = min_lp.min(lp);
            sum_h += log_z - expect;
        }
        let len = range.len() as f64;
        let mean_lp = sum_lp / len;
        scores.push(mean_lp.exp());
        stats.push(StepConfidence {
            tokens: range.len(),
            mean_logprob: mean_lp,
            min_logprob: min_lp,
            mean_entropy: sum_h / len,
        });
    }
    Ok(HeadOutput {
        scores,
        confidence: Some(stats),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax2_is_stable_and_sums_to_one() {
        let (a, b) = softmax2(1000.0, -1000.0);
        assert_eq!((a, b), (1.0, 0.0));
        let (a, b) = softmax2(0.3, 0.3);
        assert!((a - 0.5).abs() < 1e-15 && (a + b - 1.0).abs() < 1e-15);
        // softmax([2, 0])[0] = e^2 / (e^2 + 1) = 0.880797...
        assert!((softmax2(2.0, 0.0).0 - 0.8807970779778823).abs() < 1e-15);
        assert!((sigmoid(-745.0) - 0.0).abs() < 1e-300 && sigmoid(-745.0) >= 0.0);
    }
}
