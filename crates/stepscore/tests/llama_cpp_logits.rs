//! Catalog GGUFs against llama.cpp and against exact arithmetic, as
//! tests/llama_cpp_golden.rs does for SmolLM2: Qwen2.5-Coder-0.5B
//! (Q5_0/Q8_0/Q6_K/Q4_K) and -1.5B (Q4_K_M), and Gemma 3 270M (Q4_K_M with
//! Q5_0/Q8_0/Q6_K; local and global layers, a 262,144-token vocabulary).
//! Reference values: scripts/reference/llama_cpp_logits_reference.py (llama-cpp-python
//! 0.3.36 from its sdist, f32 KV cache; its own f16-KV run recorded per
//! prompt) and, for the Qwen models, scripts/reference/gguf_exact_reference.py
//! (float64 numpy on weights dequantized by gguf-py), committed under
//! tests/fixtures/llama_cpp/NAME/. A row is 151,936 (262,144) logits,
//! so the fixtures keep, at each prompt's last position, every 37th logit
//! (an unbiased sample of the vocabulary) and the top 64, and the top-5 ids
//! at every position.
//!
//! - quantized path (what `stepscore score` runs) vs llama.cpp: the engines
//!   may not differ by more than llama.cpp differs from itself when only its
//!   KV cache precision changes (f16 vs f32), measured on the same ids: max
//!   |Δ| ≤ 1.25× llama.cpp's own largest, mean |Δ| ≤ 1.5× its own mean, top-1
//!   agreement at ≥ 95% of all positions. Measured when written: 0.5B max
//!   0.415 vs 0.385, mean 0.068 vs 0.056, top-1 303/308; 1.5B max 0.495 vs
//!   0.515, mean 0.096 vs 0.085, top-1 306/308. Both engines quantize activations
//!   the same way (ggml's scheme), so what is left is summation order and
//!   attention arithmetic, which is what the KV-precision change also moves.
//!   Gemma's GELU is one more: ggml looks it up in a table of f16 inputs and
//!   outputs, stepscore computes it in f32.
//! - exact path: the engine's f32 forward on the dequantized weights equals
//!   the float64 reference within 1e-3 per logit on the committed ids
//!   (measured when written: 1.1e-5, f32 rounding over 24 layers), with the
//!   same top-5 ids over the whole vocabulary.
//!
//! The 0.5B and Gemma 3 270M run in CI (`scripts/test.sh` fetches them into
//! the cache); the 1.5B is too slow for the dev profile on 2 cores and runs
//! from scripts/test/qwen2-parity-1.5b.sh. Without the model file the tests print
//! why and pass without checking.

use crate::llama_cpp_support;

use std::path::PathBuf;

use llama_cpp_support::{top5, Spread};

use serde::Deserialize;
use stepscore::engine::{GgufModel, ModelBytes, Tokenizer, Transformer};
use stepscore::testing::find_catalog_model;

#[derive(Deserialize)]
struct Reference {
    n_vocab: usize,
    stride: usize,
    prompts: Vec<Prompt>,
}

#[derive(Deserialize)]
struct Prompt {
    text: String,
    /// Tokenized with the model's BOS (Gemma); absent in older fixtures.
    #[serde(default)]
    add_bos: bool,
    kv_f16_strided_max_abs_diff: f32,
    kv_f16_strided_mean_abs_diff: f32,
    kv_f16_top_max_abs_diff: f32,
    tokens: Vec<u32>,
    top5_ids: Vec<Vec<u32>>,
    last_top_ids: Vec<u32>,
    last_top_logits: Vec<f32>,
}

#[derive(Deserialize)]
struct Exact {
    stride: usize,
    prompts: Vec<ExactPrompt>,
}

#[derive(Deserialize)]
struct ExactPrompt {
    top_ids: Vec<u32>,
    top_logits: Vec<f32>,
}

fn fixtures(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/llama_cpp")
        .join(name)
}

fn read_f32(name: &str, file: &str) -> Vec<f32> {
    llama_cpp_support::read_f32(&fixtures(name).join(file))
}

fn reference(name: &str) -> (Reference, Vec<f32>) {
    let text = std::fs::read_to_string(fixtures(name).join("prompts.json")).unwrap();
    let r: Reference = serde_json::from_str(&text).unwrap();
    let strided = read_f32(name, "last_strided.f32");
    assert_eq!(
        strided.len(),
        r.prompts.len() * r.n_vocab.div_ceil(r.stride)
    );
    (r, strided)
}

fn load(name: &str) -> Option<GgufModel> {
    let Some(path) = find_catalog_model(name) else {
        eprintln!("SKIPPED: {name} not cached (run `stepscore fetch {name}`)");
        return None;
    };
    Some(GgufModel::parse(ModelBytes::open(&path).expect("open model"), name).expect("parse GGUF"))
}

