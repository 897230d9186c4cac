//! The small PRMs (SmolLM2-135M-Instruct and Qwen2.5-Coder-0.5B-Instruct,
//! each GGUF + its embedded real-label head) score exactly what the trainer
//! saw: the head applied by hand to the backbone's step features (the
//! `stepscore features` path used to build the training set: one layer's
//! hidden state and the nine step statistics) equals the scorer's step
//! scores. Skipped with a printed reason when a GGUF is not cached.

use std::path::PathBuf;

use stepscore::prm::head_file::{QWEN05B_HEAD_NAME, SMOLLM2_HEAD_NAME};
use stepscore::prm::{Family, FeatureOptions, HeadFile, HeadSource, Scorer, ScorerOptions};
use stepscore::testing::{find_catalog_model, find_smollm2_gguf};

/// One embedded head and what its training recipe fixed.
struct Shipped {
    head: &'static str,
    /// The backbone's hidden width.
    hidden: usize,
    layer: usize,
    /// The F1-optimal threshold on its real validation traces
    /// (`stepscore-train --threshold-on`).
    threshold: f64,
}

const SMOLLM2: Shipped = Shipped {
    head: SMOLLM2_HEAD_NAME,
    hidden: 576,
    layer: 12,
    threshold: 0.607107,
};

const QWEN05B: Shipped = Shipped {
    head: QWEN05B_HEAD_NAME,
    hidden: 896,
    layer: 12,
    threshold: 0.490523,
};

fn check_embedded(shipped: &Shipped) {
    let head = HeadFile::embedded(shipped.head).unwrap();
    assert_eq!(head.name(), shipped.head);
    assert_eq!(head.family().unwrap(), Family::ValueHead);
    let input = head.input().unwrap();
    assert_eq!(input.layers, vec![shipped.layer]);
    assert_eq!(input.stats.len(), 9);
    assert!(!input.stats_only);
    assert!(input.min_with.is_none(), "a small PRM has no guard");
    let (shape, w) = head.tensor("v_head.summary.weight").unwrap();
    assert_eq!(
        shape,
        vec![1, shipped.hidden + 9],
        "hidden state, then the statistics"
    );
    assert!(w.iter().all(|v| v.is_finite()));
    assert!(
        w.iter().any(|&v| v != 0.0),
        "the head is trained, not zeros"
    );
    assert_eq!(head.threshold().unwrap(), Some(shipped.threshold));
    assert_eq!(head.solution_threshold().unwrap(), None);
}

#[test]
fn embedded_heads_read_one_layer_and_nine_statistics() {
    check_embedded(&SMOLLM2);
    check_embedded(&QWEN05B);
}

/// The scorer's step scores against the head applied by hand (in f64) to
/// the backbone's features of the same steps.
fn scores_equal_the_head_on_training_features(gguf: PathBuf, shipped: &Shipped) {
    let options = ScorerOptions {
        threads: 2,
        ..Default::default()
    };
    let head = HeadFile::embedded(shipped.head).unwrap();
    let input = head.input().unwrap();
    let scorer = Scorer::open_with(&gguf, &HeadSource::Loaded(head.clone()), &options).unwrap();
    assert_eq!(scorer.family(), Family::ValueHead);
    let backbone = Scorer::open_with(
        &gguf,
        &HeadSource::Backbone,
        &ScorerOptions {
            family: Some(Family::ValueHead),
            ..options.clone()
        },
    )
    .unwrap();
    let (_, w) = head.tensor("v_head.summary.weight").unwrap();
    let (_, b) = head.tensor("v_head.summary.bias").unwrap();
    let problem =
        "Olivia can peel 14 onions a minute. How long does it take her to peel 1890 onions?";
    let steps = [
        "1890 onions / 14 onions/minute = 135 minutes",
        "The final answer is 135.",
    ];
    let scores = scorer.score_steps(problem, &steps).unwrap();
    let feats = backbone
        .step_features_with(
            problem,
            &steps,
            &FeatureOptions {
                layers: input.layers.clone(),
                confidence: true,
            },
        )
        .unwrap();
    let confidence = feats.confidence.unwrap();
    let digits = feats.digit_confidence.unwrap();
    assert_eq!(feats.hidden.len(), 2);
    for (i, score) in scores.step_scores.iter().enumerate() {
        assert_eq!(feats.hidden[i].len(), shipped.hidden);
        let stats = input
            .stats
            .iter()
            .map(|st| st.value(&confidence[i], &digits[i]));
        let z: f64 = feats.hidden[i]
            .iter()
            .copied()
            .chain(stats)
            .zip(&w)
            .map(|(x, w)| f64::from(x) * f64::from(*w))
            .sum::<f64>()
            + f64::from(b[0]);
        let by_hand = 1.0 / (1.0 + (-z).exp());
        let score = score.unwrap();
        assert!(
            (by_hand - score).abs() <= 1e-6,
            "{}: step {i}: {by_hand} vs {score}",
            shipped.head
        );
    }
}

#[test]
fn fast_prm_scores_equal_the_head_on_training_features() {
    let Some(gguf) = find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
        return;
    };
    scores_equal_the_head_on_training_features(gguf, &SMOLLM2);
}

#[test]
fn browser_size_prm_scores_equal_the_head_on_training_features() {
    let Some(gguf) = find_catalog_model("qwen2.5-coder-0.5b") else {
        eprintln!(
            "SKIPPED: Qwen2.5-Coder-0.5B GGUF not found (run `stepscore fetch qwen2.5-coder-0.5b`)"
        );
        return;
    };
    scores_equal_the_head_on_training_features(gguf, &QWEN05B);
}
