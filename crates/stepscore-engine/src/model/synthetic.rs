//! Random-weight models of real architectures, built in memory: the
//! engine's own benchmark models, which `stepscore bench --synthetic` times
//! on a machine without the model file (or one that can receive only a
//! small upload).
//!
//! Each [`Shape`] copies a real checkpoint's dimensions, layer and head
//! counts, vocabulary size, tied or untied output and the weight format of
//! every tensor (the per-layer Q6_K/Q8_0 layers too, read from the real
//! GGUF files); the blocks hold seeded random bytes with scales chosen so a
//! weight's magnitude is about 1/sqrt(cols), which keeps every activation
//! finite through the whole stack. The vocabulary is byte-level: the 256
//! byte tokens, the model's special tokens at their real ids, and unreachable
//! fillers up to the real vocabulary size, so the vocabulary projection costs
//! what the real one does. The result is a GGUF in memory, opened by the same
//! loaders as a file.

use crate::format::{GgufArray, GgufValue, GgufWriter, ModelBytes};
use crate::ggml::GgmlType;
use crate::model::GgufModel;
use crate::quant::{f32_to_bf16, f32_to_f16};
use crate::{Error, Result};

/// A real model's architecture, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// SmolLM2-135M-Instruct as the catalog's Q4_1 GGUF (Llama, tied embeddings).
    Smollm2_135m,
    /// Qwen2.5-(Coder-)0.5B-Instruct as the catalog's GGUF (mostly Q5_0).
    Qwen25_05b,
    /// Qwen2.5-(Coder-)1.5B-Instruct, Q4_K_M.
    Qwen25_15b,
    /// Qwen2.5-7B-Instruct, Q4_K_M (4.4 GiB of weights).
    Qwen25_7b,
}

/// The weight formats of a synthetic model: the real checkpoint's, or every
/// matrix (embeddings and output too) in one 16-bit float format, e.g. to
/// time the GPU engine's F16 kernels on a real shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weights {
    #[default]
    Real,
    F16,
    Bf16,
}

impl Weights {
    /// Parses `real`, `f16` or `bf16`.
    pub fn parse(name: &str) -> Result<Weights> {
        match name.to_ascii_lowercase().as_str() {
            "real" => Ok(Weights::Real),
            "f16" => Ok(Weights::F16),
            "bf16" => Ok(Weights::Bf16),
            _ => Err(Error::InvalidArgument(format!(
                "unknown synthetic weights `{name}` (one of: real, f16, bf16)"
            ))),
        }
    }
}

/// Which format each tensor role takes.
#[derive(Debug, Clone, Copy)]
struct Formats {
    embed: GgmlType,
    /// `None`: tied to the embeddings.
    output: Option<GgmlType>,
    /// q, k, output projection, gate, up.
    main: GgmlType,
    /// attn_v and ffn_down in most layers, and in the `more_bits` layers.
    v: (GgmlType, GgmlType),
    down: (GgmlType, GgmlType),
    /// Layers whose attn_v and ffn_down take the second format.
    more_bits: &'static [usize],
}

/// The layers of the Q4_K_M files (28 layers) whose attn_v and ffn_down
/// are Q6_K, as in Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf.
const Q4_K_M_28: &[usize] = &[0, 1, 5, 6, 7, 8, 9, 10, 13, 16, 19, 21, 24, 27];
/// Qwen2.5-Coder-0.5B-Instruct.gguf's layers with Q8_0 attn_v and Q6_K ffn_down.
const Q05B_24: &[usize] = &[0, 1, 3, 6, 7, 8, 9, 10, 13, 16, 19, 21];

/// Dimensions and formats of one shape.
#[derive(Debug, Clone, Copy)]
pub struct ShapeSpec {
    pub name: &'static str,
    /// GGUF `general.architecture`: `llama` or `qwen2`.
    pub arch: &'static str,
    pub hidden: usize,
    pub ffn: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub vocab: usize,
    pub context: usize,
    pub rope_theta: f32,
    pub rms_eps: f32,
    formats: Formats,
}

impl Shape {
    pub const ALL: [Shape; 4] = [
        Shape::Smollm2_135m,
        Shape::Qwen25_05b,
        Shape::Qwen25_15b,
        Shape::Qwen25_7b,
    ];

