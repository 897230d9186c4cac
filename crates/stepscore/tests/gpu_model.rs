//! Whole-model parity of the WGSL engine (`GpuTransformer`) with the CPU
//! engine, on whatever adapter wgpu finds (Mesa's llvmpipe in CI).
//!
//! The reference is the CPU engine on the same quantized weights: both
//! engines round each quantized matmul's input to 8 bits per block as
//! llama.cpp does (Q8_0/Q8_1 for the 32-element formats, Q8_K for K-quants),
//! sum exact integer block products, and take every float step in one
//! order (quant/portable.rs, cpu/forward.rs and cpu/attention.rs, one e^x in quant/exp.rs
//! and shaders/exp.wgsl). On llvmpipe, which rounds each WGSL product and
//! sum on its own (it lowers fma to a multiply and an add) and divides and
//! takes square roots exactly, the engines must then agree bit for bit:
//! SmolLM2-135M Q4_1 (30 layers, 64 tokens) and Qwen2.5-Coder-0.5B (24
//! layers, Q5_0/Q8_0/Q6_K/Q4_K, 24 tokens), final hidden states and the
//! logits of every position over the whole vocabulary. A driver that fuses
//! or approximates may round differently, and one 8-bit rounding moved
//! changes later ones, so elsewhere the bounds are those of independent
//! roundings: hidden states |Δ| ≤ 5e-2 · (1 + |ref|), logits |Δ| ≤ 0.5, the
//! same top-1 token. Tiny decoders (f32 weights, f32 activations, the GPU's
//! own summation order): 1e-5 (measured ≤ 9.2e-6). A forward continued from
//! a cache equals the full forward within 1e-4 (measured: bit-identical).

#[cfg(feature = "gpu")]
use crate::gpu_support;

#[cfg(feature = "gpu")]
mod gpu {
    use std::path::Path;
    use std::sync::Arc;

    use super::gpu_support::{arc_ctx, have_adapter, max_rel};
    use stepscore::engine::{
        GgufModel, GpuContext, GpuOptions, GpuTransformer, HfCheckpoint, ModelBytes, Tokenizer,
        Transformer,
    };
    use stepscore::testing::{find_catalog_model, find_smollm2_gguf};

