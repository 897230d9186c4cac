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
//! append() within 1e-4 of full re-scoring on the same engine. When they
//! are cached, SmolLM2-135M and Qwen2.5-Coder-0.5B (quantized) score the
//! shipped examples (the 0.5B one per head) on both engines within 1e-3
//! (`engines_agree`).
#![cfg(feature = "gpu")]

use crate::gpu_support;

use std::path::PathBuf;

use gpu_support::have_adapter;
use serde::Deserialize;
use stepscore::prm::{Backend, Family, HeadFile, HeadSource, Scorer, ScorerOptions, TraceScore};
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

const FAMILIES: [&str; 6] = [
    "qwen2-prm-tiny",
    "skywork-prm-tiny",
    "math-shepherd-tiny",
    "rlhflow-tiny",
    "confidence-tiny",
    "gemma3-confidence-tiny",
];

/// Families nothing in the checkpoint names (as in prm_families.rs).
fn family_of(name: &str) -> Option<Family> {
    match name {
        "rlhflow-tiny" => Some(Family::Rlhflow),
        "confidence-tiny" | "gemma3-confidence-tiny" => Some(Family::Confidence),
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
fn an_outcome_reward_model_scores_like_the_cpu_engine() {
    if !have_adapter() {
        return;
    }
    let name = "outcome-tiny";
    let (cpu, gpu) = (open(name, Backend::Cpu), open(name, Backend::Gpu));
    assert_eq!(gpu.family(), Family::Outcome);
    let text = std::fs::read_to_string(fixture(name).join("reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (k, case) in reference["cases"].as_array().unwrap().iter().enumerate() {
        let steps: Vec<&str> = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let problem = case["problem"].as_str().unwrap();
        let a = cpu.score_steps(problem, &steps).unwrap();
        let b = gpu.score_steps(problem, &steps).unwrap();
        let n = steps.len();
        assert!(
            b.step_scores[..n - 1].iter().all(Option::is_none),
            "{name} case {k}"
        );
        let (x, y) = (a.outcome_logit.unwrap(), b.outcome_logit.unwrap());
        let want = case["logit"].as_f64().unwrap();
        assert!(
            (x - y).abs() <= 1e-4,
            "{name} case {k}: logit cpu {x} gpu {y}"
        );
        assert!(
            (y - want).abs() <= 1e-4,
            "{name} case {k}: logit gpu {y} reference {want}"
        );
        let last = case["step_scores"][n - 1].as_f64().unwrap();
        assert!(
            (b.step_scores[n - 1].unwrap() - last).abs() <= 1e-4,
            "{name} case {k}"
        );
    }
}

#[test]
fn a_generative_verifier_writes_and_scores_like_the_cpu_engine() {
    if !have_adapter() {
        return;
    }
    let options = |backend| ScorerOptions {
        backend,
        family: Some(Family::Generative),
        threads: 1,
        ..Default::default()
    };
    let name = "generative-tiny";
    let cpu = Scorer::open(fixture(name), &options(Backend::Cpu)).unwrap();
    let gpu = Scorer::open(fixture(name), &options(Backend::Gpu)).unwrap();
    assert_eq!(gpu.backend_report().chosen, Backend::Gpu);
    let text = std::fs::read_to_string(fixture(name).join("reference.json")).unwrap();
    let reference: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (k, case) in reference["cases"].as_array().unwrap().iter().enumerate() {
        let steps: Vec<&str> = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let problem = case["problem"].as_str().unwrap();
        let a = cpu.score_steps(problem, &steps).unwrap();
        let b = gpu.score_steps(problem, &steps).unwrap();
        // The same critique written, token for token, and the same verdicts read.
        assert_eq!(a.critique, b.critique, "{name} case {k}");
        assert_eq!(
            b.critique.as_ref().unwrap().text,
            case["critique"].as_str().unwrap()
        );
        assert_eq!(a.tokens, b.tokens, "{name} case {k}");
        for (i, want) in case["step_scores"].as_array().unwrap().iter().enumerate() {
            match (a.step_scores[i], b.step_scores[i], want.as_f64()) {
                (Some(x), Some(y), Some(w)) => {
                    assert!(
                        (x - y).abs() <= 1e-4,
                        "{name} case {k} step {i}: cpu {x} gpu {y}"
                    );
                    assert!(
                        (y - w).abs() <= 1e-4,
                        "{name} case {k} step {i}: gpu {y} reference {w}"
                    );
                }
                (None, None, None) => {}
                other => panic!("{name} case {k} step {i}: {other:?}"),
            }
        }
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
    let adapters = stepscore::engine::GpuContext::adapters(None);
    let software_only = adapters
        .iter()
        .all(|a| a.device_type == stepscore::engine::DeviceKind::Cpu);
    if software_only && std::env::var(stepscore::engine::ADAPTER_ENV).is_err() {
        assert_eq!(report.chosen, Backend::Cpu);
        assert!(report.reason.contains("software"), "{report}");
    }
    let cpu = open("skywork-prm-tiny", Backend::Cpu);
    assert_eq!(cpu.backend_report().chosen, Backend::Cpu);
    assert!(cpu.gpu_pool_stats().is_none());
}

const QWEN_05B: &str = "qwen2.5-coder-0.5b";
/// The ids of examples/traces.jsonl.
const EXAMPLES: [&str; 4] = ["correct-1", "slip-1", "operation-1", "steps-1"];

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

/// Step scores of a real quantized model on both engines over the shipped
/// examples named by `ids` (examples/traces.jsonl, one step per line). The engines compute
/// the same bits for quantized weights (8-bit activations, one float order,
/// one e^x: gpu_model.rs checks hidden states and logits), so the scores
/// differ only where the statistics are reduced (f64 on the host, f32 on
/// the device). Bound: 1e-3, issue 15's bar; measured maxima printed.
fn engines_agree(path: &std::path::Path, head: &HeadFile, name: &str, ids: &[&str]) {
    let open = |backend| {
        let options = ScorerOptions {
            backend,
            threads: 2,
            ..Default::default()
        };
        Scorer::open_with(path, &HeadSource::Loaded(head.clone()), &options)
            .unwrap_or_else(|e| panic!("{name} on {backend}: {e}"))
    };
    let gpu = open(Backend::Gpu);
    assert_eq!(gpu.backend_report().chosen, Backend::Gpu);
    let cpu = open(Backend::Cpu);
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/traces.jsonl"),
    )
    .unwrap();
    let (mut worst_score, mut worst_stat, mut n) = (0f64, 0f64, 0);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if !ids.contains(&v["id"].as_str().unwrap()) {
            continue;
        }
        let problem = v["problem"].as_str().unwrap();
        let steps: Vec<&str> = v["response"]
            .as_str()
            .unwrap()
            .split('\n')
            .filter(|l| !l.trim().is_empty())
            .collect();
        let g = gpu.score_steps(problem, &steps).unwrap();
        let c = cpu.score_steps(problem, &steps).unwrap();
        assert_eq!(g.tokens, c.tokens);
        for (x, y) in g.step_scores.iter().zip(&c.step_scores) {
            worst_score = worst_score.max((x.unwrap() - y.unwrap()).abs());
            n += 1;
        }
        if g.confidence.is_some() {
            worst_stat = worst_stat.max(score_gap(&g, &c).1);
        }
        if let (Some(gt), Some(ct)) = (&g.token_logprobs, &c.token_logprobs) {
            for (a, b) in gt.iter().flatten().zip(ct.iter().flatten()) {
                worst_stat = worst_stat.max((a.logprob - b.logprob).abs());
            }
        }
    }
    eprintln!(
        "{name}: GPU vs CPU engine, {n} steps of examples/traces.jsonl: max |Δ step score| \
         {worst_score:.2e}, max |Δ statistic or token log-prob| {worst_stat:.2e}"
    );
    assert!(
        worst_score <= 1e-3,
        "{name}: step scores differ by {worst_score}"
    );
    assert!(
        worst_stat <= 1e-3,
        "{name}: statistics differ by {worst_stat}"
    );
}

/// The Qwen2 scoring path on a real checkpoint (q/k/v biases, untied Q8_0
/// output, RoPE theta 1e6, the formats Q5_0/Q8_0/Q6_K/Q4_K), with the
/// default PRM's digit head (statistics of the digits' and operators'
/// log-probabilities: the most sensitive to last-bit logit differences).
/// The h+4 value head over the confidence statistics reads the same
/// statistics path and is checked on SmolLM2 below; the 0.5B's forward is
/// checked bit for bit in gpu_model.rs.
#[test]
fn qwen25_coder_05b_step_scores_match_the_cpu_engine() {
    let Some(path) = find_catalog_model(QWEN_05B) else {
        eprintln!("SKIPPED: {QWEN_05B} GGUF not found (run `stepscore fetch {QWEN_05B}`)");
        return;
    };
    if !have_adapter() {
        return;
    }
    let digit =
        HeadFile::embedded(stepscore::prm::head_file::QWEN15B_ARITHMETIC_HEAD_NAME).unwrap();
    // One trace: the 0.5B on llvmpipe costs ~40 s per trace in CI, and the
    // path the head reads is the same on every trace.
    engines_agree(&path, &digit, "Qwen2.5-Coder-0.5B, digit head", &["slip-1"]);
}

/// The Llama scoring path on SmolLM2-135M (Q4_1, Q8_0 tied embedding and
/// vocabulary projection) with its shipped head (layer 12's hidden state and
/// nine step statistics), and with the h+4 value head over the confidence
/// statistics.
#[test]
fn smollm2_step_scores_match_the_cpu_engine() {
    let Some(path) = find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
        return;
    };
    if !have_adapter() {
        return;
    }
    let shipped = HeadFile::embedded(stepscore::prm::head_file::SMOLLM2_HEAD_NAME).unwrap();
    engines_agree(&path, &shipped, "SmolLM2, shipped head", &EXAMPLES);
    engines_agree(
        &path,
        &value_head_with_confidence(576),
        "SmolLM2, value head + confidence",
        &EXAMPLES,
    );
}