    /// Parses a shape name (`smollm2-135m`, `qwen2.5-0.5b`, `qwen2.5-1.5b`, `7b`).
    pub fn parse(name: &str) -> Result<Shape> {
        let n = name.to_ascii_lowercase();
        Shape::ALL
            .into_iter()
            .find(|s| s.spec().name == n || (n == "qwen2.5-7b" && *s == Shape::Qwen25_7b))
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown synthetic shape `{name}` (one of: {})",
                    Shape::ALL.map(|s| s.spec().name).join(", ")
                ))
            })
    }

    pub fn spec(self) -> ShapeSpec {
        use GgmlType::*;
        match self {
            Shape::Smollm2_135m => ShapeSpec {
                name: "smollm2-135m",
                arch: "llama",
                hidden: 576,
                ffn: 1536,
                layers: 30,
                heads: 9,
                kv_heads: 3,
                vocab: 49152,
                context: 8192,
                rope_theta: 100_000.0,
                rms_eps: 1e-5,
                formats: Formats {
                    embed: Q8_0,
                    output: None,
                    main: Q4_1,
                    v: (Q4_1, Q4_1),
                    down: (Q4_1, Q4_1),
                    more_bits: &[],
                },
            },
            Shape::Qwen25_05b => ShapeSpec {
                name: "qwen2.5-0.5b",
                arch: "qwen2",
                hidden: 896,
                ffn: 4864,
                layers: 24,
                heads: 14,
                kv_heads: 2,
                vocab: 151_936,
                context: 32768,
                rope_theta: 1e6,
                rms_eps: 1e-6,
                formats: Formats {
                    embed: Q5_0,
                    output: Some(Q8_0),
                    main: Q5_0,
                    v: (Q5_0, Q8_0),
                    down: (Q4K, Q6K),
                    more_bits: Q05B_24,
                },
            },
            Shape::Qwen25_15b => ShapeSpec {
                name: "qwen2.5-1.5b",
                arch: "qwen2",
                hidden: 1536,
                ffn: 8960,
                layers: 28,
                heads: 12,
                kv_heads: 2,
                vocab: 151_936,
                context: 32768,
                rope_theta: 1e6,
                rms_eps: 1e-6,
                formats: Formats {
                    embed: Q4K,
                    output: Some(Q6K),
                    main: Q4K,
                    v: (Q4K, Q6K),
                    down: (Q4K, Q6K),
                    more_bits: Q4_K_M_28,
                },
            },
            Shape::Qwen25_7b => ShapeSpec {
                name: "7b",
                arch: "qwen2",
                hidden: 3584,
                ffn: 18944,
                layers: 28,
                heads: 28,
                kv_heads: 4,
                vocab: 152_064,
                context: 32768,
                rope_theta: 1e6,
                rms_eps: 1e-6,
                formats: Formats {
                    embed: Q4K,
                    output: Some(Q6K),
                    main: Q4K,
                    v: (Q4K, Q6K),
                    down: (Q4K, Q6K),
                    more_bits: Q4_K_M_28,
                },
            },
        }
    }
}

/// One tensor to generate: GGUF name, dims (`[cols, rows]` or `[len]`), type.
struct TensorPlan {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
}

impl ShapeSpec {
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// This shape with every weight matrix in `w`'s format (`Real` keeps
    /// the checkpoint's formats; an untied output stays untied).
    pub fn with_weights(mut self, w: Weights) -> ShapeSpec {
        let ty = match w {
            Weights::Real => return self,
            Weights::F16 => GgmlType::F16,
            Weights::Bf16 => GgmlType::BF16,
        };
        self.formats = Formats {
            embed: ty,
            output: self.formats.output.map(|_| ty),
            main: ty,
            v: (ty, ty),
            down: (ty, ty),
            more_bits: self.formats.more_bits,
        };
        self
    }

    fn plan(&self) -> Vec<TensorPlan> {
        let f = &self.formats;
        let (d, kv) = (self.hidden as u64, (self.kv_heads * self.head_dim()) as u64);
        let ffn = self.ffn as u64;
        let t = |name: String, dims: &[u64], ty| TensorPlan {
            name,
            dims: dims.to_vec(),
            ty,
        };
        let mut out = vec![t(
            "token_embd.weight".into(),
            &[d, self.vocab as u64],
            f.embed,
        )];
        let qwen = self.arch == "qwen2";
        for l in 0..self.layers {
            let more = f.more_bits.contains(&l);
            let pick = |p: (GgmlType, GgmlType)| if more { p.1 } else { p.0 };
            let n = |s: &str| format!("blk.{l}.{s}");
            out.push(t(n("attn_norm.weight"), &[d], GgmlType::F32));
            out.push(t(n("attn_q.weight"), &[d, d], f.main));
            out.push(t(n("attn_k.weight"), &[d, kv], f.main));
            out.push(t(n("attn_v.weight"), &[d, kv], pick(f.v)));
            if qwen {
                out.push(t(n("attn_q.bias"), &[d], GgmlType::F32));
                out.push(t(n("attn_k.bias"), &[kv], GgmlType::F32));
                out.push(t(n("attn_v.bias"), &[kv], GgmlType::F32));
            }
            out.push(t(n("attn_output.weight"), &[d, d], f.main));
            out.push(t(n("ffn_norm.weight"), &[d], GgmlType::F32));
            out.push(t(n("ffn_gate.weight"), &[d, ffn], f.main));
            out.push(t(n("ffn_up.weight"), &[d, ffn], f.main));
            out.push(t(n("ffn_down.weight"), &[ffn, d], pick(f.down)));
        }
        out.push(t("output_norm.weight".into(), &[d], GgmlType::F32));
        if let Some(ty) = f.output {
            out.push(t("output.weight".into(), &[d, self.vocab as u64], ty));
        }
        out
    }

