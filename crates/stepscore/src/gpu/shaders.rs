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
const GATHER_COMMON: &str = include_str!("../../shaders/embed_gather_quant_common.wgsl");
const Q8_0: &str = include_str!("../../shaders/matmul_q8_0.wgsl");
const Q4_0: &str = include_str!("../../shaders/matmul_q4_0.wgsl");
const Q4_1: &str = include_str!("../../shaders/matmul_q4_1.wgsl");
const Q4_K: &str = include_str!("../../shaders/matmul_q4_k.wgsl");
const Q6_K: &str = include_str!("../../shaders/matmul_q6_k.wgsl");

pub(crate) const MATMUL_F32: Shader = Shader {
    name: "matmul_f32",
    parts: &[include_str!("../../shaders/matmul_f32.wgsl")],
};
pub(crate) const MATMUL_Q8_0: Shader = Shader {
    name: "matmul_q8_0",
    parts: &[QUANT_COMMON, Q8_0],
};
pub(crate) const MATMUL_Q4_0: Shader = Shader {
    name: "matmul_q4_0",
    parts: &[QUANT_COMMON, Q4_0],
};
pub(crate) const MATMUL_Q4_1: Shader = Shader {
    name: "matmul_q4_1",
    parts: &[QUANT_COMMON, Q4_1],
};
pub(crate) const MATMUL_Q4_K: Shader = Shader {
    name: "matmul_q4_k",
    parts: &[QUANT_COMMON, Q4_K],
};
pub(crate) const MATMUL_Q6_K: Shader = Shader {
    name: "matmul_q6_k",
    parts: &[QUANT_COMMON, Q6_K],
};

pub(crate) const EMBED_F32: Shader = single!("embed_gather_f32", "embed_gather_f32.wgsl");
pub(crate) const EMBED_Q8_0: Shader = Shader {
    name: "embed_gather_q8_0",
    parts: &[GATHER_COMMON, Q8_0],
};
pub(crate) const EMBED_Q4_0: Shader = Shader {
    name: "embed_gather_q4_0",
    parts: &[GATHER_COMMON, Q4_0],
};
pub(crate) const EMBED_Q4_1: Shader = Shader {
    name: "embed_gather_q4_1",
    parts: &[GATHER_COMMON, Q4_1],
};
pub(crate) const EMBED_Q4_K: Shader = Shader {
    name: "embed_gather_q4_k",
    parts: &[GATHER_COMMON, Q4_K],
};
pub(crate) const EMBED_Q6_K: Shader = Shader {
    name: "embed_gather_q6_k",
    parts: &[GATHER_COMMON, Q6_K],
};
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
