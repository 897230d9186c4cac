//! The WGSL sources (shaders/ at the repository root), compiled in.

/// One shader: a name (the pipeline cache key) and its full source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shader {
    pub name: &'static str,
    /// Parts concatenated in order (a shared body plus a format file).
    pub parts: &'static [&'static str],
}

const QUANT_COMMON: &str = include_str!("../../../../shaders/matmul_quant_common.wgsl");

pub(crate) const MATMUL_F32: Shader = Shader {
    name: "matmul_f32",
    parts: &[include_str!("../../../../shaders/matmul_f32.wgsl")],
};
pub(crate) const MATMUL_Q8_0: Shader = Shader {
    name: "matmul_q8_0",
    parts: &[
        QUANT_COMMON,
        include_str!("../../../../shaders/matmul_q8_0.wgsl"),
    ],
};
pub(crate) const MATMUL_Q4_0: Shader = Shader {
    name: "matmul_q4_0",
    parts: &[
        QUANT_COMMON,
        include_str!("../../../../shaders/matmul_q4_0.wgsl"),
    ],
};
pub(crate) const MATMUL_Q4_1: Shader = Shader {
    name: "matmul_q4_1",
    parts: &[
        QUANT_COMMON,
        include_str!("../../../../shaders/matmul_q4_1.wgsl"),
    ],
};
pub(crate) const MATMUL_Q4_K: Shader = Shader {
    name: "matmul_q4_k",
    parts: &[
        QUANT_COMMON,
        include_str!("../../../../shaders/matmul_q4_k.wgsl"),
    ],
};
pub(crate) const MATMUL_Q6_K: Shader = Shader {
    name: "matmul_q6_k",
    parts: &[
        QUANT_COMMON,
        include_str!("../../../../shaders/matmul_q6_k.wgsl"),
    ],
};

impl Shader {
    pub fn source(&self) -> String {
        self.parts.join("\n")
    }
}
