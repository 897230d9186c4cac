//! The decoder forward pass against an independent float64 numpy reference
//! (scripts/reference/model_reference.py), on tiny checkpoints with the real HF layouts:
//! Qwen2 (biases, untied, F32, sharded), Llama (tied, BF16, llama3 rope
//! scaling), Mistral (F16, sliding window 4) and Qwen3 (per-head q/k norms,
//! a head width apart from hidden / heads, tied, BF16) and Gemma 3 (norms
//! stored as gain - 1, post-attention and post-MLP norms, GELU, scaled
//! embeddings, local layers with their own window and RoPE base around a
//! global one, scores scaled by query_pre_attn_scalar), the last two also
//! from GGUF files written with llama.cpp's tensor names and metadata keys.
//!
//! Tolerance: |rust - numpy| <= 1e-4 * max(1, |numpy|). The reference runs in
//! float64 on exactly the stored weights, so the gap is only our f32
//! arithmetic; the tied Llama logits reach ~38, hence the relative part.

use std::collections::BTreeMap;
use std::path::PathBuf;
use stepscore::engine::{HfCheckpoint, Layer, LmHead, Matrix, RopeStyle, Transformer};

const TOL: f32 = 1e-4;
const FIXTURES: [&str; 5] = [
    "qwen2-tiny-f32-sharded",
    "llama-tiny-bf16",
    "mistral-tiny-f16",
    "qwen3-tiny-bf16",
    "gemma3-tiny-bf16",
];

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
}

struct Case {
    tokens: Vec<u32>,
    hidden: Vec<f32>,
    logits: Vec<f32>,
}

fn reference(name: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(fixture_dir(name).join("reference.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let floats = |x: &serde_json::Value| -> Vec<f32> {
        x.as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_f64().unwrap() as f32)
            .collect()
    };
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            tokens: c["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect(),
            hidden: floats(&c["hidden"]),
            logits: floats(&c["logits"]),
        })
        .collect()
}

/// Asserts every |got - want| / max(1, |want|) <= tol; returns the largest
/// absolute difference (what the parity table in README reports).
fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = (0.0f32, 0usize);
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let err = (a - b).abs() / b.abs().max(1.0);
        if err > worst.0 || err.is_nan() {
            worst = (err, i);
        }
    }
    assert!(
        worst.0 <= tol,
        "{what}: worst relative error {} at {} (got {}, want {})",
        worst.0,
        worst.1,
        got[worst.1],
        want[worst.1]
    );
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// Absolute comparison, for results that differ only by evaluation order.
fn assert_abs(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let worst = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= tol, "{what}: max abs error {worst} > {tol}");
}

fn load(name: &str) -> Transformer {
    HfCheckpoint::open_dir(fixture_dir(name))
        .unwrap()
        .transformer()
        .unwrap()
}

#[test]
fn hidden_states_and_logits_match_numpy() {
    for name in FIXTURES {
        let model = load(name);
        let mut worst = 0.0f32;
        for case in reference(name) {
            let what = format!("{name} tokens {:?}", case.tokens);
            let hidden = model.forward(&case.tokens, None).unwrap();
            assert_eq!(hidden.n_tokens, case.tokens.len());
            assert_close(&format!("{what} hidden"), &hidden.data, &case.hidden, TOL);
            let logits = model.logits_for(&hidden.data, None).unwrap();
            worst = worst.max(assert_close(
                &format!("{what} logits"),
                &logits,
                &case.logits,
                TOL,
            ));
        }
        eprintln!("{name}: CPU logits vs float64 numpy, max |Δ| {worst:.2e}");
    }
}

#[test]
fn logits_for_a_subset_of_rows_picks_those_columns() {
    let model = load("qwen2-tiny-f32-sharded");
    let case = &reference("qwen2-tiny-f32-sharded")[1];
    let hidden = model.forward(&case.tokens, None).unwrap();
    let rows = [299u32, 0, 42];
    let sub = model.logits_for(&hidden.data, Some(&rows)).unwrap();
    let vocab = model.config().vocab_size;
    let want: Vec<f32> = (0..case.tokens.len())
        .flat_map(|t| rows.iter().map(move |&r| (t, r)))
        .map(|(t, r)| case.logits[t * vocab + r as usize])
        .collect();
    assert_close("subset logits", &sub, &want, TOL);
    // A single hidden row works too (the LM-head PRM path).
    let one = model
        .logits_for(hidden.row(3).unwrap(), Some(&rows[..2]))
        .unwrap();
    assert_close(
        "one row",
        &one,
        &[case.logits[3 * vocab + 299], case.logits[3 * vocab]],
        TOL,
    );
}