/// Largest and mean |a - b| over the strided ids, and largest over `top`.
fn distances(
    row: &[f32],
    stride: usize,
    strided: &[f32],
    top: &[u32],
    top_want: &[f32],
) -> (f32, f32, f32) {
    let d: Vec<f32> = row
        .iter()
        .step_by(stride)
        .zip(strided)
        .map(|(a, b)| (a - b).abs())
        .collect();
    assert_eq!(d.len(), strided.len());
    let max = d.iter().copied().fold(0.0f32, f32::max);
    let mean = d.iter().sum::<f32>() / d.len() as f32;
    let top_max = top
        .iter()
        .zip(top_want)
        .map(|(&i, b)| (row[i as usize] - b).abs())
        .fold(0.0f32, f32::max);
    (max, mean, top_max)
}

fn quantized_path_check(name: &str) {
    let Some(gguf) = load(name) else { return };
    let tok = Tokenizer::from_gguf(&gguf.file).expect("tokenizer");
    let mut model: Transformer = gguf.transformer().expect("build transformer");
    model.set_threads(2);
    let (reference, strided) = reference(name);
    let vocab = reference.n_vocab;
    let per_prompt = vocab.div_ceil(reference.stride);
    let mut spread = Spread::default();
    let n = reference.prompts.len() as f32;
    for (k, p) in reference.prompts.iter().enumerate() {
        assert_eq!(
            tok.encode(&p.text, p.add_bos).unwrap(),
            p.tokens,
            "tokens of {:?}",
            p.text
        );
        let hidden = model.forward(&p.tokens, None).expect("forward");
        let logits = model.logits_for(&hidden.data, None).expect("logits");
        assert_eq!(logits.len(), p.tokens.len() * vocab);
        let last = &logits[(p.tokens.len() - 1) * vocab..];
        let (max, mean, top_max) = distances(
            last,
            reference.stride,
            &strided[k * per_prompt..(k + 1) * per_prompt],
            &p.last_top_ids,
            &p.last_top_logits,
        );
        let top1 = (0..p.tokens.len())
            .filter(|&t| top5(&logits[t * vocab..(t + 1) * vocab])[0] == p.top5_ids[t][0])
            .count();
        let theirs = p.kv_f16_strided_max_abs_diff.max(p.kv_f16_top_max_abs_diff);
        eprintln!(
            "{name} prompt {k} ({} tokens): max |Δ| {:.3} (llama.cpp f16/f32 KV: {theirs:.3}), \
             mean |Δ| {mean:.4} ({:.4}), top-64 max {top_max:.3}, top-1 {top1}/{}",
            p.tokens.len(),
            max.max(top_max),
            p.kv_f16_strided_mean_abs_diff,
            p.tokens.len()
        );
        spread.our_max = spread.our_max.max(max.max(top_max));
        spread.their_max = spread.their_max.max(theirs);
        spread.our_mean += mean / n;
        spread.their_mean += p.kv_f16_strided_mean_abs_diff / n;
        spread.agree += top1;
        spread.positions += p.tokens.len();
    }
    spread.assert_within_llama_cpp_own(name);
}

#[test]
fn qwen25_coder_05b_quantized_path_is_as_close_to_llama_cpp_as_llama_cpp_is_to_itself() {
    quantized_path_check("qwen2.5-coder-0.5b");
}

#[test]
#[ignore = "1.5B: minutes on 2 cores; run scripts/test/qwen2-parity-1.5b.sh"]
fn qwen25_coder_15b_quantized_path_is_as_close_to_llama_cpp_as_llama_cpp_is_to_itself() {
    quantized_path_check("qwen2.5-coder-1.5b");
}

#[test]
fn gemma3_270m_quantized_path_is_as_close_to_llama_cpp_as_llama_cpp_is_to_itself() {
    quantized_path_check("gemma-3-270m");
}

#[test]
fn qwen25_coder_05b_exact_path_matches_float64_reference() {
    let name = "qwen2.5-coder-0.5b";
    let Some(gguf) = load(name) else { return };
    let mut model = gguf
        .transformer()
        .expect("build transformer")
        .dequantized()
        .expect("dequantize");
    model.set_threads(2);
    let (reference, _) = reference(name);
    let exact: Exact =
        serde_json::from_str(&std::fs::read_to_string(fixtures(name).join("exact.json")).unwrap())
            .unwrap();
    let strided = read_f32(name, "exact_last_strided.f32");
    let per_prompt = reference.n_vocab.div_ceil(exact.stride);
    assert_eq!(strided.len(), exact.prompts.len() * per_prompt);
    for (k, want) in exact.prompts.iter().enumerate() {
        let p = &reference.prompts[k];
        let hidden = model.forward(&p.tokens, None).expect("forward");
        let got = model
            .logits_for(hidden.row(p.tokens.len() - 1).unwrap(), None)
            .expect("logits");
        let (max, mean, top_max) = distances(
            &got,
            exact.stride,
            &strided[k * per_prompt..(k + 1) * per_prompt],
            &want.top_ids,
            &want.top_logits,
        );
        eprintln!(
            "prompt {k}: exact-path max |Δ| {:.2e} (mean {mean:.2e}, top-64 {top_max:.2e})",
            max.max(top_max)
        );
        assert!(
            max.max(top_max) <= 1e-3,
            "prompt {k}: max |Δlogit| {} against the float64 reference",
            max.max(top_max)
        );
        assert_eq!(top5(&got), want.top_ids[..5], "prompt {k}: top-5");
    }
}
