//! The WGSL sources (shaders/ at the repository root), compiled in.
//!
//! What the kernels keep (each file's header says how): float arithmetic
//! in f32 only, 16-bit values being widened (exact), never computed with;
//! the quantized and 16-bit matmuls, attention and RMSNorm take the CPU
//! engine's float steps in its order; attention and SwiGLU take e^x from
//! exp.wgsl (quant/exp.rs's steps), not WGSL's `exp`. No kernel needs
//! `shader-f16`, which Chromium's SwiftShader adapter lacks: the quantized
//! kernels read f16 scales with core WGSL's `unpack2x16float`, and F16
//! weights have a u32-word variant (`Float16Path`). tests/gpu_matmul.rs
//! `every_kernel_runs_on_a_device_without_shader_f16` checks it.

use super::act_layout as act;

/// One shader: a name (the pipeline cache key) and its full source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shader {
    pub name: &'static str,
    /// `const NAME: u32 = V;` lines put ahead of the parts: layouts the Rust
    /// side owns (act.rs's activation blocks).
    pub defs: &'static [(&'static str, u32)],
    /// Parts concatenated in order (a shared body plus a format file).
    pub parts: &'static [&'static str],
}

/// A shader of one file.
macro_rules! single {
    ($name:literal, $file:literal) => {
        Shader {
            name: $name,
            defs: &[],
            parts: &[include_str!(concat!("../../shaders/", $file))],
        }
    };
}

/// A shader of one file that calls `exp_cpu` (exp.wgsl).
macro_rules! with_exp {
    ($name:literal, $file:literal) => {
        Shader {
            name: $name,
            defs: &[],
            parts: &[EXP, include_str!(concat!("../../shaders/", $file))],
        }
    };
}

const EXP: &str = include_str!("../../shaders/exp.wgsl");
const QUANT_COMMON: &str = include_str!("../../shaders/matmul_quant_common.wgsl");
const GATHER_COMMON: &str = include_str!("../../shaders/embed_gather_quant_common.wgsl");
const QUANT_WORDS: &str = include_str!("../../shaders/quant_words.wgsl");
const IDOT4_PACKED: &str = include_str!("../../shaders/idot4_packed.wgsl");
const IDOT4_EMULATED: &str = include_str!("../../shaders/idot4_emulated.wgsl");
const K_SCALES: &str = include_str!("../../shaders/quant_k_scales.wgsl");
const Q5_HIGH_BITS: &str = include_str!("../../shaders/quant_q5_high_bits.wgsl");
const QUANTIZE_COMMON: &str = include_str!("../../shaders/quantize_acts_common.wgsl");

/// The kernels of one quantized weight format.
pub(crate) struct QuantShaders {
    /// The matmul over 8-bit activations with `dot4I8Packed`, and with its
    /// core-WGSL emulation.
    pub matmul_packed: Shader,
    pub matmul_emulated: Shader,
    pub gather: Shader,
}

/// The shaders of one quantized format: the shared body, the word helpers,
/// an idot4, the format's helper file (if any) and its format file.
macro_rules! quant_format {
    ($id:ident, $name:literal, [$($part:expr),*]) => {
        pub(crate) const $id: QuantShaders = QuantShaders {
            matmul_packed: Shader {
                name: concat!("matmul_", $name, "_packed"),
                defs: act::DEFS,
                parts: &[
                    QUANT_COMMON,
                    QUANT_WORDS,
                    IDOT4_PACKED,
                    $($part,)*
                    include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
                ],
            },
            matmul_emulated: Shader {
                name: concat!("matmul_", $name, "_emulated"),
                defs: act::DEFS,
                parts: &[
                    QUANT_COMMON,
                    QUANT_WORDS,
                    IDOT4_EMULATED,
                    $($part,)*
                    include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
                ],
            },
            gather: Shader {
                name: concat!("embed_gather_", $name),
                defs: act::DEFS,
                parts: &[
                    GATHER_COMMON,
                    QUANT_WORDS,
                    IDOT4_EMULATED,
                    $($part,)*
                    include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
                ],
            },
        };
    };
}

