//! The decoder's hyper-parameters, read from a Hugging Face `config.json`
//! (or filled in by another loader, e.g. GGUF metadata) and validated once so
//! the forward pass can index without re-checking.

use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// Decoder families sharing the Llama block (RMSNorm, RoPE, GQA, SwiGLU).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Mistral,
    /// Qwen2's block with an RMSNorm over each query and key head before
    /// RoPE, and biases only where `attention_bias` says (none in the
    /// published checkpoints).
    Qwen3,
    /// Gemma 3's text decoder: Qwen3's per-head q/k norms, a norm after
    /// attention and after the MLP as well as before each, embeddings
    /// scaled by sqrt(hidden), a GELU-gated MLP, and local (sliding-window,
    /// their own RoPE base) layers between global ones.
    Gemma3,
}

impl Arch {
    pub const ALL: [Arch; 5] = [
        Arch::Llama,
        Arch::Qwen2,
        Arch::Qwen3,
        Arch::Mistral,
        Arch::Gemma3,
    ];

    /// The name people know it by (`stepscore doctor`, errors).
    pub fn name(&self) -> &'static str {
        match self {
            Arch::Llama => "Llama",
            Arch::Qwen2 => "Qwen2",
            Arch::Qwen3 => "Qwen3",
            Arch::Mistral => "Mistral",
            Arch::Gemma3 => "Gemma 3",
        }
    }

    /// The architecture for an HF `model_type`.
    pub fn from_model_type(model_type: &str) -> Option<Arch> {
        match model_type {
            "llama" => Some(Arch::Llama),
            "qwen2" => Some(Arch::Qwen2),
            "mistral" => Some(Arch::Mistral),
            "qwen3" => Some(Arch::Qwen3),
            // "gemma3" is the multimodal wrapper (weights under
            // `language_model.`), not this decoder's layout.
            "gemma3_text" => Some(Arch::Gemma3),
            _ => None,
        }
    }

    /// The architecture for an HF class name in `architectures`
    /// (`Qwen2ForProcessRewardModel`, `LlamaForCausalLM`, ...).
    pub fn from_class_name(name: &str) -> Option<Arch> {
        // Qwen3's mixture-of-experts, vision and hybrid-attention variants
        // are other decoders.
        if name.starts_with("Qwen3")
            && !["Qwen3Moe", "Qwen3VL", "Qwen3Next", "Qwen3Omni"]
                .iter()
                .any(|p| name.starts_with(p))
        {
            Some(Arch::Qwen3)
        } else if name.starts_with("Qwen2")
            && !name.starts_with("Qwen2Moe")
            && !name.starts_with("Qwen2VL")
        {
            Some(Arch::Qwen2)
        } else if name.starts_with("Llama") {
            Some(Arch::Llama)
        } else if name.starts_with("Mistral") {
            Some(Arch::Mistral)
        } else if name.starts_with("Gemma3") && !name.starts_with("Gemma3ForConditionalGeneration")
        {
            Some(Arch::Gemma3)
        } else {
            None
        }
    }
}

/// How rotary frequencies are derived from `rope_theta`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    /// Plain `theta^(-2i/d)` frequencies.
    None,
    /// Llama 3.1 frequency smoothing (`rope_type: "llama3"`).
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: usize,
    },
    /// Every frequency divided by `factor` (`rope_type: "linear"`, Gemma 3's
    /// larger models on their global layers).
    Linear { factor: f64 },
}

/// The MLP's gate activation: `down(act(gate(x)) * up(x))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// x * sigmoid(x) (`silu`).
    Silu,
    /// GELU's tanh approximation (`gelu_pytorch_tanh`), Gemma's.
    GeluTanh,
}

/// Validated decoder hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub rms_norm_eps: f32,
    pub rope_theta: f64,
    pub rope_scaling: RopeScaling,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
    /// q/k/v projections carry biases (always for Qwen2; Llama's `attention_bias`).
    pub attention_bias: bool,
    /// The output projection carries a bias too (Llama's `attention_bias`).
    pub o_bias: bool,
    /// Keys this many positions back or further are masked, in the layers
    /// `local_layers` marks (every layer of Mistral, Gemma 3's local ones).
    pub sliding_window: Option<usize>,
    /// One flag per layer: local attention (the sliding window, and the
    /// local RoPE base where `rope_local_theta` is set).
    pub local_layers: Vec<bool>,
    /// RoPE base of the local layers, unscaled (Gemma 3's
    /// `rope_local_base_freq`); `None`: every layer rotates with `rope_theta`.
    pub rope_local_theta: Option<f64>,
    /// Attention scores are scaled by 1/sqrt(this) (Gemma's
    /// `query_pre_attn_scalar`; `head_dim` elsewhere).
    pub query_pre_attn_scalar: usize,
    pub activation: Activation,
    /// The raw `architectures` list, for the PRM layer to pick its head.
    pub architectures: Vec<String>,
}

