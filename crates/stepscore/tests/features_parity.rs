//! Step features come from the scoring path itself: a value head applied by
//! hand to the extracted features gives the scorer's own step scores.

use std::path::PathBuf;

use serde::Deserialize;
use stepscore::engine::HfCheckpoint;
use stepscore::prm::{Family, HeadSource, Scorer, ScorerOptions, Truncation};

use crate::digit_confidence::with_confidence;
use stepscore::Error;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/prm")
        .join(name)
}

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    problem: String,
    steps: Vec<String>,
}

fn cases(name: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(fixture(name).join("reference.json")).unwrap();
    serde_json::from_str::<Reference>(&text).unwrap().cases
}

fn opts(family: Option<Family>) -> ScorerOptions {
    ScorerOptions {
        family,
        threads: 2,
        ..Default::default()
    }
}

/// sigmoid(w . h + b) in f64, written out independently of the engine's head.
fn value_head(w: &[f32], b: f32, h: &[f32]) -> f64 {
    let z: f64 = w
        .iter()
        .zip(h)
        .map(|(w, x)| f64::from(*w) * f64::from(*x))
        .sum::<f64>()
        + f64::from(b);
    1.0 / (1.0 + (-z).exp())
}

#[test]
fn value_head_by_hand_on_features_equals_step_scores() {
    let dir = fixture("skywork-prm-tiny");
    let ckpt = HfCheckpoint::open_dir(&dir).unwrap();
    let w = ckpt.tensor_f32("v_head.summary.weight").unwrap();
    let b = ckpt.tensor_f32("v_head.summary.bias").unwrap();
    assert_eq!(b.shape, vec![1]);
    let scorer = Scorer::open(&dir, &opts(None)).unwrap();
    assert_eq!(scorer.family(), Family::ValueHead);
    assert_head_on_features(&scorer, &scorer, "skywork-prm-tiny", &w.data, b.data[0]);
}

