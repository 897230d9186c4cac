//! The WGSL sources (shaders/ at the repository root), compiled in.

/// One shader: a name (the pipeline cache key) and its full source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shader {
    pub name: &'static str,
    /// Parts concatenated in order (a shared body plus a format file).
    pub parts: &'static [&'static str],
}

/// A shader of one file.
macro_rules! single {
    ($name:literal, $file:literal) => {
        Shader {
            name: $name,
            parts: &[include_str!(concat!("../../shaders/", $file))],
        }
    };
}

const QUANT_COMMON: &str = include_str!("../../shaders/matmul_quant_common.wgsl");
const QUANT_TILED: &str = include_str!("../../shaders/matmul_quant_tiled.wgsl");
const GATHER_COMMON: &str = include_str!("../../shaders/embed_gather_quant_common.wgsl");
const QUANT_WORDS: &str = include_str!("../../shaders/quant_words.wgsl");
const K_SCALES: &str = include_str!("../../shaders/quant_k_scales.wgsl");
const Q5_HIGH_BITS: &str = include_str!("../../shaders/quant_q5_high_bits.wgsl");

/// The matmul and embedding-gather shaders of one quantized format: a
/// skeleton, the word helpers, the format's helper file (if any) and its
/// format file.
macro_rules! quant_format {
    ($matmul:ident, $embed:ident, $name:literal, [$($part:expr),*]) => {
        pub(crate) const $matmul: Shader = Shader {
            name: concat!("matmul_", $name),
            parts: &[
                QUANT_COMMON,
                QUANT_WORDS,
                $($part,)*
                include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
            ],
        };
        pub(crate) const $embed: Shader = Shader {
            name: concat!("embed_gather_", $name),
            parts: &[
                GATHER_COMMON,
                QUANT_WORDS,
                $($part,)*
                include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
            ],
        };
    };
}

/// The tiled prefill matmul of a format (the 32-element ones: a K-quant's
/// block_deq recomputes its sub-block scales for every vec4, which costs
/// more on llvmpipe than the tile saves).
macro_rules! tiled_format {
    ($tiled:ident, $name:literal, [$($part:expr),*]) => {
        pub(crate) const $tiled: Shader = Shader {
            name: concat!("matmul_tiled_", $name),
            parts: &[
                QUANT_TILED,
                QUANT_WORDS,
                $($part,)*
                include_str!(concat!("../../shaders/matmul_", $name, ".wgsl")),
            ],
        };
    };
}

quant_format!(MATMUL_Q8_0, EMBED_Q8_0, "q8_0", []);
quant_format!(MATMUL_Q4_0, EMBED_Q4_0, "q4_0", []);
quant_format!(MATMUL_Q4_1, EMBED_Q4_1, "q4_1", []);
quant_format!(MATMUL_Q5_0, EMBED_Q5_0, "q5_0", [Q5_HIGH_BITS]);
quant_format!(MATMUL_Q5_1, EMBED_Q5_1, "q5_1", [Q5_HIGH_BITS]);
quant_format!(MATMUL_Q4_K, EMBED_Q4_K, "q4_k", [K_SCALES]);
quant_format!(MATMUL_Q5_K, EMBED_Q5_K, "q5_k", [K_SCALES]);
quant_format!(MATMUL_Q6_K, EMBED_Q6_K, "q6_k", []);
tiled_format!(TILED_Q8_0, "q8_0", []);
tiled_format!(TILED_Q4_0, "q4_0", []);
tiled_format!(TILED_Q4_1, "q4_1", []);
tiled_format!(TILED_Q5_0, "q5_0", [Q5_HIGH_BITS]);
tiled_format!(TILED_Q5_1, "q5_1", [Q5_HIGH_BITS]);

const FLOAT16: &str = include_str!("../../shaders/matmul_float16.wgsl");

/// The 16-bit float matmuls: a format file (bindings and widening) before
/// the shared skeleton, whose directive `enable f16;` must open the module.
/// F16 has two, one per device kind (see `GpuContext::float16_path`).
macro_rules! float16_format {
    ($matmul:ident, $name:literal, $file:literal) => {
        pub(crate) const $matmul: Shader = Shader {
            name: concat!("matmul_", $name),
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
pub(crate) const ROPE: Shader = single!("rope", "rope.wgsl");
pub(crate) const ATTENTION: Shader = single!("attention", "attention.wgsl");
pub(crate) const SWIGLU: Shader = single!("swiglu", "swiglu.wgsl");
pub(crate) const RESIDUAL_ADD: Shader = single!("residual_add", "residual_add.wgsl");
pub(crate) const BIAS_ADD: Shader = single!("bias_add", "bias_add.wgsl");
pub(crate) const GATHER_ROWS: Shader = single!("gather_rows", "gather_rows.wgsl");
pub(crate) const TOKEN_STATS: Shader = single!("token_stats", "token_stats.wgsl");

impl Shader {
    pub fn source(&self) -> String {
        self.parts.join("\n")
    }
}