quant_format!(Q8_0, "q8_0", []);
quant_format!(Q4_0, "q4_0", []);
quant_format!(Q4_1, "q4_1", []);
quant_format!(Q5_0, "q5_0", [Q5_HIGH_BITS]);
quant_format!(Q5_1, "q5_1", [Q5_HIGH_BITS]);
quant_format!(Q4_K, "q4_k", [K_SCALES]);
quant_format!(Q5_K, "q5_k", [K_SCALES]);
quant_format!(Q6_K, "q6_k", []);

/// The activation quantizers (act.rs).
pub(crate) const QUANTIZE_Q8: Shader = Shader {
    name: "quantize_q8",
    defs: act::DEFS,
    parts: &[
        QUANTIZE_COMMON,
        include_str!("../../shaders/quantize_q8.wgsl"),
    ],
};
pub(crate) const QUANTIZE_Q8_K: Shader = Shader {
    name: "quantize_q8_k",
    defs: act::DEFS,
    parts: &[
        QUANTIZE_COMMON,
        include_str!("../../shaders/quantize_q8_k.wgsl"),
    ],
};

const FLOAT16: &str = include_str!("../../shaders/matmul_float16.wgsl");

/// The 16-bit float matmuls: a format file (bindings and widening) before
/// the shared skeleton, whose directive `enable f16;` must open the module.
/// F16 has two, one per device kind (see `GpuContext::float16_path`).
macro_rules! float16_format {
    ($matmul:ident, $name:literal, $file:literal) => {
        pub(crate) const $matmul: Shader = Shader {
            name: concat!("matmul_", $name),
            // No defs: `enable f16;` must come first.
            defs: &[],
            parts: &[include_str!(concat!("../../shaders/", $file)), FLOAT16],
        };
    };
}

float16_format!(MATMUL_F16_NATIVE, "f16_native", "float16_f16_native.wgsl");
float16_format!(MATMUL_F16_WORDS, "f16_words", "float16_f16_words.wgsl");
float16_format!(MATMUL_BF16, "bf16", "float16_bf16.wgsl");
pub(crate) const ROUND_ACTS16: Shader = single!("round_acts16", "round_acts16.wgsl");
pub(crate) const EMBED_FLOAT16: Shader =
    single!("embed_gather_float16", "embed_gather_float16.wgsl");

pub(crate) const MATMUL_F32: Shader = single!("matmul_f32", "matmul_f32.wgsl");
pub(crate) const EMBED_F32: Shader = single!("embed_gather_f32", "embed_gather_f32.wgsl");
pub(crate) const RMS_NORM: Shader = single!("rms_norm", "rms_norm.wgsl");
pub(crate) const HEAD_NORM: Shader = single!("head_norm", "head_norm.wgsl");
pub(crate) const ROPE: Shader = single!("rope", "rope.wgsl");
pub(crate) const ATTENTION: Shader = with_exp!("attention", "attention.wgsl");
pub(crate) const SWIGLU: Shader = with_exp!("swiglu", "swiglu.wgsl");
pub(crate) const RESIDUAL_ADD: Shader = single!("residual_add", "residual_add.wgsl");
pub(crate) const SCALE: Shader = single!("scale", "scale.wgsl");
pub(crate) const BIAS_ADD: Shader = single!("bias_add", "bias_add.wgsl");
pub(crate) const GATHER_ROWS: Shader = single!("gather_rows", "gather_rows.wgsl");
pub(crate) const TOKEN_STATS: Shader = single!("token_stats", "token_stats.wgsl");

impl Shader {
    pub fn source(&self) -> String {
        let mut s: String = self
            .defs
            .iter()
            .map(|(name, v)| format!("const {name}: u32 = {v}u;\n"))
            .collect();
        s.push_str(&self.parts.join("\n"));
        s
    }
}
