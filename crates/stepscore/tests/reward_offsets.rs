//! Dense rewards on a policy's own tokens (`dense_rewards_at_offsets`):
//! a hand-worked example, the documented edge cases, and random offsets
//! against a brute-force reference that assigns each token to its step by
//! scanning the steps.

use proptest::prelude::*;
use stepscore::reward::{dense_rewards_at_offsets, DenseMode};
use stepscore::{Error, Span};

#[test]
fn worked_example_straddling_token_and_eos() {
    // "2+2=4.\n\nSo 4." : step 0 = bytes 0..6, step 1 = 8..13.
    // Tokens: "2" "+2" "=4" ".\n\n" "So" " 4." and an EOS reported as (0,0).
    // ".\n\n" starts in step 0 (byte 5) and ends past it: step 0's last token.
    let spans = [Span::new(0, 6), Span::new(8, 13)];
    let offsets = [(0, 1), (1, 3), (3, 5), (5, 8), (8, 10), (10, 13), (0, 0)];
    let r =
        dense_rewards_at_offsets(&[0.8, 0.4], &spans, &offsets, 13, DenseMode::LastToken).unwrap();
    assert_eq!(r, vec![0.0, 0.0, 0.0, 0.8, 0.0, 0.4, 0.0]);
    let r = dense_rewards_at_offsets(&[0.8, 0.4], &spans, &offsets, 13, DenseMode::Spread).unwrap();
    let want = [0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.0];
    assert!(
        r.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
        "{r:?}"
    );
}

#[test]
fn leading_special_token_belongs_to_the_first_step() {
    // A BOS at (0,0) before the text sits at byte 0, inside step 0.
    let r = dense_rewards_at_offsets(
        &[1.0],
        &[Span::new(0, 4)],
        &[(0, 0), (0, 2), (2, 4)],
        4,
        DenseMode::Spread,
    )
    .unwrap();
    assert_eq!(r.len(), 3);
    assert!(r.iter().all(|x| (x - 1.0 / 3.0).abs() < 1e-12), "{r:?}");
}

#[test]
fn step_inside_one_token_goes_to_the_previous_step_token() {
    // One token covers both steps: step 1 starts no token of its own, so
    // its reward joins step 0's last token.
    let r = dense_rewards_at_offsets(
        &[0.5, 0.25],
        &[Span::new(0, 2), Span::new(3, 5)],
        &[(0, 6)],
        6,
        DenseMode::LastToken,
    )
    .unwrap();
    assert_eq!(r, vec![0.75]);
}

