//! Building the decoder from a GGUF file: hyper-parameters from its metadata,
//! weights left in their ggml blocks inside the (memory-mapped) file.

use std::sync::Arc;

use super::config::{Activation, Arch, ModelConfig, RopeScaling};
use super::matrix::{Matrix, SharedBytes};
use super::transformer::{Layer, LmHead, RopeStyle, Transformer};
use crate::error::{Error, Result};
use crate::format::{GgufArray, GgufValue};
use crate::format::{GgufFile, ModelBytes, TensorInfo};
use crate::ggml::GgmlType;
use crate::quant::dequantize_row;

/// A parsed GGUF file together with its bytes.
pub struct GgufModel {
    pub file: GgufFile,
    pub bytes: Arc<ModelBytes>,
}

impl GgufModel {
    /// Parses `bytes` (a memory map natively, a buffer in wasm).
    pub fn parse(bytes: ModelBytes, file_name: &str) -> Result<GgufModel> {
        let file = GgufFile::parse(bytes.as_slice(), file_name)?;
        Ok(GgufModel {
            file,
            bytes: Arc::new(bytes),
        })
    }

    fn err(&self, message: impl Into<String>) -> Error {
        Error::model(self.file.file_name.clone(), message)
    }

    /// The decoder's hyper-parameters, from `{arch}.*` metadata keys.
    pub fn config(&self) -> Result<ModelConfig> {
        let f = &self.file;
        let name = f.architecture()?;
        let arch = match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            other => {
                return Err(self.err(format!(
                    "architecture `{other}` is not supported (llama, qwen2, qwen3, gemma3)"
                )))
            }
        };
        let key = |k: &str| format!("{name}.{k}");
        let usize_of = |k: &str| -> Result<usize> {
            let v = f.get_u64(&key(k))?;
            usize::try_from(v)
                .map_err(|_| self.err(format!("`{}` = {v} does not fit in memory", key(k))))
        };
        let opt_usize_of = |k: &str| -> Result<Option<usize>> {
            match f.opt_u64(&key(k))? {
                Some(_) => usize_of(k).map(Some),
                None => Ok(None),
            }
        };
        let hidden_size = usize_of("embedding_length")?;
        let n_heads = usize_of("attention.head_count")?;
        let vocab_size = match opt_usize_of("vocab_size")? {
            Some(v) => v,
            None => f.get_str_array("tokenizer.ggml.tokens")?.len(),
        };
        // llama.cpp's rule: the head width is `attention.key_length`, else
        // hidden / heads (Qwen3 sets it apart from both); RoPE rotates
        // `rope.dimension_count` of it, which this decoder needs to be all.
        let rotated = opt_usize_of("rope.dimension_count")?;
        let (head_dim, head_dim_key) = match opt_usize_of("attention.key_length")? {
            Some(d) => (d, key("attention.key_length")),
            None => (
                hidden_size.checked_div(n_heads).unwrap_or(0),
                format!(
                    "{} / {}",
                    key("embedding_length"),
                    key("attention.head_count")
                ),
            ),
        };
        for (k, v) in [
            ("rope.dimension_count", rotated),
            (
                "attention.value_length",
                opt_usize_of("attention.value_length")?,
            ),
        ] {
            if let Some(v) = v.filter(|&v| v != head_dim) {
                return Err(self.err(format!(
                    "`{}` = {v} differs from the head width {head_dim}: partial rotation and \
                     unequal key and value widths are not supported",
                    key(k)
                )));
            }
        }
        let n_layers = usize_of("block_count")?;
        let gemma = arch == Arch::Gemma3;
        if let Some(cap) = f
            .opt_f32(&key("final_logit_softcapping"))?
            .filter(|&c| c != 0.0)
        {
            return Err(self.err(format!(
                "`{}` = {cap} is not supported (logit soft-capping)",
                key("final_logit_softcapping")
            )));
        }
        // llama.cpp's Gemma 3 rules where the file has no key: local layers
        // all but every 6th, local RoPE base 10000, and scores scaled by the
        // head width except in the 62-layer (27B) model, by hidden / heads.
        let sliding_window = if gemma {
            opt_usize_of("attention.sliding_window")?.filter(|&w| w > 0)
        } else {
            None
        };
        let pattern_key = key("attention.sliding_window_pattern");
        // A flag per layer, or every n-th layer global.
        let local_layers = match (sliding_window, f.get(&pattern_key)) {
            (None, _) => vec![false; n_layers],
            (Some(_), Some(GgufValue::Array(GgufArray::Bool(flags)))) => {
                if flags.len() != n_layers {
                    return Err(self.err(format!(
                        "`{}` has {} flags for {n_layers} layers",
                        pattern_key,
                        flags.len()
                    )));
                }
                flags.clone()
            }
            (Some(_), _) => {
                let n = f.opt_u32(&pattern_key)?.unwrap_or(6) as usize;
                (0..n_layers).map(|i| n == 0 || i % n < n - 1).collect()
            }
        };
        let query_pre_attn_scalar = if gemma && n_layers == 62 {
            hidden_size.checked_div(n_heads).unwrap_or(0)
        } else {
            head_dim
        };
        let rope_scaling = match f.opt_str(&key("rope.scaling.type"))? {
            None | Some("none") => RopeScaling::None,
            Some("linear") => RopeScaling::Linear {
                factor: f.get_f32(&key("rope.scaling.factor"))? as f64,
            },
            Some(other) => {
                return Err(self.err(format!(
                    "`{}` = {other} is not supported (none, linear)",
                    key("rope.scaling.type")
                )))
            }
        };
        let config = ModelConfig {
            arch,
            hidden_size,
            intermediate_size: usize_of("feed_forward_length")?,
            n_layers,
            n_heads,
            n_kv_heads: opt_usize_of("attention.head_count_kv")?.unwrap_or(n_heads),
            head_dim,
            vocab_size,
            rms_norm_eps: f.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_theta: f.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0) as f64,
            rope_scaling,
            max_position_embeddings: usize_of("context_length")?,
            tie_word_embeddings: f.tensor("output.weight").is_none(),
            // Qwen2 always has q/k/v biases; Qwen3 has them where its
            // checkpoint did (`attention_bias`, then on all four projections).
            attention_bias: arch == Arch::Qwen2
                || (arch == Arch::Qwen3 && f.tensor("blk.0.attn_q.bias").is_some()),
            o_bias: arch == Arch::Qwen3 && f.tensor("blk.0.attn_output.bias").is_some(),
            sliding_window,
            local_layers,
            rope_local_theta: gemma
                .then(|| f.opt_f32(&key("rope.freq_base_swa")))
                .transpose()?
                .map(|t| t.map_or(10_000.0, f64::from)),
            query_pre_attn_scalar,
            activation: if gemma {
                Activation::GeluTanh
            } else {
                Activation::Silu
            },
            architectures: vec![name.to_string()],
        };
        // Errors name this file's metadata keys, not config.json's.
        config.validate_in(&f.file_name, &|k| match k {
            "hidden_size" => key("embedding_length"),
            "intermediate_size" => key("feed_forward_length"),
            "num_hidden_layers" => key("block_count"),
            "num_attention_heads" => key("attention.head_count"),
            "num_key_value_heads" => key("attention.head_count_kv"),
            "head_dim" => head_dim_key.clone(),
            "max_position_embeddings" => key("context_length"),
            "rms_norm_eps" => key("attention.layer_norm_rms_epsilon"),
            "rope_theta" => key("rope.freq_base"),
            "rope_local_base_freq" => key("rope.freq_base_swa"),
            "vocab_size" => format!("{} (or tokenizer.ggml.tokens)", key("vocab_size")),
            other => key(other),
        })?;
        Ok(config)
    }

    fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.file
            .tensor(name)
            .ok_or_else(|| self.err(format!("missing tensor `{name}`")))
    }

    /// A weight matrix of `rows` x `cols`, kept in its blocks.
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
        let info = self.info(name)?;
        if info.dims.len() != 2 || info.dims[0] != cols as u64 || info.dims[1] != rows as u64 {
            return Err(self.err(format!(
                "tensor `{name}` has dims {:?}, expected [{cols}, {rows}]",
                info.dims
            )));
        }
        let data = self.file.tensor_data(self.bytes.as_slice(), info)?;
        let start = data.as_ptr() as usize - self.bytes.as_slice().as_ptr() as usize;
        let bytes = SharedBytes::new(self.bytes.clone(), start, data.len())?;
        Matrix::quant(info.ggml_type, rows, cols, bytes)
            .map_err(|e| self.err(format!("tensor `{name}`: {e}")))
    }

    /// A vector of `len` values (norm gains, biases), as f32.
    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let info = self.info(name)?;
        if info.n_elements != len as u64 || info.dims.len() != 1 {
            return Err(self.err(format!(
                "tensor `{name}` has dims {:?}, expected [{len}]",
                info.dims
            )));
        }
        if !matches!(
            info.ggml_type,
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16
        ) {
            return Err(self.err(format!(
                "vector tensor `{name}` is {}, expected a float type",
                info.ggml_type.name()
            )));
        }
        let data = self.file.tensor_data(self.bytes.as_slice(), info)?;
        let mut out = vec![0.0f32; len];
        dequantize_row(info.ggml_type, data, &mut out)?;
        Ok(out)
    }

    /// Builds the decoder. llama.cpp's converter permutes Llama q/k rows for
    /// adjacent-pair RoPE; Qwen2, Qwen3 and Gemma 3 keep the HF layout (NEOX
    /// rotation).
    pub fn transformer(&self) -> Result<Transformer> {
        let c = self.config()?;
        let (h, q, kv, ff) = (c.hidden_size, c.q_dim(), c.kv_dim(), c.intermediate_size);
        let embed = self.matrix("token_embd.weight", c.vocab_size, h)?;
        let mut layers = Vec::with_capacity(c.n_layers);
        for i in 0..c.n_layers {
            let p = |s: &str| format!("blk.{i}.{s}");
            // A vector the architecture may have (biases, q/k norms).
            let optional = |s: &str, len: usize, on: bool| -> Result<Option<Vec<f32>>> {
                on.then(|| self.vector(&p(s), len)).transpose()
            };
            layers.push(Layer {
                attn_norm: self.vector(&p("attn_norm.weight"), h)?,
                q: self.matrix(&p("attn_q.weight"), q, h)?,
                k: self.matrix(&p("attn_k.weight"), kv, h)?,
                v: self.matrix(&p("attn_v.weight"), kv, h)?,
                o: self.matrix(&p("attn_output.weight"), h, q)?,
                q_bias: optional("attn_q.bias", q, c.attention_bias)?,
                k_bias: optional("attn_k.bias", kv, c.attention_bias)?,
                v_bias: optional("attn_v.bias", kv, c.attention_bias)?,
                o_bias: optional("attn_output.bias", h, c.o_bias)?,
                q_norm: optional("attn_q_norm.weight", c.head_dim, c.has_qk_norm())?,
                k_norm: optional("attn_k_norm.weight", c.head_dim, c.has_qk_norm())?,
                post_attn_norm: optional("post_attention_norm.weight", h, c.has_post_norms())?,
                mlp_norm: self.vector(&p("ffn_norm.weight"), h)?,
                post_mlp_norm: optional("post_ffw_norm.weight", h, c.has_post_norms())?,
                gate: self.matrix(&p("ffn_gate.weight"), ff, h)?,
                up: self.matrix(&p("ffn_up.weight"), ff, h)?,
                down: self.matrix(&p("ffn_down.weight"), h, ff)?,
            });
        }
        let norm = self.vector("output_norm.weight", h)?;
        let lm_head = if c.tie_word_embeddings {
            LmHead::Tied
        } else {
            LmHead::Separate(self.matrix("output.weight", c.vocab_size, h)?)
        };
        let rope = if matches!(c.arch, Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3) {
            RopeStyle::HalfSplit
        } else {
            RopeStyle::AdjacentPairs
        };
        Transformer::new(c, rope, embed, layers, norm, lm_head)
    }

    /// An extra tensor (a PRM head stored beside the decoder), as f32 with
    /// its HF-order shape (`[rows, cols]`), or `None` when absent.
    pub fn tensor_f32(&self, name: &str) -> Result<Option<(Vec<usize>, Vec<f32>)>> {
        let Some(info) = self.file.tensor(name) else {
            return Ok(None);
        };
        let n = usize::try_from(info.n_elements)
            .map_err(|_| self.err(format!("tensor `{name}` is too large")))?;
        if n > (1 << 28) {
            return Err(self.err(format!(
                "head tensor `{name}` has {n} elements, more than a head can have"
            )));
        }
        let data = self.file.tensor_data(self.bytes.as_slice(), info)?;
        let mut out = vec![0.0f32; n];
        dequantize_row(info.ggml_type, data, &mut out)?;
        let shape = info.dims.iter().rev().map(|&d| d as usize).collect();
        Ok(Some((shape, out)))
    }
}
