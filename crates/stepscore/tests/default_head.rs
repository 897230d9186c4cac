//! The fast PRM (SmolLM2-135M-Instruct GGUF + the embedded real-label head)
//! scores exactly what the trainer saw: the head applied by hand to the
//! backbone's step features (the `stepscore features` path used to build the
//! training set: layer 12's hidden state and the nine step statistics)
//! equals the scorer's step scores. Skipped with a printed reason when the
//! GGUF is not cached.

use stepscore::prm::head_file::SMOLLM2_HEAD_NAME;
use stepscore::prm::{Family, FeatureOptions, HeadFile, HeadSource, Scorer, ScorerOptions};
use stepscore::testing::find_smollm2_gguf;

/// SmolLM2-135M's hidden width.
const HIDDEN: usize = 576;

#[test]
fn embedded_head_reads_smollm2_s_layer_12_and_nine_statistics() {
    let head = HeadFile::embedded(SMOLLM2_HEAD_NAME).unwrap();
    assert_eq!(head.name(), SMOLLM2_HEAD_NAME);
    assert_eq!(head.family().unwrap(), Family::ValueHead);
    let input = head.input().unwrap();
    assert_eq!(input.layers, vec![12]);
    assert_eq!(input.stats.len(), 9);
    assert!(!input.stats_only);
    assert!(input.min_with.is_none(), "the fast PRM has no guard");
    let (shape, w) = head.tensor("v_head.summary.weight").unwrap();
    assert_eq!(
        shape,
        vec![1, HIDDEN + 9],
        "hidden state, then the statistics"
    );
    assert!(w.iter().all(|v| v.is_finite()));
    assert!(
        w.iter().any(|&v| v != 0.0),
        "the head is trained, not zeros"
    );
    assert_eq!(
        head.threshold().unwrap(),
        Some(0.607107),
        "the F1-optimal threshold on its real validation traces (stepscore-train --threshold-on)"
    );
    assert_eq!(head.solution_threshold().unwrap(), None);
}

#[test]
fn fast_prm_scores_equal_the_head_on_training_features() {
    let Some(gguf) = find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (run `stepscore fetch`)");
        return;
    };
    let options = ScorerOptions {
        threads: 2,
        ..Default::default()
    };
    let head = HeadFile::embedded(SMOLLM2_HEAD_NAME).unwrap();
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
        assert_eq!(feats.hidden[i].len(), HIDDEN);
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
            "step {i}: {by_hand} vs {score}"
        );
    }
}