#[test]
fn incremental_forward_with_cache_matches_full_forward() {
    for name in FIXTURES {
        let model = load(name);
        for case in reference(name).into_iter().filter(|c| c.tokens.len() >= 2) {
            let full = model.forward(&case.tokens, None).unwrap();
            let h = full.width;
            for split in [1, case.tokens.len() / 2, case.tokens.len() - 1] {
                let mut cache = model.new_cache();
                let a = model
                    .forward(&case.tokens[..split], Some(&mut cache))
                    .unwrap();
                assert_eq!(cache.len(), split);
                let b = model
                    .forward(&case.tokens[split..], Some(&mut cache))
                    .unwrap();
                assert_eq!(cache.len(), case.tokens.len());
                let joined: Vec<f32> = a.data.iter().chain(&b.data).copied().collect();
                assert_abs(&format!("{name} split {split}"), &joined, &full.data, 1e-5);

                // Rewind to the prefix and continue differently, then back.
                cache.truncate(split);
                let other: Vec<u32> = case.tokens[split..].iter().map(|t| (t + 1) % 300).collect();
                model.forward(&other, Some(&mut cache)).unwrap();
                cache.truncate(split);
                let again = model
                    .forward(&case.tokens[split..], Some(&mut cache))
                    .unwrap();
                assert_abs(
                    &format!("{name} rewind {split}"),
                    &again.data,
                    &full.data[split * h..],
                    1e-5,
                );
            }
            // Token by token.
            let mut cache = model.new_cache();
            for (t, &tok) in case.tokens.iter().enumerate() {
                let r = model.forward(&[tok], Some(&mut cache)).unwrap();
                assert_abs(
                    &format!("{name} step {t}"),
                    &r.data,
                    &full.data[t * h..(t + 1) * h],
                    1e-5,
                );
            }
        }
    }
}

#[test]
fn thread_count_does_not_change_results() {
    let mut model = load("mistral-tiny-f16");
    let case = &reference("mistral-tiny-f16")[3];
    model.set_threads(1);
    let one = model.forward(&case.tokens, None).unwrap();
    model.set_threads(3);
    let three = model.forward(&case.tokens, None).unwrap();
    assert_eq!(one, three);
    // Decode steps: one query, its heads split over the threads.
    let steps = |model: &Transformer| -> Vec<u32> {
        let mut cache = model.new_cache();
        let mut bits = Vec::new();
        for &tok in &case.tokens {
            let r = model.forward(&[tok], Some(&mut cache)).unwrap();
            bits.extend(r.data.iter().map(|v| v.to_bits()));
        }
        bits
    };
    let three = steps(&model);
    model.set_threads(1);
    assert_eq!(steps(&model), three);
}

#[test]
fn from_bytes_matches_open_dir() {
    let name = "qwen2-tiny-f32-sharded";
    let files = files_of(name);
    let model = HfCheckpoint::from_bytes(files)
        .unwrap()
        .transformer()
        .unwrap();
    let case = &reference(name)[0];
    let hidden = model.forward(&case.tokens, None).unwrap();
    assert_close("from_bytes", &hidden.data, &case.hidden, TOL);
}

#[test]
fn extra_tensors_are_kept_and_fetchable() {
    let ckpt = HfCheckpoint::open_dir(fixture_dir("qwen2-tiny-f32-sharded")).unwrap();
    assert_eq!(
        ckpt.config().architectures,
        vec!["Qwen2ForCausalLM".to_string()]
    );
    let head = ckpt.tensor_f32("v_head.summary.weight").unwrap();
    assert_eq!(head.shape, vec![1, 64]);
    assert!(head.data.iter().any(|&x| x != 0.0));
    assert!(ckpt.tensor_names().any(|n| n == "lm_head.weight"));
    let err = ckpt.tensor_f32("score.0.weight").unwrap_err().to_string();
    assert!(err.contains("score.0.weight"), "{err}");
}

