//! The burn module being trained: Linear(h, 1), or Linear(h, k) -> ReLU -> Linear(k, 1).

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

use crate::config::HeadKind;
use crate::error::{Error, Result};

#[derive(Module, Debug)]
pub struct HeadModel {
    hidden: Option<Linear>,
    out: Linear,
}

/// A layer's weights in PyTorch layout: row-major `[outputs, inputs]`, and the bias.
pub(crate) struct LayerWeights {
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

fn floats(t: Tensor<2>, what: &str) -> Result<Vec<f32>> {
    let data = t
        .try_into_data()
        .map_err(|e| Error::Backend(format!("reading {what}: {e:?}")))?;
    data.as_slice::<f32>()
        .map(<[f32]>::to_vec)
        .map_err(|e| Error::Backend(format!("reading {what}: {e:?}")))
}

impl HeadModel {
    pub fn new(kind: HeadKind, width: usize, device: &Device) -> HeadModel {
        match kind {
            HeadKind::Linear => HeadModel {
                hidden: None,
                out: LinearConfig::new(width, 1).init(device),
            },
            HeadKind::Mlp { hidden } => HeadModel {
                hidden: Some(LinearConfig::new(width, hidden).init(device)),
                out: LinearConfig::new(hidden, 1).init(device),
            },
        }
    }

    /// Logits `[batch]` for inputs `[batch, width]`.
    pub fn forward(&self, x: Tensor<2>) -> Tensor<1> {
        let [batch, _] = x.dims();
        let x = match &self.hidden {
            Some(layer) => relu(layer.forward(x)),
            None => x,
        };
        self.out.forward(x).reshape([batch])
    }

    /// The layers' weights, first layer first, in PyTorch layout. burn stores a Linear's
    /// weight as `[inputs, outputs]`, hence the transpose.
    pub(crate) fn layers(&self) -> Result<Vec<LayerWeights>> {
        let read = |layer: &Linear, name: &str| -> Result<LayerWeights> {
            let weight = floats(layer.weight.val().transpose(), name)?;
            let bias = match &layer.bias {
                Some(b) => floats(b.val().unsqueeze::<2>(), name)?,
                None => return Err(Error::Backend(format!("layer `{name}` has no bias"))),
            };
            Ok(LayerWeights { weight, bias })
        };
        let mut layers = Vec::with_capacity(2);
        if let Some(h) = &self.hidden {
            layers.push(read(h, "hidden")?);
        }
        layers.push(read(&self.out, "out")?);
        Ok(layers)
    }
}