// Upper bounds: far above any model this crate targets, low enough that a
// hostile config cannot make size arithmetic overflow or request absurd buffers.
const MAX_HIDDEN: usize = 1 << 16;
const MAX_INTERMEDIATE: usize = 1 << 18;
const MAX_LAYERS: usize = 1024;
const MAX_HEADS: usize = 1024;
const MAX_HEAD_DIM: usize = 1024;
const MAX_VOCAB: usize = 1 << 22;
const MAX_POSITIONS: usize = 1 << 24;

const FILE: &str = "config.json";

fn err(message: impl Into<String>) -> Error {
    Error::model(FILE, message)
}

fn get_usize(map: &Map<String, Value>, key: &str) -> Result<Option<usize>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| err(format!("`{key}` must be a non-negative integer, got {v}"))),
    }
}

fn need_usize(map: &Map<String, Value>, key: &str) -> Result<usize> {
    get_usize(map, key)?.ok_or_else(|| err(format!("missing required key `{key}`")))
}

fn get_f64(map: &Map<String, Value>, key: &str) -> Result<Option<f64>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| err(format!("`{key}` must be a finite number, got {v}"))),
    }
}

fn get_bool(map: &Map<String, Value>, key: &str) -> Result<Option<bool>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(err(format!("`{key}` must be true or false, got {v}"))),
    }
}

fn get_str<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(err(format!("`{key}` must be a string, got {v}"))),
    }
}

fn bounded(key: &str, value: usize, max: usize) -> Result<usize> {
    if value == 0 {
        return Err(err(format!("`{key}` must be positive, got 0")));
    }
    if value > max {
        return Err(err(format!(
            "`{key}` = {value} exceeds the supported maximum {max}"
        )));
    }
    Ok(value)
}

fn parse_rope_scaling(scaling: &Map<String, Value>, key: &str) -> Result<RopeScaling> {
    let ty = match get_str(scaling, "rope_type")? {
        Some(t) => t,
        None => get_str(scaling, "type")?.unwrap_or("default"),
    };
    match ty {
        "default" => Ok(RopeScaling::None),
        "llama3" => {
            let need = |k: &str| -> Result<f64> {
                get_f64(scaling, k)?
                    .ok_or_else(|| err(format!("`{key}.{k}` is required for llama3 rope scaling")))
            };
            let factor = need("factor")?;
            let low_freq_factor = need("low_freq_factor")?;
            let high_freq_factor = need("high_freq_factor")?;
            let original = get_usize(scaling, "original_max_position_embeddings")?.ok_or_else(|| {
                err(format!("`{key}.original_max_position_embeddings` is required for llama3 rope scaling"))
            })?;
            if factor <= 0.0 || low_freq_factor <= 0.0 || high_freq_factor <= low_freq_factor {
                return Err(err(format!(
                    "`{key}`: llama3 scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0"
                )));
            }
            Ok(RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings: bounded(
                    &format!("{key}.original_max_position_embeddings"),
                    original,
                    MAX_POSITIONS,
                )?,
            })
        }
        "linear" => {
            let factor = get_f64(scaling, "factor")?.ok_or_else(|| {
                err(format!(
                    "`{key}.factor` is required for linear rope scaling"
                ))
            })?;
            if factor <= 0.0 {
                return Err(err(format!(
                    "`{key}.factor` must be positive, got {factor}"
                )));
            }
            Ok(RopeScaling::Linear { factor })
        }
        other => Err(err(format!(
            "`{key}` of type `{other}` is not supported (only none/default, linear and llama3)"
        ))),
    }
}

