//! The trained head in raw-feature space, its safetensors layout, and a plain-Rust forward
//! that is the reference for what the engine computes.
//!
//! Layout (f32, little endian, PyTorch `[out, in]` weights):
//! - linear: `v_head.summary.weight` [1, h], `v_head.summary.bias` [1] — the value-head
//!   family's tensors (Skywork-PRM naming), which the engine reads today.
//! - MLP: `v_head.summary.0.weight` [k, h], `v_head.summary.0.bias` [k],
//!   `v_head.summary.2.weight` [1, k], `v_head.summary.2.bias` [1] — `nn.Sequential(Linear,
//!   ReLU, Linear)` naming, as the 2-class `score.0`/`score.2` head uses.
//!
//! Header metadata the engine reads: `stepscore.step_stats` (the step statistics joined to the
//! hidden state, in row order, by name; width h + their number), `stepscore.layer` (the layer
//! whose hidden state the features hold; absent: the final one) and `stepscore.threshold` (the
//! first-error threshold chosen on validation).
//!
//! The step score is sigmoid of the head's output: P(step correct).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};
use safetensors::SafeTensors;

use crate::error::{Error, Result};

pub const LINEAR_WEIGHT: &str = "v_head.summary.weight";
pub const LINEAR_BIAS: &str = "v_head.summary.bias";
pub const MLP_W0: &str = "v_head.summary.0.weight";
pub const MLP_B0: &str = "v_head.summary.0.bias";
pub const MLP_W2: &str = "v_head.summary.2.weight";
pub const MLP_B2: &str = "v_head.summary.2.bias";

/// A head over raw (unstandardized) features; weights row-major `[out, in]`.
#[derive(Debug, Clone, PartialEq)]
pub enum ExportedHead {
    Linear {
        weight: Vec<f32>,
        bias: f32,
    },
    Mlp {
        hidden: usize,
        w0: Vec<f32>,
        b0: Vec<f32>,
        w2: Vec<f32>,
        b2: f32,
    },
}

impl ExportedHead {
    /// The head whose logit is `scale * logit + offset` (Platt scaling folded
    /// into the last layer).
    pub fn scaled(self, scale: f64, offset: f64) -> ExportedHead {
        let sc = |v: f32| (scale * v as f64) as f32;
        match self {
            ExportedHead::Linear { weight, bias } => ExportedHead::Linear {
                weight: weight.into_iter().map(sc).collect(),
                bias: (scale * bias as f64 + offset) as f32,
            },
            ExportedHead::Mlp {
                hidden,
                w0,
                b0,
                w2,
                b2,
            } => ExportedHead::Mlp {
                hidden,
                w0,
                b0,
                w2: w2.into_iter().map(sc).collect(),
                b2: (scale * b2 as f64 + offset) as f32,
            },
        }
    }

    /// Input width `h`.
    pub fn width(&self) -> usize {
        match self {
            ExportedHead::Linear { weight, .. } => weight.len(),
            ExportedHead::Mlp { hidden, w0, .. } => w0.len() / (*hidden).max(1),
        }
    }

    /// The head's output (logit) for one raw feature row, in f64.
    pub fn logit(&self, row: &[f32]) -> Result<f64> {
        if row.len() != self.width() {
            return Err(Error::InvalidArgument(format!(
                "feature row has width {}, the head expects {}",
                row.len(),
                self.width()
            )));
        }
        let dot = |w: &[f32], x: &[f32]| {
            w.iter()
                .zip(x)
                .map(|(&a, &b)| a as f64 * b as f64)
                .sum::<f64>()
        };
        Ok(match self {
            ExportedHead::Linear { weight, bias } => dot(weight, row) + *bias as f64,
            ExportedHead::Mlp { w0, b0, w2, b2, .. } => {
                let h: Vec<f32> = w0
                    .chunks_exact(row.len())
                    .zip(b0)
                    .map(|(w, &b)| (dot(w, row) + b as f64).max(0.0) as f32)
                    .collect();
                dot(w2, &h) + *b2 as f64
            }
        })
    }

    /// sigmoid(logit): the step score.
    pub fn score(&self, row: &[f32]) -> Result<f64> {
        Ok(1.0 / (1.0 + (-self.logit(row)?).exp()))
    }

    fn tensors(&self) -> Vec<(&'static str, Vec<usize>, Vec<f32>)> {
        match self {
            ExportedHead::Linear { weight, bias } => vec![
                (LINEAR_WEIGHT, vec![1, weight.len()], weight.clone()),
                (LINEAR_BIAS, vec![1], vec![*bias]),
            ],
            ExportedHead::Mlp {
                hidden,
                w0,
                b0,
                w2,
                b2,
            } => vec![
                (MLP_W0, vec![*hidden, self.width()], w0.clone()),
                (MLP_B0, vec![*hidden], b0.clone()),
                (MLP_W2, vec![1, *hidden], w2.clone()),
                (MLP_B2, vec![1], vec![*b2]),
            ],
        }
    }

