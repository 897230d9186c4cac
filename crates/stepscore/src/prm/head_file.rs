//! A PRM head shipped as its own safetensors file, next to a backbone that
//! has none: the trained default PRM is SmolLM2's GGUF plus a few kilobytes
//! of `v_head.summary.*` (see stepscore-train), loaded as one model.

use safetensors::tensor::SafeTensors;

use super::family::Family;
use super::head::{HeadInput, SCORE_0_WEIGHT, V_HEAD_MLP_0_WEIGHT, V_HEAD_WEIGHT};
use crate::error::{Error, Result};
use crate::model::hf::to_f32;

/// A parsed head file: the tensors it holds, by name.
#[derive(Debug, Clone)]
pub struct HeadFile {
    name: String,
    tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
    metadata: Vec<(String, String)>,
}

/// Header metadata: the layer whose hidden state the head reads (absent:
/// the final one; see `Transformer::forward_tapped`).
pub const META_LAYER: &str = "stepscore.layer";
/// Header metadata: `true` when the head's rows are the hidden state joined
/// with the step's confidence statistics (width h + 4).
pub const META_CONFIDENCE_FEATURES: &str = "stepscore.confidence_features";

/// Heads are small (a value head is `hidden + 1` floats, a 2-class score
/// head `h² + 3h + 2`); this bound keeps a hostile file from making us
/// convert a backbone-sized blob.
const MAX_HEAD_BYTES: usize = 256 << 20;

/// The default PRM's head: a linear value head trained on SmolLM2-135M-Instruct
/// hidden states (scripts/train_default_head.sh; results in docs/TRAINING.md).
/// Embedded so every build (CLI, wasm) has the default model once the backbone
/// GGUF is fetched.
pub const DEFAULT_HEAD_NAME: &str = "smollm2-135m-gsm-value-head.safetensors";
const DEFAULT_HEAD_BYTES: &[u8] =
    include_bytes!("../../models/smollm2-135m-gsm-value-head.safetensors");

impl HeadFile {
    /// The embedded default head (see [`DEFAULT_HEAD_NAME`]).
    pub fn default_head() -> Result<HeadFile> {
        HeadFile::from_bytes(DEFAULT_HEAD_BYTES, DEFAULT_HEAD_NAME)
    }

    /// A head embedded in the crate, by file name (the heads that catalog
    /// PRM entries name).
    pub fn embedded(name: &str) -> Result<HeadFile> {
        match name {
            DEFAULT_HEAD_NAME => HeadFile::from_bytes(DEFAULT_HEAD_BYTES, DEFAULT_HEAD_NAME),
            _ => Err(Error::InvalidArgument(format!(
                "no head named `{name}` is built in (built in: {DEFAULT_HEAD_NAME})"
            ))),
        }
    }

    /// Parses safetensors bytes; `name` is used in error messages.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<HeadFile> {
        if bytes.len() > MAX_HEAD_BYTES {
            return Err(Error::model(
                name,
                format!(
                    "a head file of {} bytes is larger than the {MAX_HEAD_BYTES}-byte limit for heads",
                    bytes.len()
                ),
            ));
        }
        let bad = |e: safetensors::SafeTensorError| {
            Error::model(name, format!("not a valid safetensors file: {e}"))
        };
        let st = SafeTensors::deserialize(bytes).map_err(bad)?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(bad)?;
        let mut metadata: Vec<(String, String)> = header
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        metadata.sort();
        let mut tensors = Vec::new();
        for (tensor_name, view) in st.tensors() {
            let data = to_f32(view.dtype(), view.data(), name, &tensor_name)?;
            tensors.push((tensor_name, view.shape().to_vec(), data));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(HeadFile {
            name: name.to_string(),
            tensors,
            metadata,
        })
    }

