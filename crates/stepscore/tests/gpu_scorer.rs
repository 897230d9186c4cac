//! The scorer on the WGSL engine (`Backend::Gpu`) against the CPU engine,
//! on whatever adapter wgpu finds (Mesa's llvmpipe in CI): every tiny PRM
//! family, incremental sessions, shared-prefix candidates, recovery after a
//! lost device, and no device-memory growth over 500 scorings.
//!
//! The tiny checkpoints hold f32 weights, so the CPU engine runs its exact
//! f32 path on them (no 8-bit activation rounding): the same arithmetic the
//! GPU does, up to summation order. Tolerances: per-step scores within 1e-3
//! of the CPU engine (the bar; measured maxima are printed and are
//! ~1e-6), within 1e-4 of the independent Python reference, and
//! append() within 1e-4 of full re-scoring on the same engine. When it is
//! cached, Qwen2.5-Coder-0.5B (quantized) is scored on both engines too:
//! see its test for the reference and tolerances.
#![cfg(feature = "gpu")]

mod gpu_support;

use std::path::PathBuf;

use gpu_support::have_adapter;
use serde::Deserialize;
use stepscore::prm::{Backend, Family, HeadFile, Scorer, ScorerOptions, TraceScore};
use stepscore::testing::{find_catalog_model, find_smollm2_gguf};
use stepscore::Error;

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    problem: String,
    steps: Vec<String>,
    step_scores: Vec<f64>,
}

const FAMILIES: [&str; 5] = [
    "qwen2-prm-tiny",
    "skywork-prm-tiny",
    "math-shepherd-tiny",
    "rlhflow-tiny",
    "confidence-tiny",
];

