//! Hugging Face checkpoints: `config.json` plus `model.safetensors`, or shards
//! listed in `model.safetensors.index.json`. Files come from a directory
//! (memory-mapped natively) or from an in-memory map of file name -> bytes
//! (the wasm path). Weights are converted to f32 when the decoder is built;
//! tensors the decoder does not use (PRM heads such as `score.0.weight` or
//! `v_head.summary.weight`) stay reachable by name.

use super::config::ModelConfig;
use super::matrix::Matrix;
use super::transformer::{Layer, LmHead, RopeStyle, Transformer};
use crate::error::{Error, Result};
use crate::format::storage::{open_regular, read_regular, SIDE_FILE_LIMIT};
use safetensors::tensor::{Dtype, Metadata, SafeTensors};
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) const CONFIG_FILE: &str = "config.json";
pub(crate) const SINGLE_FILE: &str = "model.safetensors";
pub(crate) const INDEX_FILE: &str = "model.safetensors.index.json";

/// At most this many shard files: real checkpoints use tens, not thousands.
const MAX_SHARDS: usize = 4096;

/// A tensor converted to f32, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorF32 {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// Bytes of one safetensors file.
enum Blob {
    Owned(Vec<u8>),
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
}

impl Blob {
    fn bytes(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Blob::Mapped(m) => m,
        }
    }
}

struct Shard {
    /// File name, for error messages.
    name: String,
    blob: Blob,
    /// Offset of the data section (8 + header length).
    data_start: usize,
    metadata: Metadata,
}

/// An opened checkpoint: its config and the tensors of all its shards.
pub struct HfCheckpoint {
    config: ModelConfig,
    shards: Vec<Shard>,
    /// Tensor name -> index into `shards`.
    index: BTreeMap<String, usize>,
}

impl std::fmt::Debug for HfCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfCheckpoint")
            .field("config", &self.config)
            .field(
                "shards",
                &self.shards.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .field("tensors", &self.index.len())
            .finish()
    }
}

/// Shard names come from a JSON file: allow plain names only, so an index
/// cannot point outside the checkpoint directory.
fn check_shard_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.contains('\\')
        || name.contains('\0');
    if bad {
        return Err(Error::model(
            INDEX_FILE,
            format!("shard file name `{name}` is not a plain file name"),
        ));
    }
    Ok(())
}

/// The shard file names an index lists, with its weight map.
fn parse_index(text: &str) -> Result<(Vec<String>, BTreeMap<String, String>)> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::model(INDEX_FILE, format!("not valid JSON: {e}")))?;
    let map = value
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| Error::model(INDEX_FILE, "missing object `weight_map`"))?;
    let mut weight_map = BTreeMap::new();
    let mut files: Vec<String> = Vec::new();
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| {
            Error::model(
                INDEX_FILE,
                format!("`weight_map.{tensor}` must be a file name string, got {file}"),
            )
        })?;
        check_shard_name(file)?;
        if !files.iter().any(|f| f == file) {
            if files.len() >= MAX_SHARDS {
                return Err(Error::model(
                    INDEX_FILE,
                    format!("more than {MAX_SHARDS} shard files"),
                ));
            }
            files.push(file.to_string());
        }
        weight_map.insert(tensor.clone(), file.to_string());
    }
    if files.is_empty() {
        return Err(Error::model(INDEX_FILE, "`weight_map` is empty"));
    }
    Ok((files, weight_map))
}

fn open_shard(name: String, blob: Blob) -> Result<Shard> {
    let (header_len, metadata) = SafeTensors::read_metadata(blob.bytes())
        .map_err(|e| Error::model(name.clone(), format!("invalid safetensors file: {e}")))?;
    Ok(Shard {
        name,
        blob,
        data_start: 8 + header_len,
        metadata,
    })
}

