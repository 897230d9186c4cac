//! A loaded Llama-family decoder (Llama, Qwen2, Qwen3, Mistral, Gemma 3): its configuration
//! and weights, checked against each other at assembly. The engines run it:
//! the CPU engine in place (`crate::cpu`, which adds `forward`, `logits_for`
//! and the KV cache), the WGSL engine after uploading it (`crate::gpu`).

use super::config::ModelConfig;
use super::decoder::{Block, VocabHead, Weights};
use super::matrix::Matrix;
use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// Which elements RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Hugging Face `rotate_half`: element `i` pairs with `i + head_dim/2`.
    /// Right for weights exactly as HF checkpoints store them.
    HalfSplit,
    /// Element `2i` pairs with `2i + 1`. Right for GGUF files, whose q/k
    /// weights llama.cpp's converter permuted for this rotation.
    AdjacentPairs,
}

/// One decoder block's weights on the CPU. Vectors are per-channel (norm gains, biases).
pub type Layer = Block<Matrix, Vec<f32>>;

/// Where the CPU engine's vocabulary projection comes from.
pub type LmHead = VocabHead<Matrix>;

/// Final-normed hidden states, token-major: row `t` is `data[t*width..(t+1)*width]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Hidden {
    pub n_tokens: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

impl Hidden {
    /// Row `t`, or `None` past the end.
    pub fn row(&self, t: usize) -> Option<&[f32]> {
        (t < self.n_tokens)
            .then(|| self.data.get(t * self.width..(t + 1) * self.width))
            .flatten()
    }

    /// Consecutive runs of `rows[i]` rows each, in order (rows past the
    /// sum are left out; a run past the end is cut at it).
    pub fn split(&self, rows: &[usize]) -> Vec<Hidden> {
        let mut at = 0;
        rows.iter()
            .map(|&n| {
                let n = n.min(self.n_tokens - at);
                let data = self.data[at * self.width..(at + n) * self.width].to_vec();
                at += n;
                Hidden {
                    n_tokens: n,
                    width: self.width,
                    data,
                }
            })
            .collect()
    }
}

/// A loaded decoder, ready to run.
#[derive(Debug, Clone)]
pub struct Transformer {
    config: ModelConfig,
    rope_style: RopeStyle,
    inv_freq: Vec<f64>,
    /// The local layers' frequencies, where their base differs.
    inv_freq_local: Option<Vec<f64>>,
    w: Weights<Matrix, Vec<f32>>,
    threads: usize,
}

fn shape_err(what: &str, want: (usize, usize), got: (usize, usize)) -> Error {
    Error::model(
        "transformer",
        format!(
            "{what}: expected shape [{}, {}], got [{}, {}]",
            want.0, want.1, got.0, got.1
        ),
    )
}

fn check_matrix(what: &str, m: &Matrix, rows: usize, cols: usize) -> Result<()> {
    if (m.rows(), m.cols()) != (rows, cols) {
        return Err(shape_err(what, (rows, cols), (m.rows(), m.cols())));
    }
    Ok(())
}

fn check_vec(what: &str, v: Option<&Vec<f32>>, len: usize, required: bool) -> Result<()> {
    match v {
        Some(v) if v.len() != len => Err(Error::model(
            "transformer",
            format!("{what}: expected {len} values, got {}", v.len()),
        )),
        None if required => Err(Error::model("transformer", format!("{what}: missing"))),
        _ => Ok(()),
    }
}