/// Families nothing in the checkpoint names (as in prm_families.rs).
fn family_of(name: &str) -> Option<Family> {
    match name {
        "rlhflow-tiny" => Some(Family::Rlhflow),
        "confidence-tiny" => Some(Family::Confidence),
        _ => None,
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/prm")
        .join(name)
}

fn reference(name: &str) -> Reference {
    let text = std::fs::read_to_string(fixture(name).join("reference.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn open(name: &str, backend: Backend) -> Scorer {
    Scorer::open(
        fixture(name),
        &ScorerOptions {
            backend,
            family: family_of(name),
            threads: 1,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{name} on {backend}: {e}"))
}

#[test]
fn every_family_scores_like_the_cpu_engine() {
    if !have_adapter() {
        return;
    }
    for name in FAMILIES {
        let cpu = open(name, Backend::Cpu);
        let gpu = open(name, Backend::Gpu);
        assert_eq!(gpu.backend_report().chosen, Backend::Gpu, "{name}");
        let mut worst = 0f64;
        for (k, case) in reference(name).cases.iter().enumerate() {
            let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
            let a = cpu.score_steps(&case.problem, &steps).unwrap();
            let b = gpu.score_steps(&case.problem, &steps).unwrap();
            assert_eq!(a.tokens, b.tokens, "{name} case {k}");
            for (i, (x, y)) in a.step_scores.iter().zip(&b.step_scores).enumerate() {
                let (x, y) = (x.unwrap(), y.unwrap());
                let d = (x - y).abs();
                worst = worst.max(d);
                assert!(d <= 1e-3, "{name} case {k} step {i}: cpu {x} gpu {y}");
                let r = case.step_scores[i];
                assert!(
                    (y - r).abs() <= 1e-4,
                    "{name} case {k} step {i}: gpu {y} reference {r}"
                );
            }
            if let (Some(ca), Some(cb)) = (&a.confidence, &b.confidence) {
                for (sa, sb) in ca.iter().zip(cb) {
                    assert_eq!(sa.tokens, sb.tokens);
                    assert!((sa.mean_logprob - sb.mean_logprob).abs() <= 1e-4, "{name}");
                    assert!((sa.min_logprob - sb.min_logprob).abs() <= 1e-4, "{name}");
                    assert!((sa.mean_entropy - sb.mean_entropy).abs() <= 1e-4, "{name}");
                }
            } else {
                assert_eq!(a.confidence.is_some(), b.confidence.is_some(), "{name}");
            }
        }
        eprintln!("{name}: max |score gpu - cpu| = {worst:.2e}");
    }
}

#[test]
fn gpu_sessions_equal_full_rescoring_and_candidates_share_the_prompt() {
    if !have_adapter() {
        return;
    }
    for name in FAMILIES {
        let gpu = open(name, Backend::Gpu);
        let case = &reference(name).cases[0];
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let full = gpu.score_steps(&case.problem, &steps).unwrap();
        let mut s = gpu.session(&case.problem);
        let mut worst = 0f64;
        for (i, step) in steps.iter().enumerate() {
            let got = s.append(step).unwrap();
            let want = full.step_scores[i].unwrap();
            worst = worst.max((got - want).abs());
            assert!(
                (got - want).abs() <= 1e-4,
                "{name} step {i}: append {got} full {want}"
            );
        }
        assert!(
            s.computed_tokens() < full.tokens * steps.len(),
            "{name}: the session recomputed its prefix"
        );
        eprintln!("{name}: max |append - full| = {worst:.2e}");

        // Candidates: the first k steps of the case, and an altered last step.
        let mut alt = steps.clone();
        let last = alt.len() - 1;
        alt[last] = "So the answer is 12.";
        let cands = vec![steps.clone(), alt.clone(), steps[..1].to_vec()];
        let got = gpu.score_candidates(&case.problem, &cands).unwrap();
        for (c, scores) in cands.iter().zip(&got) {
            let want = gpu.score_steps(&case.problem, c).unwrap();
            for (g, w) in scores.iter().zip(&want.step_scores) {
                assert!(
                    (g - w.unwrap()).abs() <= 1e-4,
                    "{name} candidate: {g} vs {w:?}"
                );
            }
        }
    }
}

#[test]
fn a_lost_device_fails_one_call_and_the_next_recovers() {
    if !have_adapter() {
        return;
    }
    let gpu = open("qwen2-prm-tiny", Backend::Gpu);
    let case = &reference("qwen2-prm-tiny").cases[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    let before = gpu.score_steps(&case.problem, &steps).unwrap();

    let mut session = gpu.session(&case.problem);
    session.append(steps[0]).unwrap();

    gpu.simulate_device_loss();
    match gpu.score_steps(&case.problem, &steps) {
        Err(Error::Gpu(msg)) => eprintln!("after loss: {msg}"),
        other => panic!("expected Error::Gpu after the device was lost, got {other:?}"),
    }
    let after = gpu.score_steps(&case.problem, &steps).unwrap();
    assert_eq!(before.step_scores, after.step_scores);

    // The session's cache was on the old device: the next append recomputes
    // the prefix on the new one and still matches full scoring.
    let s1 = session.append(steps[1]).unwrap();
    assert!((s1 - before.step_scores[1].unwrap()).abs() <= 1e-4);
}

#[test]
fn five_hundred_scorings_keep_device_buffers_flat() {
    if !have_adapter() {
        return;
    }
    let gpu = open("skywork-prm-tiny", Backend::Gpu);
    let cases = reference("skywork-prm-tiny").cases;
    let run = |i: usize| {
        let case = &cases[i % cases.len()];
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        gpu.score_steps(&case.problem, &steps).unwrap();
        if i % 10 == 0 {
            let mut s = gpu.session(&case.problem);
            for step in &steps {
                s.append(step).unwrap();
            }
        }
    };
    // Warm up: every size class the cases need gets allocated once.
    for i in 0..20 {
        run(i);
    }
    let warm = gpu.gpu_pool_stats().unwrap();
    for i in 20..500 {
        run(i);
    }
    let end = gpu.gpu_pool_stats().unwrap();
    eprintln!("after warm-up: {warm:?}\nafter 500 scorings: {end:?}");
    assert_eq!(
        (warm.live_buffers, warm.live_bytes),
        (end.live_buffers, end.live_bytes),
        "device buffers grew over 480 scorings"
    );
}

#[test]
fn auto_prefers_hardware_and_reports_why() {
    if !have_adapter() {
        return;
    }
    let auto = open("skywork-prm-tiny", Backend::Auto);
    let report = auto.backend_report();
    eprintln!("auto: {report}");
    assert_eq!(report.requested, Backend::Auto);
    assert!(!report.reason.is_empty());
    let adapters = stepscore::gpu::GpuContext::adapters(None);
    let software_only = adapters
        .iter()
        .all(|a| a.device_type == stepscore::gpu::DeviceKind::Cpu);
    if software_only && std::env::var(stepscore::gpu::ADAPTER_ENV).is_err() {
        assert_eq!(report.chosen, Backend::Cpu);
        assert!(report.reason.contains("software"), "{report}");
    }
    let cpu = open("skywork-prm-tiny", Backend::Cpu);
    assert_eq!(cpu.backend_report().chosen, Backend::Cpu);
    assert!(cpu.gpu_pool_stats().is_none());
}

const QWEN_05B: &str = "qwen2.5-coder-0.5b";

/// A value head over the final hidden state joined with the step's 4
/// confidence statistics (the h+4 layout `stepscore train` exports), in its
/// own safetensors file, for a backbone of `width`: fixed weights of both
/// signs, small enough that the sigmoid is not saturated on Qwen's final
/// hidden states. One scorer so runs the hidden-state head and the
/// confidence statistics over the vocabulary projection in one pass.
fn value_head_with_confidence(width: usize) -> HeadFile {
    use safetensors::tensor::{serialize, Dtype, TensorView};
    let n = width + 4;
    let w: Vec<u8> = (0..n)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) * if i < width { 0.002 } else { 0.05 })
        .flat_map(f32::to_le_bytes)
        .collect();
    let b = 0.0f32.to_le_bytes();
    let views = vec![
        (
            "v_head.summary.weight",
            TensorView::new(Dtype::F32, vec![1, n], &w).unwrap(),
        ),
        (
            "v_head.summary.bias",
            TensorView::new(Dtype::F32, vec![1], &b).unwrap(),
        ),
    ];
    let meta = [(
        "stepscore.confidence_features".to_string(),
        "true".to_string(),
    )];
    let bytes = serialize(views, Some(meta.into_iter().collect())).unwrap();
    HeadFile::from_bytes(&bytes, "test value head").unwrap()
}

/// Largest |score difference| and largest difference of any confidence
/// statistic.
fn score_gap(a: &TraceScore, b: &TraceScore) -> (f64, f64) {
    assert_eq!(a.tokens, b.tokens);
    let mut score = 0f64;
    for (x, y) in a.step_scores.iter().zip(&b.step_scores) {
        score = score.max((x.unwrap() - y.unwrap()).abs());
    }
    let (ca, cb) = (
        a.confidence.as_ref().unwrap(),
        b.confidence.as_ref().unwrap(),
    );
    assert_eq!(ca.len(), cb.len());
    let mut stats = 0f64;
    for (sa, sb) in ca.iter().zip(cb) {
        assert_eq!(sa.tokens, sb.tokens);
        for (x, y) in [
            (sa.mean_logprob, sb.mean_logprob),
            (sa.min_logprob, sb.min_logprob),
            (sa.mean_entropy, sb.mean_entropy),
        ] {
            stats = stats.max((x - y).abs());
        }
    }
    (score, stats)
}

/// A value head over the final hidden state and the confidence statistics
/// on a real quantized checkpoint, GPU engine against the CPU engine's
/// default path: both round every quantized matmul's input to 8 bits per
/// block as llama.cpp does. Tolerances: step scores 1e-3 (the bar above);
/// confidence statistics 4e-3, twice the whole-model logit tolerance of
/// gpu_model.rs (a log-probability moves by at most twice the largest logit
/// change). The distance of the CPU engine's f32 path (dequantized weights,
/// f32 activations: what the GPU computed before it had the 8-bit path) is
/// printed beside it.
fn quantized_checkpoint_matches_the_cpu_engine(path: &std::path::Path, name: &str, width: usize) {
    let problem = "Tom buys 4 pens at 3 dollars each and pays with 20 dollars. What is his change?";
    let steps = ["4 * 3 = 12 dollars.", "20 - 12 = 9 dollars."];
    let head = value_head_with_confidence(width);
    let open = |backend| {
        let options = ScorerOptions {
            backend,
            threads: 2,
            ..Default::default()
        };
        Scorer::open_with_head_file(path, &head, &options)
            .unwrap_or_else(|e| panic!("{name} on {backend}: {e}"))
    };
    let gpu = open(Backend::Gpu);
    assert_eq!(gpu.backend_report().chosen, Backend::Gpu);
    assert_eq!(gpu.family(), Family::ValueHead);
    let got = gpu.score_steps(problem, &steps).unwrap();
    drop(gpu);
    let mut cpu = open(Backend::Cpu);
    let want = cpu.score_steps(problem, &steps).unwrap();
    cpu.dequantize_weights().unwrap();
    let f32_path = cpu.score_steps(problem, &steps).unwrap();
    drop(cpu);
    let (ds, dc) = score_gap(&got, &want);
    let (fs, fc) = score_gap(&want, &f32_path);
    eprintln!(
        "{name}, {} tokens: gpu {:?} vs cpu {:?}: max |Δ score| {ds:.2e}, \
         max |Δ statistic| {dc:.2e}; the CPU's f32 path is {fs:.2e}, {fc:.2e} from its default",
        got.tokens, got.step_scores, want.step_scores
    );
    assert!(ds <= 1e-3, "{name}: step scores differ by {ds}");
    assert!(dc <= 4e-3, "{name}: confidence statistics differ by {dc}");
}

/// The Qwen2 scoring path on a real checkpoint (q/k/v biases, untied Q8_0
/// output, RoPE theta 1e6, the formats Q5_0/Q8_0/Q6_K/Q4_K).
#[test]
fn qwen25_coder_05b_value_head_and_confidence_statistics_match_the_cpu_engine() {
    let Some(path) = find_catalog_model(QWEN_05B) else {
        eprintln!("SKIPPED: {QWEN_05B} GGUF not found (run `stepscore fetch {QWEN_05B}`)");
        return;
    };
    if !have_adapter() {
        return;
    }
    quantized_checkpoint_matches_the_cpu_engine(&path, QWEN_05B, 896);
}

/// The Llama scoring path on SmolLM2-135M (Q4_1 everywhere, Q8_0 tied
/// embedding and vocabulary projection).
#[test]
fn smollm2_value_head_and_confidence_statistics_match_the_cpu_engine() {
    let Some(path) = find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
        return;
    };
    if !have_adapter() {
        return;
    }
    quantized_checkpoint_matches_the_cpu_engine(&path, "SmolLM2", 576);
}