/// The value head applied by hand to `features_from`'s step features equals
/// `scorer`'s step scores (1e-6) on every reference case of `fixture_name`.
fn assert_head_on_features(
    scorer: &Scorer,
    features_from: &Scorer,
    fixture_name: &str,
    w: &[f32],
    b: f32,
) {
    let mut checked = 0;
    for case in cases(fixture_name) {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let scores = scorer.score_steps(&case.problem, &steps).unwrap();
        let feats = features_from.step_features(&case.problem, &steps).unwrap();
        assert_eq!(feats.width, w.len());
        assert_eq!(feats.hidden.len(), steps.len());
        assert_eq!(feats.tokens, scores.tokens);
        for (row, score) in feats.hidden.iter().zip(&scores.step_scores) {
            assert_eq!(row.len(), feats.width);
            let by_hand = value_head(w, b, row);
            let score = score.unwrap();
            assert!(
                (by_hand - score).abs() <= 1e-6,
                "by hand {by_hand} vs scorer {score}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} steps checked");
}

#[test]
fn backbone_gives_the_same_features_and_refuses_to_score() {
    let dir = fixture("skywork-prm-tiny");
    let full = Scorer::open(&dir, &opts(None)).unwrap();
    let backbone =
        Scorer::open_with(&dir, &HeadSource::Backbone, &opts(Some(Family::ValueHead))).unwrap();
    for case in cases("skywork-prm-tiny") {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        assert_eq!(
            full.step_features(&case.problem, &steps).unwrap(),
            backbone.step_features(&case.problem, &steps).unwrap()
        );
        let err = backbone.score_steps(&case.problem, &steps).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("backbone"),
            "{err}"
        );
    }
}

#[test]
fn backbone_loads_without_head_tensors() {
    // A plain causal LM: Scorer::open refuses the value-head family on it
    // (no v_head tensors); as a backbone it extracts features, with the LM
    // head kept for confidence statistics.
    let dir = fixture("confidence-tiny");
    assert!(Scorer::open(&dir, &opts(Some(Family::ValueHead))).is_err());
    let backbone =
        Scorer::open_with(&dir, &HeadSource::Backbone, &opts(Some(Family::ValueHead))).unwrap();
    let steps = ["First, 3 + 4 = 7.", "Then 7 * 2 = 14."];
    let f = backbone
        .step_features_with("What is (3 + 4) * 2?", &steps, &with_confidence())
        .unwrap();
    assert_eq!(f.hidden.len(), 2);
    assert!(f.hidden.iter().flatten().all(|x| x.is_finite()));
    let conf = f.confidence.unwrap();
    assert_eq!(conf.len(), 2);
    for c in conf {
        assert!(
            c.mean_logprob <= 0.0 && c.min_logprob <= c.mean_logprob && c.mean_entropy >= 0.0,
            "{c:?}"
        );
    }
}

#[test]
fn confidence_features_equal_the_confidence_family_statistics() {
    let dir = fixture("confidence-tiny");
    let scorer = Scorer::open(&dir, &opts(Some(Family::Confidence))).unwrap();
    for case in cases("confidence-tiny") {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let scored = scorer.score_steps(&case.problem, &steps).unwrap();
        let f = scorer
            .step_features_with(&case.problem, &steps, &with_confidence())
            .unwrap();
        assert_eq!(f.confidence, scored.confidence);
        // The confidence family reads each step at its last token.
        let enc = scorer.encode(&case.problem, &steps).unwrap();
        assert_eq!(enc.markers.len(), f.hidden.len());
    }
}

#[test]
fn confidence_needs_an_lm_head() {
    // The score-head checkpoint has no vocabulary projection at all.
    let scorer = Scorer::open_with(
        fixture("qwen2-prm-tiny"),
        &HeadSource::Backbone,
        &opts(None),
    )
    .unwrap();
    assert!(scorer.step_features("p", &["a step"]).is_ok());
    let err = scorer
        .step_features_with("p", &["a step"], &with_confidence())
        .unwrap_err();
    assert!(err.to_string().contains("lm_head"), "{err}");
}

#[test]
fn earlier_steps_do_not_see_later_ones() {
    // The decoder is causal: a step's feature on the whole trace equals its
    // feature on the trace cut after it (same tokens up to its marker).
    let scorer = Scorer::open(fixture("skywork-prm-tiny"), &opts(None)).unwrap();
    let case = &cases("skywork-prm-tiny")[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    let whole = scorer.step_features(&case.problem, &steps).unwrap();
    for k in 1..steps.len() {
        let prefix = scorer.step_features(&case.problem, &steps[..k]).unwrap();
        for (a, b) in prefix.hidden.iter().zip(&whole.hidden) {
            let diff = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(
                diff <= 1e-4,
                "step features change with later steps: {diff}"
            );
        }
    }
}

#[test]
fn truncated_steps_have_no_features() {
    let dir = fixture("skywork-prm-tiny");
    let case = &cases("skywork-prm-tiny")[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    let full = Scorer::open(&dir, &opts(None))
        .unwrap()
        .step_features(&case.problem, &steps)
        .unwrap();
    // A limit just below the whole prompt drops the last step only.
    let options = ScorerOptions {
        max_tokens: Some(full.tokens - 1),
        truncation: Truncation::DropSteps,
        ..opts(None)
    };
    let cut = Scorer::open(&dir, &options)
        .unwrap()
        .step_features(&case.problem, &steps)
        .unwrap();
    assert_eq!(cut.truncated_steps, 1);
    assert_eq!(cut.hidden.len(), steps.len() - 1);
    for (a, b) in cut.hidden.iter().zip(&full.hidden) {
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff <= 1e-4, "kept steps' features changed by {diff}");
    }
}

/// A head in its own safetensors file, as `stepscore train` writes it.
fn write_head_file(path: &std::path::Path, w: &[f32], b: f32) {
    use safetensors::tensor::{serialize, Dtype, TensorView};
    let wb: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
    let bb = b.to_le_bytes().to_vec();
    let views = vec![
        (
            "v_head.summary.weight",
            TensorView::new(Dtype::F32, vec![1, w.len()], &wb).unwrap(),
        ),
        (
            "v_head.summary.bias",
            TensorView::new(Dtype::F32, vec![1], &bb).unwrap(),
        ),
    ];
    std::fs::write(path, serialize(views, None).unwrap()).unwrap();
}

#[test]
fn backbone_plus_head_file_scores_its_own_features() {
    // The training loop in one test: features from a head-less backbone, a
    // head in a separate file, and the scorer that loads both must agree
    // with the head applied by hand to those features.
    let dir = fixture("confidence-tiny");
    let backbone =
        Scorer::open_with(&dir, &HeadSource::Backbone, &opts(Some(Family::ValueHead))).unwrap();
    let width = HfCheckpoint::open_dir(&dir).unwrap().config().hidden_size;
    let w: Vec<f32> = (0..width)
        .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.07)
        .collect();
    let b = -0.3f32;
    let head =
        std::env::temp_dir().join(format!("stepscore-head-{}.safetensors", std::process::id()));
    write_head_file(&head, &w, b);
    let scorer =
        Scorer::open_with(&dir, &HeadSource::File(head.to_path_buf()), &opts(None)).unwrap();
    std::fs::remove_file(&head).ok();
    assert_eq!(scorer.family(), Family::ValueHead);
    assert_head_on_features(&scorer, &backbone, "confidence-tiny", &w, b);
}

#[test]
fn a_head_file_of_the_wrong_width_is_refused_by_name() {
    let dir = fixture("confidence-tiny");
    let head = std::env::temp_dir().join(format!(
        "stepscore-badhead-{}.safetensors",
        std::process::id()
    ));
    write_head_file(&head, &[0.5; 7], 0.0);
    let err =
        Scorer::open_with(&dir, &HeadSource::File(head.to_path_buf()), &opts(None)).unwrap_err();
    std::fs::remove_file(&head).ok();
    let msg = err.to_string();
    assert!(
        msg.contains("v_head.summary.weight") && msg.contains("[1, 7]"),
        "{msg}"
    );
}