    /// A header metadata value.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// What the head reads, from the header metadata ([`META_LAYER`],
    /// [`META_CONFIDENCE_FEATURES`]).
    pub fn input(&self) -> Result<HeadInput> {
        let layer = match self.metadata(META_LAYER) {
            None => None,
            Some(v) => Some(v.trim().parse::<usize>().map_err(|_| {
                Error::model(
                    &self.name,
                    format!("metadata `{META_LAYER}` is `{v}`, not a layer number"),
                )
            })?),
        };
        let confidence_features = match self.metadata(META_CONFIDENCE_FEATURES) {
            None | Some("false") => false,
            Some("true") => true,
            Some(v) => {
                return Err(Error::model(
                    &self.name,
                    format!("metadata `{META_CONFIDENCE_FEATURES}` is `{v}`, not true or false"),
                ))
            }
        };
        Ok(HeadInput {
            layer,
            confidence_features,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A tensor as (shape, values), or `None` when the file lacks it.
    pub fn tensor(&self, name: &str) -> Option<(Vec<usize>, Vec<f32>)> {
        self.tensors
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, s, d)| (s.clone(), d.clone()))
    }

    /// The family whose head tensors the file holds.
    pub fn family(&self) -> Result<Family> {
        if self.tensor(V_HEAD_WEIGHT).is_some() || self.tensor(V_HEAD_MLP_0_WEIGHT).is_some() {
            Ok(Family::ValueHead)
        } else if self.tensor(SCORE_0_WEIGHT).is_some() {
            Ok(Family::ScoreHead)
        } else {
            let names: Vec<&str> = self.tensors.iter().map(|(n, _, _)| n.as_str()).collect();
            Err(Error::model(
                &self.name,
                format!(
                    "no head tensors: expected `{V_HEAD_WEIGHT}` or `{V_HEAD_MLP_0_WEIGHT}` (value head) or `{SCORE_0_WEIGHT}` (score head), found {names:?}"
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::{serialize, Dtype, TensorView};

    fn file(tensors: &[(&str, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, d)| d.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views: Vec<(&str, TensorView<'_>)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((n, s, _), b)| (*n, TensorView::new(Dtype::F32, s.clone(), b).unwrap()))
            .collect();
        serialize(views, None).unwrap()
    }

    #[test]
    fn reads_a_value_head_and_names_its_family() {
        let bytes = file(&[
            (V_HEAD_WEIGHT, vec![1, 3], vec![0.5, -1.0, 2.0]),
            ("v_head.summary.bias", vec![1], vec![0.25]),
        ]);
        let head = HeadFile::from_bytes(&bytes, "head.safetensors").unwrap();
        assert_eq!(head.family().unwrap(), Family::ValueHead);
        assert_eq!(
            head.tensor(V_HEAD_WEIGHT),
            Some((vec![1, 3], vec![0.5, -1.0, 2.0]))
        );
        assert_eq!(head.tensor("missing"), None);
    }

    #[test]
    fn a_file_without_head_tensors_is_named_in_the_error() {
        let bytes = file(&[("model.norm.weight", vec![2], vec![1.0, 1.0])]);
        let err = HeadFile::from_bytes(&bytes, "wrong.safetensors")
            .unwrap()
            .family()
            .unwrap_err()
            .to_string();
        assert!(err.contains("wrong.safetensors"), "{err}");
        assert!(err.contains("model.norm.weight"), "{err}");
    }

    #[test]
    fn truncated_and_garbage_bytes_are_model_errors() {
        let bytes = file(&[(V_HEAD_WEIGHT, vec![1, 2], vec![1.0, 2.0])]);
        for bad in [
            &bytes[..bytes.len() - 3],
            &bytes[..5],
            b"not safetensors at all".as_slice(),
        ] {
            match HeadFile::from_bytes(bad, "h.safetensors") {
                Err(Error::Model { file, .. }) => assert_eq!(file, "h.safetensors"),
                other => panic!("expected a model error, got {other:?}"),
            }
        }
    }
}
