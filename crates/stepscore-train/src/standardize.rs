//! Per-feature standardization fitted on the training rows, and its folding into a first
//! linear layer so that the exported head takes raw features.
//!
//! With z = (x - m) / s, a layer W z + b equals W' x + b' for W'[o][i] = W[o][i] / s[i] and
//! b'[o] = b[o] - sum_i W[o][i] m[i] / s[i].

use crate::data::Examples;

/// Below this standard deviation a feature counts as constant and is only centred.
const MIN_STD: f64 = 1e-6;

#[derive(Debug, Clone, PartialEq)]
pub struct Standardizer {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl Standardizer {
    /// Mean and (population) standard deviation of every column, accumulated in f64.
    pub fn fit(ex: &Examples) -> Standardizer {
        let w = ex.width;
        let n = ex.len().max(1) as f64;
        let mut sum = vec![0f64; w];
        for row in ex.x.chunks_exact(w) {
            for (s, &v) in sum.iter_mut().zip(row) {
                *s += v as f64;
            }
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let mut var = vec![0f64; w];
        for row in ex.x.chunks_exact(w) {
            for ((acc, &v), m) in var.iter_mut().zip(row).zip(&mean) {
                *acc += (v as f64 - m).powi(2);
            }
        }
        let std = var.iter().map(|v| {
            let s = (v / n).sqrt();
            if s < MIN_STD {
                1.0
            } else {
                s as f32
            }
        });
        Standardizer {
            mean: mean.iter().map(|&m| m as f32).collect(),
            std: std.collect(),
        }
    }

    /// The standardized copy of `ex`.
    pub fn apply(&self, ex: &Examples) -> Examples {
        let mut x = ex.x.clone();
        for row in x.chunks_exact_mut(ex.width) {
            for ((v, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *v = (*v - m) / s;
            }
        }
        Examples {
            width: ex.width,
            x,
            y: ex.y.clone(),
            traces: ex.traces.clone(),
        }
    }

    /// Folds the standardization into a layer stored row-major as `[outputs, width]`.
    pub fn fold(&self, weight: &[f32], bias: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let w = self.mean.len();
        let mut folded = Vec::with_capacity(weight.len());
        let mut new_bias = Vec::with_capacity(bias.len());
        for (row, &b) in weight.chunks_exact(w).zip(bias) {
            let mut shift = 0f64;
            for ((&wi, &m), &s) in row.iter().zip(&self.mean).zip(&self.std) {
                let scaled = wi as f64 / s as f64;
                folded.push(scaled as f32);
                shift += scaled * m as f64;
            }
            new_bias.push((b as f64 - shift) as f32);
        }
        (folded, new_bias)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_and_fold_by_hand() {
        // Column 0: values 1, 3 -> mean 2, std 1. Column 1: constant 5 -> mean 5, std kept at 1.
        let ex = Examples::new(2, vec![1.0, 5.0, 3.0, 5.0], vec![true, false]).unwrap();
        let st = Standardizer::fit(&ex);
        assert_eq!(st.mean, vec![2.0, 5.0]);
        assert_eq!(st.std, vec![1.0, 1.0]);
        assert_eq!(st.apply(&ex).x, vec![-1.0, 0.0, 1.0, 0.0]);
        // Layer z0*2 + z1*(-1) + 0.5 = 2(x0-2) - (x1-5) + 0.5 = 2 x0 - x1 + 1.5.
        let (w, b) = st.fold(&[2.0, -1.0], &[0.5]);
        assert_eq!(w, vec![2.0, -1.0]);
        assert_eq!(b, vec![1.5]);
    }
}