/// llama.cpp's converter permutes each head's q/k rows so that HF pair
/// (i, i + d/2) lands on (2i, 2i + 1); RoPE on adjacent pairs over permuted
/// weights must then equal rotate_half RoPE over the originals. This is the
/// contract the GGUF loader relies on, checked with hand-built layers.
#[test]
fn adjacent_pair_rope_on_permuted_weights_equals_half_split() {
    let name = "qwen2-tiny-f32-sharded";
    let ckpt = HfCheckpoint::open_dir(fixture_dir(name)).unwrap();
    let c = ckpt.config().clone();
    let (h, hd) = (c.hidden_size, c.head_dim);
    let t = |n: &str| ckpt.tensor_f32(n).unwrap().data;
    // New row 2i takes old row i, new row 2i+1 takes old row i + hd/2, per head.
    let permute_rows = |data: Vec<f32>, heads: usize, cols: usize| -> Vec<f32> {
        let mut out = vec![0.0; data.len()];
        for head in 0..heads {
            for i in 0..hd / 2 {
                for (dst, src) in [(2 * i, i), (2 * i + 1, i + hd / 2)] {
                    let (d, s) = ((head * hd + dst) * cols, (head * hd + src) * cols);
                    out[d..d + cols].copy_from_slice(&data[s..s + cols]);
                }
            }
        }
        out
    };
    let m = |d: Vec<f32>, r: usize, cc: usize| Matrix::from_f32(r, cc, d).unwrap();
    let layers: Vec<Layer> = (0..c.n_layers)
        .map(|i| {
            let p = |s: &str| format!("model.layers.{i}.{s}");
            Layer {
                attn_norm: t(&p("input_layernorm.weight")),
                q: m(
                    permute_rows(t(&p("self_attn.q_proj.weight")), c.n_heads, h),
                    c.q_dim(),
                    h,
                ),
                k: m(
                    permute_rows(t(&p("self_attn.k_proj.weight")), c.n_kv_heads, h),
                    c.kv_dim(),
                    h,
                ),
                v: m(t(&p("self_attn.v_proj.weight")), c.kv_dim(), h),
                o: m(t(&p("self_attn.o_proj.weight")), h, c.q_dim()),
                q_bias: Some(permute_rows(t(&p("self_attn.q_proj.bias")), c.n_heads, 1)),
                k_bias: Some(permute_rows(
                    t(&p("self_attn.k_proj.bias")),
                    c.n_kv_heads,
                    1,
                )),
                v_bias: Some(t(&p("self_attn.v_proj.bias"))),
                o_bias: None,
                q_norm: None,
                k_norm: None,
                post_attn_norm: None,
                mlp_norm: t(&p("post_attention_layernorm.weight")),
                post_mlp_norm: None,
                gate: m(t(&p("mlp.gate_proj.weight")), c.intermediate_size, h),
                up: m(t(&p("mlp.up_proj.weight")), c.intermediate_size, h),
                down: m(t(&p("mlp.down_proj.weight")), h, c.intermediate_size),
            }
        })
        .collect();
    let embed = m(t("model.embed_tokens.weight"), c.vocab_size, h);
    let head = LmHead::Separate(m(t("lm_head.weight"), c.vocab_size, h));
    let norm = t("model.norm.weight");
    let permuted = Transformer::new(
        c.clone(),
        RopeStyle::AdjacentPairs,
        embed.clone(),
        layers.clone(),
        norm.clone(),
        head.clone(),
    )
    .unwrap();
    let case = &reference(name)[3];
    let hidden = permuted.forward(&case.tokens, None).unwrap();
    assert_close("adjacent rope", &hidden.data, &case.hidden, TOL);

    // The check has teeth: the same permuted weights under rotate_half differ.
    let wrong = Transformer::new(c, RopeStyle::HalfSplit, embed, layers, norm, head).unwrap();
    let bad = wrong.forward(&case.tokens, None).unwrap();
    let max_diff = bad
        .data
        .iter()
        .zip(&case.hidden)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        max_diff > 1e-2,
        "rope style made no difference ({max_diff})"
    );
}