    fn max_abs(a: &[f32], b: &[f32]) -> f64 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(&x, &y)| (x as f64 - y as f64).abs())
            .fold(0.0, f64::max)
    }

    fn top5(logits: &[f32]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        idx.truncate(5);
        idx
    }

    const QWEN_05B: &str = "qwen2.5-coder-0.5b";

    const PROMPT: &str = "Natalia sold clips to 48 of her friends in April, and then she sold half as many \
        clips in May. How many clips did Natalia sell altogether in April and May? Step 1: In May she \
        sold 48 / 2 = 24 clips. Step 2: Altogether she sold 48 + 24 = 72 clips.";

    /// The GPU engine against the CPU engine, both on a checkpoint's own
    /// quantized weights, over the first
    /// `n_tokens` tokens of PROMPT: final hidden states, the logits of every
    /// position over the whole vocabulary, and the top-5 at every position
    /// (tolerances in the file's header).
    fn whole_model_parity(ctx: &Arc<GpuContext>, path: &Path, name: &str, n_tokens: usize) {
        let gguf = GgufModel::parse(ModelBytes::open(path).unwrap(), name).unwrap();
        let tok = Tokenizer::from_gguf(&gguf.file).unwrap();
        let mut model = gguf.transformer().unwrap();
        model.set_threads(2);
        let mut tokens = tok.encode(PROMPT, true).unwrap();
        assert!(
            tokens.len() >= n_tokens,
            "prompt too short: {}",
            tokens.len()
        );
        tokens.truncate(n_tokens);

        let want = model.forward(&tokens, None).unwrap();
        let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
        let reference = model;
        let hidden = gm.forward_gpu(&tokens, None).unwrap();
        let got = hidden.to_hidden(ctx).unwrap();
        assert_eq!((got.n_tokens, got.width), (want.n_tokens, want.width));
        let exact = ctx.adapter().name.to_ascii_lowercase().contains("llvmpipe");
        let e = max_rel(&got.data, &want.data);
        eprintln!("{name} hidden states, {n_tokens} tokens: max |Δ|/(1+|ref|) = {e:.2e}");
        if exact {
            assert_eq!(
                e, 0.0,
                "{name}: hidden states differ from the CPU engine's bits"
            );
        } else {
            assert!(e <= 5e-2, "{name}: hidden states differ by {e:e}");
        }

        // Logits of every position on the GPU: the whole vocabulary and the
        // top-5 at every position.
        let logits = gm.logits_gpu(&hidden).unwrap().to_vec(ctx).unwrap();
        let vocab = reference.config().vocab_size;
        let cpu_logits = reference.logits_for(&want.data, None).unwrap();
        let mut worst = 0f64;
        for t in 0..n_tokens {
            let g = &logits[t * vocab..(t + 1) * vocab];
            let c = &cpu_logits[t * vocab..(t + 1) * vocab];
            worst = worst.max(max_abs(g, c));
            if exact {
                assert_eq!(top5(g), top5(c), "{name}: top-5 at position {t}");
            } else {
                assert_eq!(top5(g)[0], top5(c)[0], "{name}: top-1 at position {t}");
            }
        }
        let last = &cpu_logits[(n_tokens - 1) * vocab..];
        eprintln!(
            "{name} logits, all {n_tokens} positions: max |Δ| = {worst:.2e} (last top-5: {:?})",
            top5(last)
        );
        if exact {
            assert_eq!(
                worst, 0.0,
                "{name}: logits differ from the CPU engine's bits"
            );
        } else {
            assert!(worst <= 0.5, "{name}: logits differ by {worst}");
        }
    }

    #[test]
    fn smollm2_hidden_states_and_top5_logits_match_the_cpu_engine() {
        let Some(path) = find_smollm2_gguf() else {
            eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
            return;
        };
        let Some(ctx) = arc_ctx() else { return };
        whole_model_parity(&ctx, &path, "SmolLM2", 64);
    }

    /// Qwen2 on the GPU with the formats the 0.5B is written in: Q5_0 (most
    /// matrices and the embedding gather), Q8_0 (v and the untied output),
    /// Q6_K and Q4_K (ffn_down), F32 q/k/v biases; RoPE theta 1e6.
    #[test]
    fn qwen25_coder_05b_hidden_states_and_top5_logits_match_the_cpu_engine() {
        let Some(path) = find_catalog_model(QWEN_05B) else {
            eprintln!("SKIPPED: {QWEN_05B} GGUF not found (run `stepscore fetch {QWEN_05B}`)");
            return;
        };
        let Some(ctx) = arc_ctx() else { return };
        whole_model_parity(&ctx, &path, QWEN_05B, 24);
    }

    /// Gemma 3 on the GPU: scaled embeddings, post-norms, GELU, q/k norms,
    /// head width 256, local and global layers (window 512, two RoPE
    /// bases), Q5_0/Q8_0/Q4_K/Q6_K, the Q8_0 embedding as the tied
    /// vocabulary projection (262,144 rows).
    #[test]
    fn gemma3_270m_hidden_states_and_top5_logits_match_the_cpu_engine() {
        let Some(path) = find_catalog_model("gemma-3-270m") else {
            eprintln!("SKIPPED: gemma-3-270m GGUF not found (run `stepscore fetch gemma-3-270m`)");
            return;
        };
        let Some(ctx) = arc_ctx() else { return };
        whole_model_parity(&ctx, &path, "gemma-3-270m", 24);
    }

    #[test]
    fn smollm2_incremental_forward_equals_the_full_forward() {
        let Some(path) = find_smollm2_gguf() else {
            eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
            return;
        };
        let Some(ctx) = arc_ctx() else { return };
        let gguf = GgufModel::parse(ModelBytes::open(&path).unwrap(), "SmolLM2").unwrap();
        let tok = Tokenizer::from_gguf(&gguf.file).unwrap();
        let model = gguf.transformer().unwrap();
        let mut tokens = tok.encode(PROMPT, true).unwrap();
        tokens.truncate(40);
        let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
        let full = gm.forward(&tokens, None).unwrap();
        let mut cache = gm.new_cache();
        let a = gm.forward(&tokens[..29], Some(&mut cache)).unwrap();
        let b = gm.forward(&tokens[29..], Some(&mut cache)).unwrap();
        assert_eq!(cache.len(), tokens.len());
        let mut parts = a.data.clone();
        parts.extend_from_slice(&b.data);
        let e = max_rel(&parts, &full.data);
        eprintln!("SmolLM2 prefix 29 + 11 vs full 40: max |Δ|/(1+|ref|) = {e:.2e}");
        assert!(e <= 1e-4, "incremental forward differs by {e:e}");
    }

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/prm")
            .join(name)
    }

    fn tiny(name: &str) -> Transformer {
        // The PRM families' fixtures, else a bare decoder's (tests/fixtures/models).
        let dir = Some(fixture(name))
            .filter(|d| d.exists())
            .unwrap_or_else(|| fixture("../models").join(name));
        HfCheckpoint::open_dir(dir).unwrap().transformer().unwrap()
    }

    /// Every tiny family's decoder (Qwen2 with q/k/v biases and HF RoPE,
    /// Llama, Mistral layouts, Qwen3's per-head q/k norms over a head width
    /// apart from hidden / heads, Gemma 3's scaled embeddings, post-norms,
    /// GELU and local layers with their own window and RoPE base): hidden
    /// states within 1e-5, including a
    /// forward continued from a cache, a cache cloned and continued in two
    /// directions (copy on write), and a cache grown past its first
    /// capacity.
    #[test]
    fn tiny_decoders_match_the_cpu_engine_with_and_without_a_cache() {
        let Some(ctx) = arc_ctx() else { return };
        for name in [
            "qwen2-prm-tiny",
            "skywork-prm-tiny",
            "math-shepherd-tiny",
            "rlhflow-tiny",
            "confidence-tiny",
            "qwen3-tiny-bf16",
            "gemma3-tiny-bf16",
        ] {
            let model = tiny(name);
            let vocab = model.config().vocab_size as u32;
            let tokens: Vec<u32> = (0..150u32).map(|i| (i * 37 + 11) % vocab).collect();
            let want = model.forward(&tokens, None).unwrap();
            let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
            let got = gm.forward(&tokens, None).unwrap();
            let e = max_rel(&got.data, &want.data);
            eprintln!("{name}: hidden max |Δ|/(1+|ref|) = {e:.2e}");
            assert!(e <= 1e-5, "{name}: {e:e}");
            if model.has_lm_head() {
                // The logits too (README's parity table reports max |Δ logit|);
                // the f32 vocabulary projection sums in the kernel's own order,
                // hence a looser bound than the hidden states'.
                let h = gm.forward_gpu(&tokens, None).unwrap();
                let mut gl = gm.logits_gpu(&h).unwrap().to_vec(&ctx).unwrap();
                let cl = model.logits_for(&want.data, None).unwrap();
                gl.truncate(cl.len());
                let d = gl
                    .iter()
                    .zip(&cl)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max);
                eprintln!("{name}: WGSL logits vs CPU, max |Δ| {d:.2e}");
                let e = max_rel(&gl, &cl);
                assert!(e <= 1e-4, "{name}: logits {e:e}");
            }

            // Prefix of 100 (capacity grows from 64), then two continuations.
            let mut cache = gm.new_cache();
            gm.forward(&tokens[..100], Some(&mut cache)).unwrap();
            let mut other = cache.clone();
            let tail = gm.forward(&tokens[100..], Some(&mut cache)).unwrap();
            let e = max_rel(&tail.data, &want.data[100 * want.width..]);
            assert!(e <= 1e-5, "{name}: continued forward {e:e}");
            let alt: Vec<u32> = tokens[100..120].iter().map(|t| (t + 1) % vocab).collect();
            let got_alt = gm.forward(&alt, Some(&mut other)).unwrap();
            let mut seq = tokens[..100].to_vec();
            seq.extend_from_slice(&alt);
            let want_alt = model.forward(&seq, None).unwrap();
            let e = max_rel(&got_alt.data, &want_alt.data[100 * want.width..]);
            assert!(
                e <= 1e-5,
                "{name}: cloned cache continued differently: {e:e}"
            );
            // The first continuation was not disturbed by the clone's.
            let again = gm.forward(&[tokens[0]], Some(&mut cache)).unwrap();
            let mut seq2 = tokens.clone();
            seq2.push(tokens[0]);
            let want2 = model.forward(&seq2, None).unwrap();
            let e = max_rel(&again.data, want2.row(150).unwrap());
            assert!(e <= 1e-5, "{name}: original cache after the clone: {e:e}");
        }
    }

    /// A forward is one submission whose dispatches share one uniform
    /// buffer of parameters: on a fresh device it adds only its activations,
    /// the KV cache (two buffers a layer), the token ids, the RoPE table,
    /// readback staging and that one buffer, not one per dispatch (a tiny
    /// decoder records ~15 dispatches a layer).
    #[test]
    fn a_forward_takes_one_uniform_buffer_not_one_per_dispatch() {
        if !have_adapter() {
            return;
        }
        let ctx = Arc::new(GpuContext::new(GpuOptions::default()).unwrap());
        let model = tiny("qwen2-prm-tiny");
        let layers = model.config().n_layers;
        let vocab = model.config().vocab_size as u32;
        let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
        let uploaded = ctx.pool_stats().live_buffers;
        let tokens: Vec<u32> = (0..40u32).map(|i| (i * 37 + 11) % vocab).collect();
        gm.forward(&tokens, None).unwrap();
        let added = ctx.pool_stats().live_buffers - uploaded;
        // x, xn, q, attn, proj, gate, up, the result copy; ids, rope; staging;
        // the parameters; 2 per layer of cache.
        let bound = 12 + 2 * layers as u64;
        eprintln!("{layers} layers: one forward added {added} device buffers (bound {bound})");
        assert!(
            added <= bound,
            "{added} buffers for one forward of {layers} layers"
        );
    }

    #[test]
    fn bad_tokens_and_foreign_caches_are_errors_not_panics() {
        let Some(ctx) = arc_ctx() else { return };
        let model = tiny("skywork-prm-tiny");
        let gm = GpuTransformer::upload(ctx.clone(), &model).unwrap();
        let other = GpuTransformer::upload(ctx.clone(), &model).unwrap();
        let vocab = model.config().vocab_size as u32;
        let err = gm.forward(&[1, vocab], None).unwrap_err().to_string();
        assert!(err.contains("position 1"), "{err}");
        let mut foreign = other.new_cache();
        assert!(gm.forward(&[1], Some(&mut foreign)).is_err());
        let empty = gm.forward(&[], None).unwrap();
        assert_eq!(empty.n_tokens, 0);
    }
}