#[test]
fn rejects_bad_input_naming_the_fault() {
    let msg = |r: stepscore::Result<Vec<f64>>| match r {
        Err(Error::InvalidArgument(m)) => m,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    let lt = DenseMode::LastToken;
    let m = msg(dense_rewards_at_offsets(&[1.0], &[], &[(0, 1)], 1, lt));
    assert!(m.contains("1 step rewards but 0 step spans"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[1.0],
        &[Span::new(0, 9)],
        &[(0, 1)],
        4,
        lt,
    ));
    assert!(m.contains("step 0 span 0..9"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[1.0, 1.0],
        &[Span::new(0, 3), Span::new(1, 2)],
        &[(0, 3)],
        3,
        lt,
    ));
    assert!(m.contains("step 1 ends at byte 2"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[1.0],
        &[Span::new(0, 3)],
        &[(2, 3), (0, 1)],
        3,
        lt,
    ));
    assert!(m.contains("token 1 starts at byte 0"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[1.0],
        &[Span::new(0, 3)],
        &[(2, 1)],
        3,
        lt,
    ));
    assert!(m.contains("token 0 offsets 2..1"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[1.0],
        &[Span::new(0, 1)],
        &[(1, 3)],
        3,
        lt,
    ));
    assert!(m.contains("covers no tokens"), "{m}");
    let m = msg(dense_rewards_at_offsets(
        &[f64::NAN],
        &[Span::new(0, 3)],
        &[(0, 3)],
        3,
        lt,
    ));
    assert!(m.contains("NaN"), "{m}");
}

/// A response of `len` bytes cut into tokens (some empty, as special tokens
/// are), steps with increasing ends, and rewards.
/// Response length, token offsets, step spans, step rewards.
type Case = (usize, Vec<(usize, usize)>, Vec<Span>, Vec<f64>);

fn case() -> impl Strategy<Value = Case> {
    (1usize..200).prop_flat_map(|len| {
        let cuts = prop::collection::btree_set(1..len.max(2), 0..len.min(40));
        let ends = prop::collection::btree_set(1..=len, 1..8);
        let empties = prop::collection::vec(any::<bool>(), 64);
        (Just(len), cuts, ends, empties).prop_flat_map(|(len, cuts, ends, empties)| {
            let mut bounds: Vec<usize> = std::iter::once(0).chain(cuts).collect();
            bounds.push(len);
            bounds.dedup();
            let mut offsets = Vec::new();
            for (i, w) in bounds.windows(2).enumerate() {
                if empties[i % empties.len()] && i % 3 == 0 {
                    offsets.push((0, 0));
                }
                offsets.push((w[0], w[1]));
            }
            // Step k spans from the previous end (plus a gap when room) to its end.
            let ends: Vec<usize> = ends.into_iter().collect();
            let mut spans = Vec::new();
            let mut prev = 0;
            for &e in &ends {
                spans.push(Span::new((prev + 1).min(e), e));
                prev = e;
            }
            let n = spans.len();
            (
                Just(len),
                Just(offsets),
                Just(spans),
                prop::collection::vec(-2.0f64..2.0, n),
            )
        })
    })
}

/// Which step each token belongs to, by scanning: a non-empty token belongs
/// to the first step whose end is past its start; an empty one to the step
/// of the position where the previous token ended.
fn reference_owner(offsets: &[(usize, usize)], spans: &[Span]) -> Vec<Option<usize>> {
    let mut prev_end = 0;
    offsets
        .iter()
        .map(|&(s, e)| {
            let pos = if s == e { prev_end } else { s };
            if s != e {
                prev_end = e;
            }
            spans.iter().position(|sp| pos < sp.end)
        })
        .collect()
}

proptest! {
    #[test]
    #[allow(clippy::needless_range_loop)]
    fn random_offsets_sum_per_step((len, offsets, spans, rewards) in case()) {
        let owner = reference_owner(&offsets, &spans);
        // Steps owning no token: the implementation folds them into the
        // previous step's last token; the reference folds their rewards the same way.
        let mut expected = vec![0.0; spans.len()];
        let mut last_owner: Option<usize> = None;
        for k in 0..spans.len() {
            if owner.contains(&Some(k)) {
                last_owner = Some(k);
                expected[k] += rewards[k];
            } else if let Some(j) = last_owner {
                expected[j] += rewards[k];
            } else {
                // The first step owns no token: an error, checked below.
                let r = dense_rewards_at_offsets(&rewards, &spans, &offsets, len, DenseMode::Spread);
                prop_assert!(r.is_err());
                return Ok(());
            }
        }
        for mode in [DenseMode::LastToken, DenseMode::Spread] {
            let r = dense_rewards_at_offsets(&rewards, &spans, &offsets, len, mode).unwrap();
            prop_assert_eq!(r.len(), offsets.len());
            let total: f64 = r.iter().sum();
            prop_assert!((total - rewards.iter().sum::<f64>()).abs() < 1e-9);
            for k in 0..spans.len() {
                let got: f64 = r.iter().zip(&owner).filter(|(_, o)| **o == Some(k)).map(|(x, _)| x).sum();
                prop_assert!((got - expected[k]).abs() < 1e-9, "step {} got {} want {}", k, got, expected[k]);
            }
            // Tokens after the last step get nothing.
            prop_assert!(r.iter().zip(&owner).all(|(x, o)| o.is_some() || *x == 0.0));
            if mode == DenseMode::LastToken {
                // Only each owning step's last token is non-zero.
                for (t, x) in r.iter().enumerate() {
                    let is_last = owner[t].is_some() && !owner[t + 1..].contains(&owner[t]);
                    prop_assert!(is_last || *x == 0.0, "token {} carries {}", t, x);
                }
            }
        }
    }
}