fn files_of(name: &str) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(fixture_dir(name))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn with_config_edit(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Transformer {
    let mut files = files_of(name);
    let mut cfg: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
    edit(&mut cfg);
    files.insert("config.json".into(), serde_json::to_vec(&cfg).unwrap());
    HfCheckpoint::from_bytes(files)
        .unwrap()
        .transformer()
        .unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// The fixtures exercise what they claim: dropping Mistral's sliding window or
/// Llama's llama3 rope scaling moves the long sequence far outside tolerance.
#[test]
fn sliding_window_and_rope_scaling_are_exercised() {
    let long = &reference("mistral-tiny-f16")[3];
    let no_window = with_config_edit("mistral-tiny-f16", |c| {
        c["sliding_window"] = serde_json::Value::Null
    });
    let h = no_window.forward(&long.tokens, None).unwrap();
    // The first 4 positions see at most 4 keys either way, so they agree.
    let w = h.width;
    assert_close(
        "window prefix",
        &h.data[..4 * w],
        &long.hidden[..4 * w],
        TOL,
    );
    assert!(max_abs_diff(&h.data, &long.hidden) > 1e-2);

    let long = &reference("llama-tiny-bf16")[3];
    let plain = with_config_edit("llama-tiny-bf16", |c| {
        c["rope_scaling"] = serde_json::Value::Null
    });
    let h = plain.forward(&long.tokens, None).unwrap();
    assert!(max_abs_diff(&h.data, &long.hidden) > 1e-2);
}

#[test]
fn untied_checkpoint_without_lm_head_gives_hidden_states_only() {
    // Llama fixture has no lm_head.weight; claiming untied embeddings leaves
    // the model without a vocabulary projection (like Qwen2ForProcessRewardModel).
    let model = with_config_edit("llama-tiny-bf16", |c| {
        c["tie_word_embeddings"] = false.into()
    });
    assert!(!model.has_lm_head());
    let case = &reference("llama-tiny-bf16")[0];
    let hidden = model.forward(&case.tokens, None).unwrap();
    assert_close("hidden without head", &hidden.data, &case.hidden, TOL);
    let err = model
        .logits_for(&hidden.data, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lm_head"), "{err}");
}

/// A GGUF file of `ckpt`'s weights as llama.cpp's converter writes them
/// for `arch`: its metadata keys (plus `extra`), F32 tensors under its
/// names (`blocks`: GGUF name, HF name per layer), norms with
/// `norm_offset` added (Gemma's converter adds the 1 its RMSNorm applies).
fn write_gguf(
    ckpt: &HfCheckpoint,
    arch: &str,
    extra: Vec<(String, stepscore::engine::GgufValue)>,
    blocks: &[(&str, &str)],
    norm_offset: f32,
) -> Vec<u8> {
    use stepscore::engine::testing::GgufWriter;
    use stepscore::engine::{GgmlType, GgufValue};
    let c = ckpt.config();
    let mut w = GgufWriter::new();
    let u = |v: usize| GgufValue::U32(v as u32);
    let k = |s: &str| format!("{arch}.{s}");
    w.kv("general.architecture", GgufValue::String(arch.into()))
        .kv(&k("embedding_length"), u(c.hidden_size))
        .kv(&k("feed_forward_length"), u(c.intermediate_size))
        .kv(&k("block_count"), u(c.n_layers))
        .kv(&k("attention.head_count"), u(c.n_heads))
        .kv(&k("attention.head_count_kv"), u(c.n_kv_heads))
        .kv(&k("attention.key_length"), u(c.head_dim))
        .kv(&k("attention.value_length"), u(c.head_dim))
        .kv(&k("rope.dimension_count"), u(c.head_dim))
        .kv(&k("context_length"), u(c.max_position_embeddings))
        .kv(&k("vocab_size"), u(c.vocab_size))
        .kv(&k("rope.freq_base"), GgufValue::F32(c.rope_theta as f32))
        .kv(
            &k("attention.layer_norm_rms_epsilon"),
            GgufValue::F32(c.rms_norm_eps),
        );
    for (key, v) in extra {
        w.kv(&key, v);
    }
    let mut put = |gguf_name: &str, hf_name: &str| {
        let t = ckpt.tensor_f32(hf_name).unwrap();
        let offset = if hf_name.contains("norm") {
            norm_offset
        } else {
            0.0
        };
        let dims: Vec<u64> = t.shape.iter().rev().map(|&d| d as u64).collect();
        let bytes = t
            .data
            .iter()
            .flat_map(|x| (x + offset).to_le_bytes())
            .collect();
        w.tensor(gguf_name, &dims, GgmlType::F32, bytes).unwrap();
    };
    put("token_embd.weight", "model.embed_tokens.weight");
    put("output_norm.weight", "model.norm.weight");
    for i in 0..c.n_layers {
        for (g, h) in blocks {
            put(
                &format!("blk.{i}.{g}.weight"),
                &format!("model.layers.{i}.{h}.weight"),
            );
        }
    }
    w.into_bytes().unwrap()
}

fn parse_gguf(bytes: Vec<u8>, file: &str) -> Result<Transformer, String> {
    use stepscore::engine::ModelBytes;
    stepscore::engine::GgufModel::parse(ModelBytes::from_vec(bytes), file)
        .and_then(|m| m.transformer())
        .map_err(|e| e.to_string())
}

/// The Llama block's tensors, GGUF name and HF name.
const LLAMA_BLOCK: [(&str, &str); 9] = [
    ("attn_norm", "input_layernorm"),
    ("attn_q", "self_attn.q_proj"),
    ("attn_k", "self_attn.k_proj"),
    ("attn_v", "self_attn.v_proj"),
    ("attn_output", "self_attn.o_proj"),
    ("ffn_norm", "post_attention_layernorm"),
    ("ffn_gate", "mlp.gate_proj"),
    ("ffn_up", "mlp.up_proj"),
    ("ffn_down", "mlp.down_proj"),
];
const QK_NORMS: [(&str, &str); 2] = [
    ("attn_q_norm", "self_attn.q_norm"),
    ("attn_k_norm", "self_attn.k_norm"),
];

/// Qwen3 from GGUF (arch `qwen3`, `attention.key_length` as the head width,
/// `attn_q_norm` / `attn_k_norm`, NEOX rotation without a permutation, as
/// llama.cpp's converter writes it) gives the bits of the same weights read
/// from safetensors; a file without the q/k norms is refused by name.
#[test]
fn qwen3_from_gguf_equals_its_safetensors() {
    let name = "qwen3-tiny-bf16";
    let ckpt = HfCheckpoint::open_dir(fixture_dir(name)).unwrap();
    let c = ckpt.config().clone();
    assert!(c.has_qk_norm() && c.q_dim() != c.hidden_size, "{c:?}");
    let with_norms: Vec<_> = LLAMA_BLOCK.iter().chain(&QK_NORMS).copied().collect();
    let from_gguf = parse_gguf(
        write_gguf(&ckpt, "qwen3", vec![], &with_norms, 0.0),
        "qwen3.gguf",
    )
    .unwrap();
    assert_eq!(from_gguf.rope_style(), RopeStyle::HalfSplit);
    assert_eq!(from_gguf.config().head_dim, c.head_dim);
    let from_hf = load(name);
    for case in reference(name) {
        let a = from_gguf.forward(&case.tokens, None).unwrap();
        let b = from_hf.forward(&case.tokens, None).unwrap();
        assert_eq!(a.data, b.data, "tokens {:?}", case.tokens);
        let logits = from_gguf.logits_for(&a.data, None).unwrap();
        assert_close("qwen3 GGUF logits", &logits, &case.logits, TOL);
    }
    let e = parse_gguf(
        write_gguf(&ckpt, "qwen3", vec![], &LLAMA_BLOCK, 0.0),
        "qwen3.gguf",
    )
    .unwrap_err();
    assert!(
        e.contains("blk.0.attn_q_norm.weight") && e.contains("qwen3.gguf"),
        "{e}"
    );
}

/// Gemma 3 from GGUF as llama.cpp's converter writes it (arch `gemma3`,
/// norms with the 1 added, `post_attention_norm` / `post_ffw_norm`, the
/// local layers as a flag array, `rope.freq_base_swa`) gives the bits of
/// the safetensors checkpoint. GGUF has no `query_pre_attn_scalar`:
/// llama.cpp scales by the head width (27B aside), so the comparison is
/// with the checkpoint's config saying the same; the fixture's own value
/// (20, apart from its head width 24) is checked against numpy above.
#[test]
fn gemma3_from_gguf_equals_its_safetensors() {
    use stepscore::engine::{GgufArray, GgufValue};
    let name = "gemma3-tiny-bf16";
    let ckpt = HfCheckpoint::open_dir(fixture_dir(name)).unwrap();
    let c = ckpt.config().clone();
    assert_eq!(c.local_layers, [true, false, true]);
    assert_ne!(c.query_pre_attn_scalar, c.head_dim);
    let blocks = [
        ("attn_norm", "input_layernorm"),
        ("attn_q", "self_attn.q_proj"),
        ("attn_k", "self_attn.k_proj"),
        ("attn_v", "self_attn.v_proj"),
        ("attn_output", "self_attn.o_proj"),
        ("attn_q_norm", "self_attn.q_norm"),
        ("attn_k_norm", "self_attn.k_norm"),
        ("post_attention_norm", "post_attention_layernorm"),
        ("ffn_norm", "pre_feedforward_layernorm"),
        ("ffn_gate", "mlp.gate_proj"),
        ("ffn_up", "mlp.up_proj"),
        ("ffn_down", "mlp.down_proj"),
        ("post_ffw_norm", "post_feedforward_layernorm"),
    ];
    let extra = |pattern: GgufValue| {
        vec![
            (
                "gemma3.attention.sliding_window".to_string(),
                GgufValue::U32(4),
            ),
            (
                "gemma3.attention.sliding_window_pattern".to_string(),
                pattern,
            ),
            (
                "gemma3.rope.freq_base_swa".to_string(),
                GgufValue::F32(10_000.0),
            ),
        ]
    };
    let flags = GgufValue::Array(GgufArray::Bool(c.local_layers.clone()));
    let from_gguf = parse_gguf(
        write_gguf(&ckpt, "gemma3", extra(flags), &blocks, 1.0),
        "gemma3.gguf",
    )
    .unwrap();
    let g = from_gguf.config();
    assert_eq!(
        (
            g.local_layers.as_slice(),
            g.sliding_window,
            g.rope_local_theta,
            g.query_pre_attn_scalar
        ),
        (
            c.local_layers.as_slice(),
            Some(4),
            Some(10_000.0),
            c.head_dim
        )
    );
    // The same checkpoint, its config scaling by the head width.
    let dir = std::env::temp_dir().join(format!("stepscore-gemma3-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(fixture_dir(name).join("config.json")).unwrap();
    let mut cfg: serde_json::Value = serde_json::from_str(&text).unwrap();
    cfg["query_pre_attn_scalar"] = c.head_dim.into();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    std::fs::copy(
        fixture_dir(name).join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    let from_hf = HfCheckpoint::open_dir(&dir).and_then(|m| m.transformer());
    std::fs::remove_dir_all(&dir).unwrap();
    let from_hf = from_hf.unwrap();
    for case in reference(name) {
        let a = from_gguf.forward(&case.tokens, None).unwrap();
        let b = from_hf.forward(&case.tokens, None).unwrap();
        assert_eq!(a.data, b.data, "tokens {:?}", case.tokens);
    }
    // llama.cpp's default pattern: every 6th layer global (none of three here).
    let plain = parse_gguf(
        write_gguf(&ckpt, "gemma3", extra(GgufValue::U32(6)), &blocks, 1.0),
        "gemma3.gguf",
    )
    .unwrap();
    assert_eq!(plain.config().local_layers, [true, true, true]);
    let short = GgufValue::Array(GgufArray::Bool(vec![true]));
    let e = parse_gguf(
        write_gguf(&ckpt, "gemma3", extra(short), &blocks, 1.0),
        "gemma3.gguf",
    )
    .unwrap_err();
    assert!(
        e.contains("sliding_window_pattern") && e.contains("1 flags for 3 layers"),
        "{e}"
    );
    let e = parse_gguf(
        write_gguf(&ckpt, "gemma3", extra(GgufValue::U32(6)), &LLAMA_BLOCK, 1.0),
        "gemma3.gguf",
    )
    .unwrap_err();
    assert!(e.contains("blk.0.attn_q_norm.weight"), "{e}");
}