impl HfCheckpoint {
    /// Opens a checkpoint directory (memory-mapped natively; read into
    /// memory on wasm32, where there is no mmap).
    pub fn open_dir(dir: impl AsRef<Path>) -> Result<HfCheckpoint> {
        let dir = dir.as_ref();
        let read_text = |name: &str| -> Result<String> {
            let p = dir.join(name);
            let bytes = read_regular(&p, SIDE_FILE_LIMIT)?;
            String::from_utf8(bytes).map_err(|_| {
                let e = std::io::Error::new(std::io::ErrorKind::InvalidData, "not valid UTF-8");
                Error::io(p.display().to_string(), e)
            })
        };
        #[cfg(target_arch = "wasm32")]
        let open = |name: &str| -> Result<Blob> {
            let p = dir.join(name);
            let (mut file, _) = open_regular(&p)?;
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)
                .map_err(|e| Error::io(p.display().to_string(), e))?;
            Ok(Blob::Owned(bytes))
        };
        #[cfg(not(target_arch = "wasm32"))]
        let open = |name: &str| -> Result<Blob> {
            let p = dir.join(name);
            let (file, _) = open_regular(&p)?;
            // SAFETY: the map is read-only; as with every mmap-based model
            // loader, a file truncated by another process while mapped is
            // outside what we can defend against.
            let map = unsafe { memmap2::Mmap::map(&file) }
                .map_err(|e| Error::io(p.display().to_string(), e))?;
            Ok(Blob::Mapped(map))
        };
        let config_text = read_text(CONFIG_FILE)?;
        let index_text = if dir.join(INDEX_FILE).is_file() {
            Some(read_text(INDEX_FILE)?)
        } else {
            None
        };
        Self::assemble(&config_text, index_text.as_deref(), open)
    }

    /// Builds a checkpoint from in-memory files keyed by file name
    /// (`config.json`, and `model.safetensors` or the index and its shards).
    pub fn from_bytes(mut files: BTreeMap<String, Vec<u8>>) -> Result<HfCheckpoint> {
        let text = |files: &BTreeMap<String, Vec<u8>>, name: &str| -> Result<Option<String>> {
            files
                .get(name)
                .map(|b| {
                    String::from_utf8(b.clone())
                        .map_err(|_| Error::model(name, "file is not valid UTF-8"))
                })
                .transpose()
        };
        let config_text = text(&files, CONFIG_FILE)?
            .ok_or_else(|| Error::model(CONFIG_FILE, "file not provided"))?;
        let index_text = text(&files, INDEX_FILE)?;
        Self::assemble(&config_text, index_text.as_deref(), |name| {
            files
                .remove(name)
                .map(Blob::Owned)
                .ok_or_else(|| Error::model(name, "file not provided"))
        })
    }

    fn assemble(
        config_text: &str,
        index_text: Option<&str>,
        mut open: impl FnMut(&str) -> Result<Blob>,
    ) -> Result<HfCheckpoint> {
        let config = ModelConfig::from_json_str(config_text)?;
        let (files, weight_map) = match index_text {
            Some(t) => parse_index(t)?,
            None => (vec![SINGLE_FILE.to_string()], BTreeMap::new()),
        };
        let mut shards = Vec::with_capacity(files.len());
        let mut index = BTreeMap::new();
        for (si, file) in files.into_iter().enumerate() {
            let shard = open_shard(file.clone(), open(&file)?)?;
            for name in shard.metadata.offset_keys() {
                if let Some(&prev) = index.get(&name) {
                    let prev: &Shard = &shards[prev];
                    return Err(Error::model(
                        file,
                        format!("tensor `{name}` also appears in {}", prev.name),
                    ));
                }
                index.insert(name, si);
            }
            shards.push(shard);
        }
        for (tensor, file) in &weight_map {
            match index.get(tensor) {
                Some(&si) if shards[si].name == *file => {}
                _ => {
                    return Err(Error::model(
                        file.clone(),
                        format!(
                        "{INDEX_FILE} lists tensor `{tensor}` in this file, but it is not there"
                    ),
                    ))
                }
            }
        }
        Ok(HfCheckpoint {
            config,
            shards,
            index,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// All tensor names, sorted.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.index.keys().map(String::as_str)
    }

    pub fn has_tensor(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// A tensor's shape, if present.
    pub fn tensor_shape(&self, name: &str) -> Option<&[usize]> {
        let shard = &self.shards[*self.index.get(name)?];
        shard.metadata.info(name).map(|i| i.shape.as_slice())
    }

    /// A tensor converted to f32 (F32, F16 and BF16 are supported).
    pub fn tensor_f32(&self, name: &str) -> Result<TensorF32> {
        let si = *self
            .index
            .get(name)
            .ok_or_else(|| Error::model("checkpoint", format!("missing tensor `{name}`")))?;
        let shard = &self.shards[si];
        let info = shard
            .metadata
            .info(name)
            .ok_or_else(|| Error::model(shard.name.clone(), format!("missing tensor `{name}`")))?;
        let (s, e) = info.data_offsets;
        let bytes = shard
            .blob
            .bytes()
            .get(shard.data_start + s..shard.data_start + e)
            .ok_or_else(|| {
                Error::model(
                    shard.name.clone(),
                    format!("tensor `{name}` lies outside the file"),
                )
            })?;
        let data = to_f32(info.dtype, bytes, &shard.name, name)?;
        Ok(TensorF32 {
            shape: info.shape.clone(),
            data,
        })
    }

    /// A tensor that must have exactly `shape`.
    fn shaped(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let got = self.tensor_shape(name).ok_or_else(|| {
            Error::model(
                "checkpoint",
                format!("missing tensor `{name}` (expected shape {shape:?})"),
            )
        })?;
        if got != shape {
            return Err(Error::model(
                "checkpoint",
                format!("tensor `{name}` has shape {got:?}, expected {shape:?}"),
            ));
        }
        Ok(self.tensor_f32(name)?.data)
    }

    /// An RMSNorm's gains: the stored vector plus the architecture's
    /// offset ([`ModelConfig::hf_norm_offset`]).
    fn norm(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let mut w = self.shaped(name, &[len])?;
        let offset = self.config.hf_norm_offset();
        if offset != 0.0 {
            w.iter_mut().for_each(|x| *x += offset);
        }
        Ok(w)
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
        Matrix::from_f32(rows, cols, self.shaped(name, &[rows, cols])?)
    }

    /// Builds the decoder from the `model.*` tensors (and `lm_head.weight`
    /// when present and untied), checking every shape.
    pub fn transformer(&self) -> Result<Transformer> {
        let c = &self.config;
        let (h, q, kv, ff) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
        let embed = self.matrix("model.embed_tokens.weight", c.vocab_size, h)?;
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let p = |s: &str| format!("model.layers.{i}.{s}");
            // A vector the architecture may have (biases, q/k norms).
            let optional = |s: &str, len: usize, on: bool| -> Result<Option<Vec<f32>>> {
                on.then(|| self.shaped(&p(s), &[len])).transpose()
            };
            let post = c.has_post_norms();
            // Gemma names its norm after attention `post_attention_layernorm`,
            // the name Llama gives the norm before the MLP.
            let (post_attn, pre_mlp) = if post {
                (
                    Some("post_attention_layernorm.weight"),
                    "pre_feedforward_layernorm.weight",
                )
            } else {
                (None, "post_attention_layernorm.weight")
            };
            let norm = |s: &str, len: usize| self.norm(&p(s), len);
            let optional_norm =
                |s: &str, len: usize, on: bool| on.then(|| norm(s, len)).transpose();
            layers.push(Layer {
                attn_norm: norm("input_layernorm.weight", h)?,
                q: self.matrix(&p("self_attn.q_proj.weight"), q, h)?,
                k: self.matrix(&p("self_attn.k_proj.weight"), kv, h)?,
                v: self.matrix(&p("self_attn.v_proj.weight"), kv, h)?,
                o: self.matrix(&p("self_attn.o_proj.weight"), h, q)?,
                q_bias: optional("self_attn.q_proj.bias", q, c.attention_bias)?,
                k_bias: optional("self_attn.k_proj.bias", kv, c.attention_bias)?,
                v_bias: optional("self_attn.v_proj.bias", kv, c.attention_bias)?,
                o_bias: optional("self_attn.o_proj.bias", h, c.o_bias)?,
                q_norm: optional_norm("self_attn.q_norm.weight", c.head_dim, c.has_qk_norm())?,
                k_norm: optional_norm("self_attn.k_norm.weight", c.head_dim, c.has_qk_norm())?,
                post_attn_norm: post_attn.map(|s| norm(s, h)).transpose()?,
                mlp_norm: norm(pre_mlp, h)?,
                post_mlp_norm: optional_norm("post_feedforward_layernorm.weight", h, post)?,
                gate: self.matrix(&p("mlp.gate_proj.weight"), ff, h)?,
                up: self.matrix(&p("mlp.up_proj.weight"), ff, h)?,
                down: self.matrix(&p("mlp.down_proj.weight"), h, ff)?,
            });
        }
        let norm = self.norm("model.norm.weight", h)?;
        let lm_head = if c.tie_word_embeddings {
            LmHead::Tied
        } else if self.has_tensor("lm_head.weight") {
            LmHead::Separate(self.matrix("lm_head.weight", c.vocab_size, h)?)
        } else {
            LmHead::Absent
        };
        Transformer::new(
            c.clone(),
            RopeStyle::HalfSplit,
            embed,
            layers,
            norm,
            lm_head,
        )
    }
}

/// Converts a safetensors tensor's raw little-endian bytes to f32 (F32, F16
/// and BF16); other dtypes are an error naming `file` and `tensor`.
pub fn to_f32(dtype: Dtype, bytes: &[u8], file: &str, tensor: &str) -> Result<Vec<f32>> {
    Ok(match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => {
            return Err(Error::model(
                file,
                format!(
                    "tensor `{tensor}` has dtype {other:?}; only F32, F16 and BF16 are supported"
                ),
            ))
        }
    })
}