    /// Serializes to safetensors bytes with `metadata` in the header.
    pub fn to_safetensors(&self, metadata: HashMap<String, String>) -> Result<Vec<u8>> {
        let tensors = self.tensors();
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, v)| v.iter().flat_map(|f| f.to_le_bytes()).collect())
            .collect();
        let mut views = Vec::with_capacity(tensors.len());
        for ((name, shape, _), data) in tensors.iter().zip(&bytes) {
            let view =
                TensorView::new(Dtype::F32, shape.clone(), data).map_err(|e| Error::Export {
                    path: name.into(),
                    message: e.to_string(),
                })?;
            views.push((*name, view));
        }
        safetensors::serialize(views, Some(metadata)).map_err(|e| Error::Export {
            path: "<memory>".into(),
            message: e.to_string(),
        })
    }

    /// Writes the head to `path`.
    pub fn save(&self, path: &Path, metadata: HashMap<String, String>) -> Result<()> {
        let bytes = self.to_safetensors(metadata)?;
        std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
    }

    /// Reads a head written by [`ExportedHead::save`] (either layout).
    pub fn load(path: &Path) -> Result<ExportedHead> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_safetensors(&bytes, path)
    }

    /// Parses safetensors bytes; `path` names the source in errors.
    pub fn from_safetensors(bytes: &[u8], path: &Path) -> Result<ExportedHead> {
        let err = |message: String| Error::Export {
            path: path.to_path_buf(),
            message,
        };
        let st = SafeTensors::deserialize(bytes).map_err(|e| err(e.to_string()))?;
        let get = |name: &str| -> Result<Option<(Vec<usize>, Vec<f32>)>> {
            let Ok(view) = st.tensor(name) else {
                return Ok(None);
            };
            if view.dtype() != Dtype::F32 {
                return Err(err(format!(
                    "tensor `{name}` has dtype {:?}, expected F32",
                    view.dtype()
                )));
            }
            let data = view
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok(Some((view.shape().to_vec(), data)))
        };
        let need = |name: &str| get(name)?.ok_or_else(|| err(format!("missing tensor `{name}`")));
        let shape_err = |name: &str, s: &[usize], want: String| {
            err(format!("tensor `{name}` has shape {s:?}, expected {want}"))
        };
        if let Some((s, weight)) = get(LINEAR_WEIGHT)? {
            let [1, h] = s[..] else {
                return Err(shape_err(LINEAR_WEIGHT, &s, "[1, h]".into()));
            };
            if h == 0 {
                return Err(shape_err(LINEAR_WEIGHT, &s, "[1, h] with h > 0".into()));
            }
            let bias = match get(LINEAR_BIAS)? {
                None => 0.0,
                Some((s, b)) if s == [1] => b[0],
                Some((s, _)) => return Err(shape_err(LINEAR_BIAS, &s, "[1]".into())),
            };
            return Ok(ExportedHead::Linear { weight, bias });
        }
        let (s0, w0) = need(MLP_W0)?;
        let [k, h] = s0[..] else {
            return Err(shape_err(MLP_W0, &s0, "[k, h]".into()));
        };
        if k == 0 || h == 0 {
            return Err(shape_err(MLP_W0, &s0, "[k, h] with k, h > 0".into()));
        }
        let (sb0, b0) = need(MLP_B0)?;
        let (s2, w2) = need(MLP_W2)?;
        let (sb2, b2) = need(MLP_B2)?;
        if sb0 != [k] {
            return Err(shape_err(MLP_B0, &sb0, format!("[{k}]")));
        }
        if s2 != [1, k] {
            return Err(shape_err(MLP_W2, &s2, format!("[1, {k}]")));
        }
        let [b2] = b2[..] else {
            return Err(shape_err(MLP_B2, &sb2, "[1]".into()));
        };
        Ok(ExportedHead::Mlp {
            hidden: k,
            w0,
            b0,
            w2,
            b2,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_mlp_round_trip_and_forward_by_hand() {
        let lin = ExportedHead::Linear {
            weight: vec![1.0, -2.0],
            bias: 0.5,
        };
        // 1*3 - 2*1 + 0.5 = 1.5
        assert_eq!(lin.logit(&[3.0, 1.0]).unwrap(), 1.5);
        let bytes = lin.to_safetensors(HashMap::new()).unwrap();
        assert_eq!(
            ExportedHead::from_safetensors(&bytes, Path::new("x")).unwrap(),
            lin
        );

        // hidden = relu([1,0]·x + 0, [0,1]·x - 5) = relu(3, -4) = (3, 0); out = 2*3 + 7*0 - 1 = 5.
        let mlp = ExportedHead::Mlp {
            hidden: 2,
            w0: vec![1.0, 0.0, 0.0, 1.0],
            b0: vec![0.0, -5.0],
            w2: vec![2.0, 7.0],
            b2: -1.0,
        };
        assert_eq!(mlp.logit(&[3.0, 1.0]).unwrap(), 5.0);
        let bytes = mlp.to_safetensors(HashMap::new()).unwrap();
        assert_eq!(
            ExportedHead::from_safetensors(&bytes, Path::new("x")).unwrap(),
            mlp
        );
        assert!(mlp.logit(&[1.0]).is_err());
    }

    #[test]
    fn bad_files_are_named_errors() {
        let msg = ExportedHead::from_safetensors(b"junk", Path::new("h.st"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("h.st"), "{msg}");
        let empty = safetensors::serialize(Vec::<(&str, TensorView)>::new(), None).unwrap();
        let msg = ExportedHead::from_safetensors(&empty, Path::new("h.st"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains(MLP_W0), "{msg}");
    }
}
