//! Digit-token statistics of each step (`StepFeatures::digit_confidence`):
//! over the step's tokens whose text is all ASCII digits. Checked against the
//! step statistics, which `features_parity.rs` and `prm_families.rs` tie to
//! the float64 reference (scripts/reference/prm_reference.py): a step made only of
//! digits must give the same numbers, a step without digits none, and a mixed
//! step digit statistics bounded by the step's own.

use std::path::PathBuf;

use stepscore::prm::{Family, FeatureOptions, HeadSource, Scorer, ScorerOptions};

fn backbone() -> Scorer {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prm/confidence-tiny");
    let options = ScorerOptions {
        family: Some(Family::Confidence),
        ..ScorerOptions::default()
    };
    Scorer::open_with(&dir, &HeadSource::Backbone, &options).expect("tiny confidence checkpoint")
}

#[test]
fn digit_statistics_select_the_digit_tokens() {
    let scorer = backbone();
    let steps = ["12345 678", "Then add them up.", "First, 3 + 4 = 7."];
    let f = scorer
        .step_features_with("What is (3 + 4) * 2?", &steps, &with_confidence())
        .unwrap();
    let (all, digits) = (f.confidence.unwrap(), f.digit_confidence.unwrap());
    assert_eq!((all.len(), digits.len()), (3, 3));

    // Only digits (and the space the tokenizer may fold into a digit token):
    // the digit statistics are the step statistics.
    let only: Vec<u32> = scorer
        .tokenizer()
        .encode(steps[0], false)
        .unwrap()
        .into_iter()
        .filter(|&t| {
            let s = scorer.tokenizer().decode(&[t], false).unwrap();
            !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    assert!(!only.is_empty());
    if only.len() == all[0].tokens {
        assert_eq!(digits[0].tokens, all[0].tokens);
        assert!((digits[0].min_logprob - all[0].min_logprob).abs() < 1e-12);
        assert!((digits[0].mean_logprob - all[0].mean_logprob).abs() < 1e-12);
    } else {
        // The tokenizer keeps the space as a token of its own: one fewer digit token.
        assert_eq!(digits[0].tokens, only.len());
        assert!(digits[0].min_logprob >= all[0].min_logprob);
    }

    // No digits: no evidence, written as zeros.
    assert_eq!(digits[1].tokens, 0);
    assert_eq!((digits[1].min_logprob, digits[1].mean_logprob), (0.0, 0.0));

    // Mixed: three digits; their statistics lie within the step's.
    assert_eq!(digits[2].tokens, 3, "{:?}", digits[2]);
    assert!(digits[2].min_logprob >= all[2].min_logprob);
    assert!(digits[2].min_logprob <= digits[2].mean_logprob && digits[2].mean_logprob <= 0.0);

    // Without --confidence nothing is computed.
    let plain = scorer.step_features("q", &["1 + 1 = 2"]).unwrap();
    assert!(plain.digit_confidence.is_none() && plain.confidence.is_none());
}

/// The hidden states plus each step's confidence statistics.
pub(crate) fn with_confidence() -> FeatureOptions {
    FeatureOptions {
        confidence: true,
        ..FeatureOptions::default()
    }
}