impl Transformer {
    /// Assembles a decoder, checking every weight's shape against `config`.
    pub fn new(
        config: ModelConfig,
        rope_style: RopeStyle,
        embed: Matrix,
        layers: Vec<Layer>,
        norm: Vec<f32>,
        lm_head: LmHead,
    ) -> Result<Transformer> {
        config.validate()?;
        let (h, q, kv, ff) = (
            config.hidden_size,
            config.q_dim(),
            config.kv_dim(),
            config.intermediate_size,
        );
        check_matrix("embed_tokens", &embed, config.vocab_size, h)?;
        if layers.len() != config.n_layers {
            return Err(Error::model(
                "transformer",
                format!(
                    "config has {} layers, weights have {}",
                    config.n_layers,
                    layers.len()
                ),
            ));
        }
        for (i, l) in layers.iter().enumerate() {
            let p = |s: &str| format!("layer {i} {s}");
            check_vec(&p("input_layernorm"), Some(&l.attn_norm), h, true)?;
            check_matrix(&p("q_proj"), &l.q, q, h)?;
            check_matrix(&p("k_proj"), &l.k, kv, h)?;
            check_matrix(&p("v_proj"), &l.v, kv, h)?;
            check_matrix(&p("o_proj"), &l.o, h, q)?;
            check_vec(
                &p("q_proj.bias"),
                l.q_bias.as_ref(),
                q,
                config.attention_bias,
            )?;
            check_vec(
                &p("k_proj.bias"),
                l.k_bias.as_ref(),
                kv,
                config.attention_bias,
            )?;
            check_vec(
                &p("v_proj.bias"),
                l.v_bias.as_ref(),
                kv,
                config.attention_bias,
            )?;
            check_vec(&p("o_proj.bias"), l.o_bias.as_ref(), h, config.o_bias)?;
            let qk = config.has_qk_norm();
            for (what, norm) in [("q_norm", &l.q_norm), ("k_norm", &l.k_norm)] {
                if norm.is_some() && !qk {
                    return Err(Error::model(
                        "transformer",
                        format!("{}: {:?} has no per-head norms", p(what), config.arch),
                    ));
                }
                check_vec(&p(what), norm.as_ref(), config.head_dim, qk)?;
            }
            let post = config.has_post_norms();
            for (what, norm) in [
                ("post_attention_norm", &l.post_attn_norm),
                ("post_feedforward_norm", &l.post_mlp_norm),
            ] {
                if norm.is_some() && !post {
                    return Err(Error::model(
                        "transformer",
                        format!("{}: {:?} has no post-norms", p(what), config.arch),
                    ));
                }
                check_vec(&p(what), norm.as_ref(), h, post)?;
            }
            check_vec(&p("pre_feedforward_norm"), Some(&l.mlp_norm), h, true)?;
            check_matrix(&p("gate_proj"), &l.gate, ff, h)?;
            check_matrix(&p("up_proj"), &l.up, ff, h)?;
            check_matrix(&p("down_proj"), &l.down, h, ff)?;
        }
        check_vec("norm", Some(&norm), h, true)?;
        if let LmHead::Separate(m) = &lm_head {
            check_matrix("lm_head", m, config.vocab_size, h)?;
        }
        let threads = crate::par::available();
        Ok(Transformer {
            inv_freq: config.rope_inv_freq(),
            inv_freq_local: config.rope_local_inv_freq(),
            config,
            rope_style,
            w: Weights {
                embed,
                layers,
                norm,
                lm_head,
            },
            threads,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn rope_style(&self) -> RopeStyle {
        self.rope_style
    }

    /// The weights, for uploading to another engine (the GPU's) and for
    /// timing each matrix (`stepscore bench --decode`).
    pub fn weights(&self) -> &Weights<Matrix, Vec<f32>> {
        &self.w
    }

    /// RoPE inverse frequencies (f64, as the engines' tables use them).
    pub(crate) fn inv_freq(&self) -> &[f64] {
        &self.inv_freq
    }

    /// The local layers' RoPE inverse frequencies, where their base differs
    /// ([`ModelConfig::local_rope`]).
    pub(crate) fn inv_freq_local(&self) -> Option<&[f64]> {
        self.inv_freq_local.as_deref()
    }

    /// Threads used by matmuls and attention (at least 1; on wasm32 at most
    /// what the build's pool has, see [`crate::par`]).
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = crate::par::usable(threads);
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether [`Transformer::logits_for`] can run.
    /// A copy with every weight expanded to f32, so products run on exact
    /// f32 activations instead of the quantized ones ggml's scheme uses: the
    /// reference path for checking the forward pass on quantized checkpoints.
    pub fn dequantized(&self) -> Result<Transformer> {
        let mut t = self.clone();
        t.w.embed = t.w.embed.to_f32()?;
        for l in &mut t.w.layers {
            for m in [
                &mut l.q,
                &mut l.k,
                &mut l.v,
                &mut l.o,
                &mut l.gate,
                &mut l.up,
                &mut l.down,
            ] {
                *m = m.to_f32()?;
            }
        }
        if let LmHead::Separate(m) = &mut t.w.lm_head {
            *m = m.to_f32()?;
        }
        Ok(t)
    }

    /// Quantizes every f32 weight matrix to `ty` (Q8_0 or Q4_0), as llama.cpp's
    /// converter would: the Hugging Face path's optional load-time quantization.
    /// F16 and BF16 convert them to 16-bit rows instead (see
    /// [`crate::quant::quantize_weights`]).
    pub fn quantize_weights(&mut self, ty: GgmlType) -> Result<()> {
        self.w.embed = self.w.embed.quantized(ty)?;
        for l in &mut self.w.layers {
            for m in [
                &mut l.q,
                &mut l.k,
                &mut l.v,
                &mut l.o,
                &mut l.gate,
                &mut l.up,
                &mut l.down,
            ] {
                *m = m.quantized(ty)?;
            }
        }
        if let LmHead::Separate(m) = &mut self.w.lm_head {
            *m = m.quantized(ty)?;
        }
        Ok(())
    }

    /// Frees the vocabulary projection when the head never needs it (score
    /// and value heads): for a 1.5B Qwen2 that is ~230M parameters.
    pub fn drop_lm_head(&mut self) {
        if let LmHead::Separate(_) = self.w.lm_head {
            self.w.lm_head = LmHead::Absent;
        }
    }

    pub fn has_lm_head(&self) -> bool {
        self.w.vocab_projection().is_some()
    }

    /// Keeps only the first `n` blocks (no-op when `n` is not smaller), for
    /// a head that reads layer `n` and nothing after it: the final-normed
    /// output of the truncated model is by definition the hidden state of
    /// layer `n` (see [`Transformer::forward_tapped`]), and the later blocks
    /// are never run. Caches made before the call no longer fit.
    pub fn truncate_layers(&mut self, n: usize) {
        if n < self.w.layers.len() {
            self.w.layers.truncate(n);
            self.config.truncate_layers(n);
        }
    }

    /// The vocabulary projection: the embedding when tied.
    pub fn vocab_projection(&self) -> Result<&Matrix> {
        self.w.vocab_projection().ok_or_else(|| {
            Error::InvalidArgument(
                "this checkpoint has no lm_head; only hidden states are available".into(),
            )
        })
    }
}