/// Which of Gemma 3's layers are local: `layer_types` where given, else
/// every layer but each `sliding_window_pattern`-th (6 by default).
fn gemma_local_layers(map: &Map<String, Value>, n_layers: usize) -> Result<Vec<bool>> {
    match map.get("layer_types") {
        Some(Value::Array(types)) => {
            if types.len() != n_layers {
                return Err(err(format!(
                    "`layer_types` lists {} layers, the model has {n_layers}",
                    types.len()
                )));
            }
            types
                .iter()
                .enumerate()
                .map(|(i, t)| match t.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(err(format!(
                        "`layer_types[{i}]` = {t}: expected \"sliding_attention\" or \"full_attention\""
                    ))),
                })
                .collect()
        }
        None | Some(Value::Null) => {
            let pattern = get_usize(map, "sliding_window_pattern")?.unwrap_or(6);
            Ok((0..n_layers)
                .map(|i| pattern == 0 || (i + 1) % pattern != 0)
                .collect())
        }
        Some(v) => Err(err(format!("`layer_types` must be a list, got {v}"))),
    }
}

impl ModelConfig {
    /// Parses and validates the text of an HF `config.json`.
    pub fn from_json_str(text: &str) -> Result<ModelConfig> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(err("top level must be a JSON object"));
        };
        Self::from_json_map(&map)
    }

    fn from_json_map(map: &Map<String, Value>) -> Result<ModelConfig> {
        let architectures: Vec<String> = match map.get("architectures") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| err(format!("`architectures` must hold strings, got {v}")))
                })
                .collect::<Result<_>>()?,
            Some(v) => {
                return Err(err(format!(
                    "`architectures` must be a list of strings, got {v}"
                )))
            }
        };
        let model_type = get_str(map, "model_type")?;
        let arch = match model_type {
            Some(mt) => Arch::from_model_type(mt).ok_or_else(|| {
                err(format!(
                    "`model_type` `{mt}` is not supported (llama, qwen2, qwen3, mistral, gemma3_text)"
                ))
            })?,
            None => architectures
                .iter()
                .find_map(|a| Arch::from_class_name(a))
                .ok_or_else(|| {
                    err("missing `model_type` and no supported class in `architectures`")
                })?,
        };

        // Gemma's configs name it `hidden_activation`.
        let act_key = if map.contains_key("hidden_activation") {
            "hidden_activation"
        } else {
            "hidden_act"
        };
        let activation = match get_str(map, act_key)? {
            None if arch == Arch::Gemma3 => Activation::GeluTanh,
            None | Some("silu") => Activation::Silu,
            Some("gelu_pytorch_tanh") => Activation::GeluTanh,
            Some(act) => {
                return Err(err(format!(
                    "`{act_key}` `{act}` is not supported (silu, gelu_pytorch_tanh)"
                )))
            }
        };
        if get_bool(map, "use_bidirectional_attention")?.unwrap_or(false) {
            return Err(err(
                "`use_bidirectional_attention` = true (an embedding model, EmbeddingGemma) is not a decoder",
            ));
        }
        for key in ["final_logit_softcapping", "attn_logit_softcapping"] {
            if let Some(v) = get_f64(map, key)? {
                return Err(err(format!(
                    "`{key}` = {v} is not supported (Gemma 2's soft-capping; Gemma 3 has none)"
                )));
            }
        }
        if get_bool(map, "mlp_bias")?.unwrap_or(false) {
            return Err(err("`mlp_bias` = true is not supported"));
        }

        let hidden_size = bounded("hidden_size", need_usize(map, "hidden_size")?, MAX_HIDDEN)?;
        let intermediate_size = bounded(
            "intermediate_size",
            need_usize(map, "intermediate_size")?,
            MAX_INTERMEDIATE,
        )?;
        let n_layers = bounded(
            "num_hidden_layers",
            need_usize(map, "num_hidden_layers")?,
            MAX_LAYERS,
        )?;
        let n_heads = bounded(
            "num_attention_heads",
            need_usize(map, "num_attention_heads")?,
            MAX_HEADS,
        )?;
        let n_kv_heads = bounded(
            "num_key_value_heads",
            get_usize(map, "num_key_value_heads")?.unwrap_or(n_heads),
            MAX_HEADS,
        )?;
        let vocab_size = bounded("vocab_size", need_usize(map, "vocab_size")?, MAX_VOCAB)?;
        let max_position_embeddings = bounded(
            "max_position_embeddings",
            need_usize(map, "max_position_embeddings")?,
            MAX_POSITIONS,
        )?;

        if n_heads % n_kv_heads != 0 {
            return Err(err(format!(
                "`num_attention_heads` ({n_heads}) must be a multiple of `num_key_value_heads` ({n_kv_heads})"
            )));
        }
        let head_dim = match get_usize(map, "head_dim")? {
            Some(d) => bounded("head_dim", d, MAX_HEAD_DIM)?,
            None => {
                if hidden_size % n_heads != 0 {
                    return Err(err(format!(
                        "`hidden_size` ({hidden_size}) must be divisible by `num_attention_heads` ({n_heads})"
                    )));
                }
                bounded("head_dim", hidden_size / n_heads, MAX_HEAD_DIM)?
            }
        };
        if head_dim % 2 != 0 {
            return Err(err(format!(
                "head dimension {head_dim} must be even for rotary embeddings"
            )));
        }

        let rms_norm_eps = get_f64(map, "rms_norm_eps")?
            .ok_or_else(|| err("missing required key `rms_norm_eps`"))?;
        if !(rms_norm_eps > 0.0 && rms_norm_eps < 1.0) {
            return Err(err(format!(
                "`rms_norm_eps` must lie in (0, 1), got {rms_norm_eps}"
            )));
        }

        // Newer transformers versions move rope settings into
        // `rope_parameters`, per layer type where the types differ (Gemma 3).
        let mut local_theta = None;
        let (rope_theta, rope_scaling) = match map.get("rope_parameters") {
            Some(Value::Object(params)) if params.contains_key("full_attention") => {
                let part = |k: &str| match params.get(k) {
                    Some(Value::Object(p)) => Ok(Some(p)),
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => Err(err(format!(
                        "`rope_parameters.{k}` must be an object, got {v}"
                    ))),
                };
                let full = part("full_attention")?
                    .ok_or_else(|| err("`rope_parameters.full_attention` is missing"))?;
                if let Some(local) = part("sliding_attention")? {
                    if parse_rope_scaling(local, "rope_parameters.sliding_attention")?
                        != RopeScaling::None
                    {
                        return Err(err("`rope_parameters.sliding_attention`: scaled local RoPE is not supported"));
                    }
                    local_theta = get_f64(local, "rope_theta")?;
                }
                (
                    get_f64(full, "rope_theta")?,
                    parse_rope_scaling(full, "rope_parameters.full_attention")?,
                )
            }
            Some(Value::Object(params)) => (
                get_f64(params, "rope_theta")?.or(get_f64(map, "rope_theta")?),
                parse_rope_scaling(params, "rope_parameters")?,
            ),
            None | Some(Value::Null) => (
                get_f64(map, "rope_theta")?,
                match map.get("rope_scaling") {
                    None | Some(Value::Null) => RopeScaling::None,
                    Some(Value::Object(s)) => parse_rope_scaling(s, "rope_scaling")?,
                    Some(v) => {
                        return Err(err(format!(
                            "`rope_scaling` must be an object or null, got {v}"
                        )))
                    }
                },
            ),
            Some(v) => return Err(err(format!("`rope_parameters` must be an object, got {v}"))),
        };
        let rope_theta = rope_theta.unwrap_or(if arch == Arch::Gemma3 { 1e6 } else { 10_000.0 });
        if rope_theta <= 1.0 {
            return Err(err(format!("`rope_theta` must exceed 1, got {rope_theta}")));
        }

        // Gemma's configs leave it out: transformers' default there is tied.
        let tie_word_embeddings =
            get_bool(map, "tie_word_embeddings")?.unwrap_or(arch == Arch::Gemma3);
        let (attention_bias, o_bias) = match arch {
            // Qwen2 always has q/k/v biases and never an output bias.
            Arch::Qwen2 => (true, false),
            // Both read `attention_bias` for all four projections.
            Arch::Llama | Arch::Qwen3 | Arch::Gemma3 => {
                let b = get_bool(map, "attention_bias")?.unwrap_or(false);
                (b, b)
            }
            Arch::Mistral => (false, false),
        };
        let sliding_window = match arch {
            Arch::Mistral => get_usize(map, "sliding_window")?
                .map(|w| bounded("sliding_window", w, usize::MAX))
                .transpose()?,
            Arch::Qwen2 | Arch::Qwen3 => {
                if get_bool(map, "use_sliding_window")?.unwrap_or(false) {
                    return Err(err(format!(
                        "`use_sliding_window` = true is not supported for {}",
                        format!("{arch:?}").to_lowercase()
                    )));
                }
                None
            }
            // transformers' Gemma3TextConfig defaults where a key is absent.
            Arch::Gemma3 => Some(bounded(
                "sliding_window",
                get_usize(map, "sliding_window")?.unwrap_or(4096),
                usize::MAX,
            )?),
            Arch::Llama => None,
        };
        let local_layers = match arch {
            Arch::Gemma3 => gemma_local_layers(map, n_layers)?,
            _ => vec![sliding_window.is_some(); n_layers],
        };
        let (rope_local_theta, query_pre_attn_scalar) = match arch {
            Arch::Gemma3 => (
                Some(
                    local_theta
                        .or(get_f64(map, "rope_local_base_freq")?)
                        .unwrap_or(10_000.0),
                ),
                bounded(
                    "query_pre_attn_scalar",
                    get_usize(map, "query_pre_attn_scalar")?.unwrap_or(256),
                    MAX_HIDDEN,
                )?,
            ),
            _ => (None, head_dim),
        };

        let config = ModelConfig {
            arch,
            hidden_size,
            intermediate_size,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            vocab_size,
            rms_norm_eps: rms_norm_eps as f32,
            rope_theta,
            rope_scaling,
            max_position_embeddings,
            tie_word_embeddings,
            attention_bias,
            o_bias,
            sliding_window,
            local_layers,
            rope_local_theta,
            query_pre_attn_scalar,
            activation,
            architectures,
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every value against its meaning (ranges, divisibility,
    /// finite positive epsilon) for a config read from `config.json`.
    pub fn validate(&self) -> Result<()> {
        self.validate_in(FILE, &|k| k.to_string())
    }

    /// [`ModelConfig::validate`] for a config read from `file`, whose key for
    /// each `config.json` name is `key(name)` (a GGUF's metadata keys), so an
    /// error names what the file really holds.
    pub(crate) fn validate_in(&self, file: &str, key: &dyn Fn(&str) -> String) -> Result<()> {
        let err = |m: String| Error::model(file, m);
        for (name, value, max) in [
            ("hidden_size", self.hidden_size, MAX_HIDDEN),
            (
                "intermediate_size",
                self.intermediate_size,
                MAX_INTERMEDIATE,
            ),
            ("num_hidden_layers", self.n_layers, MAX_LAYERS),
            ("num_attention_heads", self.n_heads, MAX_HEADS),
            ("num_key_value_heads", self.n_kv_heads, MAX_HEADS),
            ("head_dim", self.head_dim, MAX_HEAD_DIM),
            ("vocab_size", self.vocab_size, MAX_VOCAB),
            (
                "max_position_embeddings",
                self.max_position_embeddings,
                MAX_POSITIONS,
            ),
        ] {
            if value == 0 {
                return Err(err(format!("`{}` must be positive, got 0", key(name))));
            }
            if value > max {
                return Err(err(format!(
                    "`{}` = {value} exceeds the supported maximum {max}",
                    key(name)
                )));
            }
        }
        if self.n_heads % self.n_kv_heads != 0 {
            return Err(err(format!(
                "`{}` ({}) must be a multiple of `{}` ({})",
                key("num_attention_heads"),
                self.n_heads,
                key("num_key_value_heads"),
                self.n_kv_heads
            )));
        }
        if self.head_dim % 2 != 0 {
            return Err(err(format!(
                "`{}` = {} must be even for rotary embeddings",
                key("head_dim"),
                self.head_dim
            )));
        }
        // An epsilon of +inf passed a "positive" test and made every norm
        // output ~0: every step then scored the same.
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0 && self.rms_norm_eps < 1.0) {
            return Err(err(format!(
                "`{}` must be a finite number in (0, 1), got {}",
                key("rms_norm_eps"),
                self.rms_norm_eps
            )));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(err(format!(
                "`{}` must be a finite number above 1, got {}",
                key("rope_theta"),
                self.rope_theta
            )));
        }
        if self.local_layers.len() != self.n_layers {
            return Err(err(format!(
                "{} layer kinds for {} layers",
                self.local_layers.len(),
                self.n_layers
            )));
        }
        if let Some(t) = self
            .rope_local_theta
            .filter(|t| !(t.is_finite() && *t > 1.0))
        {
            return Err(err(format!(
                "`{}` must be a finite number above 1, got {t}",
                key("rope_local_base_freq")
            )));
        }
        if self.query_pre_attn_scalar == 0 || self.query_pre_attn_scalar > MAX_HIDDEN {
            return Err(err(format!(
                "`{}` must lie in 1..={MAX_HIDDEN}, got {}",
                key("query_pre_attn_scalar"),
                self.query_pre_attn_scalar
            )));
        }
        if let Some(0) = self.sliding_window {
            return Err(err(format!(
                "`{}` must be positive, got 0",
                key("sliding_window")
            )));
        }
        Ok(())
    }

    /// Queries and keys are RMS-normed per head before RoPE (Qwen3's
    /// `q_norm` / `k_norm`, one gain vector of `head_dim` each).
    pub fn has_qk_norm(&self) -> bool {
        matches!(self.arch, Arch::Qwen3 | Arch::Gemma3)
    }

    /// The attention output and the MLP output are RMS-normed before each
    /// joins the residual (Gemma's `post_attention_layernorm` and
    /// `post_feedforward_layernorm`).
    pub fn has_post_norms(&self) -> bool {
        self.arch == Arch::Gemma3
    }

    /// Gemma multiplies the token embeddings by sqrt(hidden_size) (in f32,
    /// as llama.cpp and a float32 transformers run do).
    pub fn embed_scale(&self) -> Option<f32> {
        (self.arch == Arch::Gemma3).then(|| (self.hidden_size as f32).sqrt())
    }

    /// What Hugging Face checkpoints store of each RMSNorm gain less than
    /// the gain: Gemma's norms multiply by `1 + weight` (llama.cpp's
    /// converter adds the 1, so GGUF files hold the gain itself).
    pub fn hf_norm_offset(&self) -> f32 {
        if self.arch == Arch::Gemma3 {
            1.0
        } else {
            0.0
        }
    }

    /// The factor of every attention score, 1/sqrt(`query_pre_attn_scalar`).
    pub fn attention_scale(&self) -> f32 {
        1.0 / (self.query_pre_attn_scalar as f32).sqrt()
    }

    /// The sliding window of `layer`'s attention, if it has one.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.sliding_window
            .filter(|_| self.local_layers.get(layer).copied().unwrap_or(false))
    }

    /// Whether `layer` rotates with the local RoPE base.
    pub fn local_rope(&self, layer: usize) -> bool {
        self.rope_local_theta.is_some() && self.local_layers.get(layer).copied().unwrap_or(false)
    }

    /// Keeps the first `n` layers' settings (a decoder cut after layer `n`).
    pub fn truncate_layers(&mut self, n: usize) {
        self.n_layers = n;
        self.local_layers.truncate(n);
    }

    /// The local layers' rotary inverse frequencies, where they differ.
    pub(crate) fn rope_local_inv_freq(&self) -> Option<Vec<f64>> {
        self.rope_local_theta
            .map(|theta| plain_inv_freq(theta, self.head_dim))
    }

    /// Width of the query projection output (`n_heads * head_dim`).
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of the key/value projection outputs (`n_kv_heads * head_dim`).
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }

    /// Rotary inverse frequencies, one per rotated pair (`head_dim / 2`).
    pub(crate) fn rope_inv_freq(&self) -> Vec<f64> {
        let base = plain_inv_freq(self.rope_theta, self.head_dim);
        match self.rope_scaling {
            RopeScaling::None => base,
            RopeScaling::Linear { factor } => base.into_iter().map(|f| f / factor).collect(),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => {
                // Long wavelengths are slowed by `factor`, short ones kept, and
                // the band between interpolated smoothly.
                let old = original_max_position_embeddings as f64;
                let low_wavelen = old / low_freq_factor;
                let high_wavelen = old / high_freq_factor;
                base.into_iter()
                    .map(|f| {
                        let wavelen = 2.0 * std::f64::consts::PI / f;
                        if wavelen < high_wavelen {
                            f
                        } else if wavelen > low_wavelen {
                            f / factor
                        } else {
                            let smooth = (old / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
        }
    }
}

/// `theta^(-2i/d)` for each rotated pair of a `head_dim`-wide head.
fn plain_inv_freq(theta: f64, head_dim: usize) -> Vec<f64> {
    let d = head_dim as f64;
    (0..head_dim / 2)
        .map(|i| theta.powf(-(2.0 * i as f64) / d))
        .collect()
}
