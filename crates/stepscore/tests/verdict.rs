//! The instruct model's verdict on a whole solution (`Scorer::verdict`)
//! equals llama.cpp's on the same GGUF and the same prompt text
//! (tests/fixtures/llama_cpp/verdict_*.json, written by
//! `scripts/eval/verdict_signal.py --reference`): the same token count (the
//! prompt is rendered and tokenized alike) and P(Yes) within LOG_ODDS of
//! llama.cpp's in log-odds. Skipped with a printed reason when a model is
//! not cached.

use std::path::PathBuf;

use stepscore::prm::{HeadSource, Scorer, ScorerOptions};

/// Log-odds units. P(Yes) is a difference of two log-sum-exps of logits, and
/// the engines' logits differ by up to 0.56 on these GGUFs (tests/generate.rs);
/// measured: at most 0.12 on the 1.5B (Q4_K_M) and 0.02 on the 0.5B.
const LOG_ODDS: f64 = 0.25;

fn logit(p: f64) -> f64 {
    (p / (1.0 - p)).ln()
}

fn check(name: &str) {
    let Some(path) = stepscore::testing::find_catalog_model(name) else {
        eprintln!("SKIPPED: {name} not fetched (stepscore fetch {name})");
        return;
    };
    let options = ScorerOptions {
        threads: 2,
        ..ScorerOptions::default()
    };
    let scorer = Scorer::open_with(path, &HeadSource::Backbone, &options).unwrap();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../tests/fixtures/llama_cpp/verdict_{name}.json"
    ));
    let want: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    for case in want["cases"].as_array().unwrap() {
        let problem = case["problem"].as_str().unwrap();
        let steps: Vec<&str> = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let got = scorer.verdict(problem, &steps).unwrap();
        let p = case["p_yes"].as_f64().unwrap();
        eprintln!("{name}: P(Yes) {:.4} vs llama.cpp {p:.4}", got.p_yes);
        assert_eq!(
            got.tokens as u64,
            case["tokens"].as_u64().unwrap(),
            "{problem}"
        );
        assert!(
            (logit(got.p_yes) - logit(p)).abs() <= LOG_ODDS,
            "{name}: P(Yes) {} vs llama.cpp's {p} on {steps:?}",
            got.p_yes
        );
    }
    let err = scorer.verdict("1 + 1?", &[]).unwrap_err().to_string();
    assert!(err.contains("at least one step"), "{err}");
}

#[test]
fn verdict_matches_llama_cpp_on_qwen25_coder_05b() {
    check("qwen2.5-coder-0.5b");
}

#[test]
fn verdict_matches_llama_cpp_on_qwen25_coder_15b() {
    check("qwen2.5-coder-1.5b");
}