    /// Bytes of tensor data the model holds (what [`generate`] allocates,
    /// apart from a few MiB of vocabulary and header).
    pub fn weight_bytes(&self) -> u64 {
        self.plan()
            .iter()
            .map(|p| {
                p.ty.bytes_for(p.dims.iter().product())
                    .unwrap_or(u64::MAX / 64)
            })
            .sum()
    }

    /// The weight formats, most common first by bytes (e.g. "Q4_K, Q6_K, F32").
    pub fn formats_summary(&self) -> String {
        let mut by: Vec<(GgmlType, u64)> = Vec::new();
        for p in self.plan() {
            let b = p.ty.bytes_for(p.dims.iter().product()).unwrap_or(0);
            match by.iter_mut().find(|(t, _)| *t == p.ty) {
                Some(e) => e.1 += b,
                None => by.push((p.ty, b)),
            }
        }
        by.sort_by(|a, b| b.1.cmp(&a.1));
        by.iter()
            .map(|(t, _)| t.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Seeded xorshift64* bytes: fast, deterministic, quality irrelevant here.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, out: &mut [u8]) {
        let mut chunks = out.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }

    /// Uniform in [-1, 1).
    fn sym(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Where a block keeps its f16 scale `d` (and the second f16 factor, if
/// any), and the typical magnitude of `q * sc` for random bytes: `d` is set
/// to `1 / (typical * sqrt(cols))`.
fn scale_layout(ty: GgmlType) -> Option<(usize, Option<usize>, f32)> {
    Some(match ty {
        GgmlType::Q4_0 => (0, None, 4.6),
        GgmlType::Q4_1 => (0, Some(2), 4.6),
        GgmlType::Q5_0 => (0, None, 9.2),
        GgmlType::Q5_1 => (0, Some(2), 9.2),
        GgmlType::Q8_0 => (0, None, 74.0),
        GgmlType::Q4K => (0, Some(2), 317.0),
        GgmlType::Q5K => (0, Some(2), 634.0),
        GgmlType::Q6K => (208, None, 1369.0),
        _ => return None,
    })
}

/// An empty buffer with room for `n` bytes, or a typed error when the
/// memory is not there (an abort otherwise: the largest shapes are GiBs).
fn alloc(n: usize) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::InvalidArgument(format!(
            "cannot allocate {n} bytes for a synthetic tensor: not enough memory"
        ))
    })?;
    Ok(v)
}

/// Random blocks of `ty` for `rows` rows of `cols` values.
fn random_blocks(ty: GgmlType, cols: u64, rows: u64, rng: &mut Rng) -> Result<Vec<u8>> {
    let n = usize::try_from(ty.bytes_for(cols * rows)?)
        .map_err(|_| Error::InvalidArgument("synthetic tensor too large".into()))?;
    if matches!(ty, GgmlType::F16 | GgmlType::BF16) {
        // Uniform with standard deviation 1/sqrt(cols), like the blocks.
        let a = (3.0 / cols as f32).sqrt();
        let half = if ty == GgmlType::F16 {
            f32_to_f16
        } else {
            f32_to_bf16
        };
        let mut data = alloc(n)?;
        for _ in 0..n / 2 {
            data.extend_from_slice(&half(a * rng.sym()).to_le_bytes());
        }
        return Ok(data);
    }
    let mut data = alloc(n)?;
    data.resize(n, 0);
    rng.fill(&mut data);
    let (d_at, m_at, typical) = scale_layout(ty).ok_or_else(|| {
        Error::InvalidArgument(format!("synthetic weights in {} are not made", ty.name()))
    })?;
    let d = 1.0 / (typical * (cols as f32).sqrt());
    for blk in data.chunks_exact_mut(ty.block_bytes()) {
        let dv = d * (0.75 + 0.5 * (rng.next() >> 40) as f32 / (1u64 << 24) as f32);
        blk[d_at..d_at + 2].copy_from_slice(&f32_to_f16(dv).to_le_bytes());
        if let Some(m_at) = m_at {
            // Q4_1/Q5_1's min centres the block; the K-quants' dmin is small.
            let m = match ty {
                GgmlType::Q4_1 => -7.5 * dv,
                GgmlType::Q5_1 => -15.5 * dv,
                _ => dv,
            };
            blk[m_at..m_at + 2].copy_from_slice(&f32_to_f16(m).to_le_bytes());
        }
    }
    Ok(data)
}

/// GPT-2's byte -> printable char table (the byte-level vocabulary's
/// spelling of each byte).
fn byte_chars() -> Vec<String> {
    let keep =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256;
    (0..256u32)
        .map(|b| {
            let c = if keep(b) {
                b
            } else {
                next += 1;
                next - 1
            };
            char::from_u32(c).map(String::from).unwrap_or_default()
        })
        .collect()
}

/// The tokenizer metadata: byte tokens, special tokens at the real ids,
/// fillers up to `vocab`.
fn vocabulary(spec: &ShapeSpec) -> Vec<(&'static str, GgufValue)> {
    let (specials, bytes_at, pre, bos, eos): (&[(u32, &str)], u32, &str, u32, u32) =
        if spec.arch == "llama" {
            (
                &[(0, "<|endoftext|>"), (1, "<|im_start|>"), (2, "<|im_end|>")],
                3,
                "smollm",
                1,
                2,
            )
        } else {
            (
                &[
                    (151_643, "<|endoftext|>"),
                    (151_644, "<|im_start|>"),
                    (151_645, "<|im_end|>"),
                ],
                0,
                "qwen2",
                151_643,
                151_645,
            )
        };
    let mut tokens: Vec<String> = (0..spec.vocab)
        .map(|i| format!("<synthetic_{i}>"))
        .collect();
    let mut types = vec![1i32; spec.vocab];
    for (i, b) in byte_chars().into_iter().enumerate() {
        tokens[bytes_at as usize + i] = b;
    }
    for &(id, text) in specials {
        tokens[id as usize] = text.to_string();
        types[id as usize] = 3; // control
    }
    vec![
        ("tokenizer.ggml.model", GgufValue::String("gpt2".into())),
        ("tokenizer.ggml.pre", GgufValue::String(pre.into())),
        (
            "tokenizer.ggml.tokens",
            GgufValue::Array(GgufArray::String(tokens)),
        ),
        (
            "tokenizer.ggml.token_type",
            GgufValue::Array(GgufArray::I32(types)),
        ),
        (
            "tokenizer.ggml.merges",
            GgufValue::Array(GgufArray::String(Vec::new())),
        ),
        ("tokenizer.ggml.bos_token_id", GgufValue::U32(bos)),
        ("tokenizer.ggml.eos_token_id", GgufValue::U32(eos)),
        ("tokenizer.ggml.add_bos_token", GgufValue::Bool(false)),
    ]
}

/// Builds the random model of `shape` from `seed` with the weight formats of
/// `weights` ([`ShapeSpec::with_weights`]; `Weights::Real`: the real file's),
/// as a parsed in-memory GGUF named `synthetic-<shape>.gguf`. Allocates about
/// [`ShapeSpec::weight_bytes`].
pub fn generate_with(shape: Shape, seed: u64, weights: Weights) -> Result<GgufModel> {
    let spec = shape.spec().with_weights(weights);
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1);
    let mut w = GgufWriter::new();
    let a = spec.arch;
    let key = |k: &str| format!("{a}.{k}");
    w.kv("general.architecture", GgufValue::String(a.into()));
    w.kv(
        "general.name",
        GgufValue::String(format!(
            "synthetic {} (random weights, seed {seed})",
            spec.name
        )),
    );
    let u = |v: usize| GgufValue::U32(v as u32);
    w.kv(&key("block_count"), u(spec.layers));
    w.kv(&key("context_length"), u(spec.context));
    w.kv(&key("embedding_length"), u(spec.hidden));
    w.kv(&key("feed_forward_length"), u(spec.ffn));
    w.kv(&key("attention.head_count"), u(spec.heads));
    w.kv(&key("attention.head_count_kv"), u(spec.kv_heads));
    w.kv(&key("rope.freq_base"), GgufValue::F32(spec.rope_theta));
    w.kv(
        &key("attention.layer_norm_rms_epsilon"),
        GgufValue::F32(spec.rms_eps),
    );
    w.kv(&key("vocab_size"), u(spec.vocab));
    w.kv(&key("rope.dimension_count"), u(spec.head_dim()));
    for (k, v) in vocabulary(&spec) {
        w.kv(k, v);
    }
    for p in spec.plan() {
        let data = if p.ty == GgmlType::F32 {
            // Norm weights 1, biases small.
            let bias = p.name.ends_with(".bias");
            (0..p.dims[0])
                .flat_map(|_| if bias { 0.02 * rng.sym() } else { 1.0f32 }.to_le_bytes())
                .collect()
        } else {
            random_blocks(p.ty, p.dims[0], p.dims[1], &mut rng)?
        };
        w.tensor(&p.name, &p.dims, p.ty, data)?;
    }
    let name = format!("synthetic-{}.gguf", spec.name);
    GgufModel::parse(ModelBytes::from_vec(w.into_bytes()?), &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_plan_the_real_layouts() {
        assert_eq!(Shape::parse("Qwen2.5-1.5B").unwrap(), Shape::Qwen25_15b);
        assert_eq!(Shape::parse("qwen2.5-7b").unwrap(), Shape::Qwen25_7b);
        let e = Shape::parse("13b").unwrap_err().to_string();
        assert!(e.contains("smollm2-135m") && e.contains("7b"), "{e}");
        // Tensor data of the real files, summed over their GGUF directories
        // (scripts-free: dims x block bytes of each listed tensor).
        let bytes = |s: Shape| s.spec().weight_bytes();
        assert_eq!(bytes(Shape::Smollm2_135m), 96_576_768);
        assert_eq!(bytes(Shape::Qwen25_05b), 485_452_288);
        assert_eq!(bytes(Shape::Qwen25_15b), 1_111_370_240);
        // The 7B: the same sum worked out by hand for Qwen2.5-7B's shape with
        // the 1.5B's Q4_K_M layer mix (its published files are ~4.68 GB).
        assert_eq!(bytes(Shape::Qwen25_7b), 4_677_120_000);
        assert_eq!(
            Shape::Qwen25_15b.spec().formats_summary(),
            "Q4_K, Q6_K, F32"
        );
    }

    #[test]
    fn f16_weights_put_every_matrix_in_f16() {
        assert_eq!(Weights::parse("F16").unwrap(), Weights::F16);
        assert!(Weights::parse("q4").is_err());
        let s = Shape::Smollm2_135m.spec().with_weights(Weights::F16);
        assert_eq!(s.formats_summary(), "F16, F32");
        // 134.5M matrix values (tied embeddings) at 2 bytes, norms in f32.
        let values: u64 = s
            .plan()
            .iter()
            .filter(|p| p.ty == GgmlType::F16)
            .map(|p| p.dims.iter().product::<u64>())
            .sum();
        let norms = (2 * 30 + 1) * 576 * 4;
        assert_eq!(s.weight_bytes(), values * 2 + norms);
        assert_eq!(values, 134_479_872);
        let q = Shape::Qwen25_05b.spec().with_weights(Weights::Bf16);
        assert_eq!(q.formats_summary(), "BF16, F32");
        assert!(q.plan().iter().any(|p| p.name == "output.weight"));
    }

    /// `bench --synthetic SHAPE --weights f16`: every matrix of the shape in
    /// F16 (the 16-bit kernels on a real shape); it loads with F16 matrices and
    /// its forward and logits stay finite and carry the input.
    #[test]
    fn synthetic_f16_model_loads_with_f16_matrices_and_stays_finite() {
        let g = generate_with(Shape::Smollm2_135m, 5, Weights::F16).unwrap();
        let types: Vec<GgmlType> = g.file.tensors.iter().map(|t| t.ggml_type).collect();
        assert_eq!(
            types.iter().filter(|&&t| t == GgmlType::F16).count(),
            1 + 30 * 7
        );
        assert!(types
            .iter()
            .all(|&t| t == GgmlType::F16 || t == GgmlType::F32));
        let mut model = g.transformer().unwrap();
        model.set_threads(2);
        let tokens: Vec<u32> = (0..8).map(|i| 3 + i * 11).collect();
        let hidden = model.forward(&tokens, None).unwrap();
        assert!(hidden.data.iter().all(|v| v.is_finite()));
        assert!(hidden.data[..576] != hidden.data[576..2 * 576]);
        let logits = model.logits_for(&hidden.data[7 * 576..], None).unwrap();
        assert_eq!(logits.len(), 49152);
        assert!(logits.iter().all(|v| v.is_finite()));
    }
}
