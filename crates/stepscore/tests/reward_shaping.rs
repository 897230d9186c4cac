//! Reward shaping: dense token rewards, progress, Clip, Delta and PAPO
//! advantages, against hand-worked values and their defining identities.

use proptest::prelude::*;
use stepscore::reward::{
    clip_rewards, delta_rewards, dense_token_rewards, papo_advantages, progress_rewards, DenseMode,
};
use stepscore::Error;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn all_close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| close(*x, *y))
}

#[test]
fn dense_last_token_worked_example() {
    // 8 tokens; steps cover [0,3), [3,4), [4,7); token 7 (say EOS) is after
    // the last step. Rewards land on tokens 2, 3 and 6.
    let r = dense_token_rewards(&[0.9, 0.5, 0.3], &[3, 4, 7], 8, DenseMode::LastToken).unwrap();
    assert_eq!(r, vec![0.0, 0.0, 0.9, 0.5, 0.0, 0.0, 0.3, 0.0]);
}

#[test]
fn dense_spread_worked_example() {
    // Same steps: 0.9 over 3 tokens = 0.3 each; 0.5 on its one token;
    // 0.3 over 3 tokens = 0.1 each; nothing on token 7.
    let r = dense_token_rewards(&[0.9, 0.5, 0.3], &[3, 4, 7], 8, DenseMode::Spread).unwrap();
    assert!(
        all_close(&r, &[0.3, 0.3, 0.3, 0.5, 0.1, 0.1, 0.1, 0.0]),
        "{r:?}"
    );
}

#[test]
fn dense_empty_step_goes_to_previous_token() {
    // Step 1 ends where step 0 ends (token 2): its 0.25 joins step 0's last
    // token in both modes. Spread: step 0's 0.5 is 0.25 per token, so token 1
    // gets 0.25 + 0.25 = 0.5; step 2's 1.0 over 2 tokens is 0.5 each.
    let last = dense_token_rewards(&[0.5, 0.25, 1.0], &[2, 2, 4], 4, DenseMode::LastToken).unwrap();
    assert_eq!(last, vec![0.0, 0.75, 0.0, 1.0]);
    let spread = dense_token_rewards(&[0.5, 0.25, 1.0], &[2, 2, 4], 4, DenseMode::Spread).unwrap();
    assert!(all_close(&spread, &[0.25, 0.5, 0.5, 0.5]), "{spread:?}");
}

#[test]
fn dense_rejects_bad_input() {
    let bad = |r: &[f64], e: &[usize], n: usize| {
        let err = dense_token_rewards(r, e, n, DenseMode::Spread).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)));
        err.to_string()
    };
    assert!(bad(&[1.0], &[1, 2], 3).contains("1 step rewards but 2 step ends"));
    assert!(bad(&[1.0, 1.0], &[3, 2], 3).contains("step 1 ends at token 2"));
    assert!(bad(&[1.0], &[4], 3).contains("past the 3 tokens"));
    assert!(bad(&[1.0, 1.0], &[0, 2], 3).contains("step 0 covers no tokens"));
    assert!(bad(&[f64::NAN], &[1], 3).contains("step 0 reward is NaN"));
    // No steps: all-zero rewards.
    assert_eq!(
        dense_token_rewards(&[], &[], 3, DenseMode::LastToken).unwrap(),
        vec![0.0; 3]
    );
}

#[test]
fn dense_mode_names() {
    assert_eq!(
        "last-token".parse::<DenseMode>().unwrap(),
        DenseMode::LastToken
    );
    assert_eq!("spread".parse::<DenseMode>().unwrap(), DenseMode::Spread);
    assert_eq!(
        "Last_Token".parse::<DenseMode>().unwrap(),
        DenseMode::LastToken
    );
    assert!("first".parse::<DenseMode>().is_err());
    for m in [DenseMode::LastToken, DenseMode::Spread] {
        assert_eq!(m.to_string().parse::<DenseMode>().unwrap(), m);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, format!("\"{m}\""));
        assert_eq!(serde_json::from_str::<DenseMode>(&json).unwrap(), m);
    }
}

#[test]
fn progress_worked_example() {
    // Values 0.5 0.7 0.4 0.9 from baseline 0.5: 0.0, +0.2, -0.3, +0.5;
    // sum 0.4 = 0.9 - 0.5.
    let r = progress_rewards(&[0.5, 0.7, 0.4, 0.9], 0.5);
    assert!(all_close(&r, &[0.0, 0.2, -0.3, 0.5]), "{r:?}");
    assert!(progress_rewards(&[], 0.3).is_empty());
}

#[test]
fn clip_and_delta_worked_examples() {
    // Clip at eta = 0.6: 0.9 -> min(0.3, 0) = 0; 0.5 -> -0.1; 0.2 -> -0.4; 0.6 -> 0.
    let c = clip_rewards(&[0.9, 0.5, 0.2, 0.6], 0.6);
    assert!(all_close(&c, &[0.0, -0.1, -0.4, 0.0]), "{c:?}");
    // Delta: 0.9-0.5 = 0.4, 0.5-0.2 = 0.3, 0.2-0.6 = -0.4, last 0.6;
    // sum 0.9 = r_0.
    let d = delta_rewards(&[0.9, 0.5, 0.2, 0.6]);
    assert!(all_close(&d, &[0.4, 0.3, -0.4, 0.6]), "{d:?}");
    assert!(delta_rewards(&[]).is_empty());
    assert_eq!(delta_rewards(&[0.7]), vec![0.7]);
}

#[test]
fn papo_worked_example() {
    // Outcomes o = 1 1 0 1: mean 0.75, population variance
    // (3 * 0.25^2 + 0.75^2) / 4 = 0.75 / 4 = 0.1875, std = sqrt(3)/4.
    // A_out = 0.25 / (sqrt(3)/4) = 1/sqrt(3) for correct, -0.75/(sqrt(3)/4) = -sqrt(3).
    // Process among correct (0.9, 0.5, 0.7): mean 0.7, deviations 0.2 -0.2 0,
    // variance 0.08/3, std = 0.2 * sqrt(2/3); z = +-sqrt(3/2), 0.
    // The incorrect response's 0.2 (and even a NaN there) is ignored.
    // total with lambda 0.5: A_out + 0.5 * A_proc.
    let g = papo_advantages(&[true, true, false, true], &[0.9, 0.5, f64::NAN, 0.7], 0.5).unwrap();
    let s3 = 3f64.sqrt();
    let s15 = 1.5f64.sqrt();
    assert!(
        all_close(&g.outcome, &[1.0 / s3, 1.0 / s3, -s3, 1.0 / s3]),
        "{:?}",
        g.outcome
    );
    assert!(
        all_close(&g.process, &[s15, -s15, 0.0, 0.0]),
        "{:?}",
        g.process
    );
    let want = [1.0 / s3 + 0.5 * s15, 1.0 / s3 - 0.5 * s15, -s3, 1.0 / s3];
    assert!(all_close(&g.total, &want), "{:?}", g.total);
}

#[test]
fn papo_degenerate_groups() {
    // All correct: no outcome signal, process still ranks them.
    // Scores 0.2 0.4: mean 0.3, std 0.1 -> z = -1, +1.
    let g = papo_advantages(&[true, true], &[0.2, 0.4], 1.0).unwrap();
    assert_eq!(g.outcome, vec![0.0, 0.0]);
    assert!(all_close(&g.process, &[-1.0, 1.0]));
    assert!(all_close(&g.total, &[-1.0, 1.0]));
    // One correct response: process advantage 0 everywhere.
    // Outcome 1 0 0: mean 1/3, std sqrt(2)/3 -> A = sqrt(2), -1/sqrt(2), -1/sqrt(2).
    let g = papo_advantages(&[true, false, false], &[0.9, 0.1, 0.3], 2.0).unwrap();
    let r2 = 2f64.sqrt();
    assert!(
        all_close(&g.outcome, &[r2, -1.0 / r2, -1.0 / r2]),
        "{:?}",
        g.outcome
    );
    assert_eq!(g.process, vec![0.0; 3]);
    // Correct responses with equal scores (0.1 summed three times is not
    // exactly 0.3, so this checks the exact all-equal rule): process 0.
    let g = papo_advantages(&[true, true, true], &[0.1, 0.1, 0.1], 1.0).unwrap();
    assert_eq!(g.process, vec![0.0; 3]);
    assert_eq!(g.total, vec![0.0; 3]);
    // Empty group.
    let g = papo_advantages(&[], &[], 1.0).unwrap();
    assert!(g.outcome.is_empty() && g.total.is_empty());
}

#[test]
fn papo_rejects_bad_input() {
    assert!(papo_advantages(&[true], &[0.1, 0.2], 1.0).is_err());
    assert!(papo_advantages(&[true, false], &[0.1, 0.2], f64::NAN).is_err());
    let e = papo_advantages(&[false, true], &[0.1, f64::INFINITY], 1.0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("response 1 is correct"), "{e}");
}

fn rewards() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(-1.0f64..=1.0, 0..30)
}

proptest! {
    #[test]
    fn progress_telescopes(v in rewards(), baseline in -1.0f64..=1.0) {
        let r = progress_rewards(&v, baseline);
        prop_assert_eq!(r.len(), v.len());
        let want = v.last().map_or(0.0, |last| last - baseline);
        prop_assert!((r.iter().sum::<f64>() - want).abs() < 1e-9);
    }

    #[test]
    fn delta_sums_to_first_and_suffixes_to_each(r in rewards()) {
        let d = delta_rewards(&r);
        prop_assert_eq!(d.len(), r.len());
        // The return from step k onward is r_k.
        for k in 0..r.len() {
            prop_assert!((d[k..].iter().sum::<f64>() - r[k]).abs() < 1e-9);
        }
    }

    #[test]
    fn clip_is_nonpositive_and_monotone(r in rewards(), eta in -1.0f64..=1.0) {
        let c = clip_rewards(&r, eta);
        prop_assert!(c.iter().all(|&x| x <= 0.0));
        for (x, y) in r.iter().zip(&c) {
            prop_assert!((*y - (x - eta).min(0.0)).abs() < 1e-15);
        }
    }

    /// Appending any number of repeated high-scoring steps never lifts the
    /// return above a bound fixed by the original steps: Clip's return can
    /// only fall (and stays <= 0), Delta's stays r_0.
    #[test]
    fn repeated_good_steps_cannot_farm_reward(
        r in prop::collection::vec(-1.0f64..=1.0, 1..20),
        high in 0.5f64..=1.0,
        repeats in 1usize..50,
        eta in 0.0f64..=1.0,
    ) {
        let mut farmed = r.clone();
        farmed.extend(std::iter::repeat_n(high, repeats));
        let clip_before: f64 = clip_rewards(&r, eta).iter().sum();
        let clip_after: f64 = clip_rewards(&farmed, eta).iter().sum();
        prop_assert!(clip_after <= clip_before + 1e-12);
        prop_assert!(clip_after <= 0.0);
        let delta_after: f64 = delta_rewards(&farmed).iter().sum();
        prop_assert!((delta_after - r[0]).abs() < 1e-9);
        // Raw step rewards, by contrast, grow with every repeat.
        prop_assert!(farmed.iter().sum::<f64>() > r.iter().sum::<f64>());
    }

    /// Both dense modes preserve the total reward and put nothing outside the steps.
    #[test]
    fn dense_preserves_total(
        steps in prop::collection::vec((-1.0f64..=1.0, 0usize..5), 1..12),
        first_len in 1usize..4,
        tail in 0usize..4,
    ) {
        let mut ends = Vec::new();
        let mut end = 0;
        for (k, (_, len)) in steps.iter().enumerate() {
            end += if k == 0 { first_len } else { *len };
            ends.push(end);
        }
        let n = end + tail;
        let rewards: Vec<f64> = steps.iter().map(|s| s.0).collect();
        let total: f64 = rewards.iter().sum();
        for mode in [DenseMode::LastToken, DenseMode::Spread] {
            let t = dense_token_rewards(&rewards, &ends, n, mode).unwrap();
            prop_assert_eq!(t.len(), n);
            prop_assert!((t.iter().sum::<f64>() - total).abs() < 1e-9);
            prop_assert!(t[end..].iter().all(|&x| x == 0.0));
        }
    }

    /// PAPO: outcome advantages sum to 0 with unit population variance when
    /// outcomes differ; process advantages are 0 off the correct set and sum
    /// to 0 on it; correct responses always get a higher outcome advantage.
    #[test]
    fn papo_properties(
        group in prop::collection::vec((any::<bool>(), 0.0f64..=1.0), 1..16),
        lambda in 0.0f64..=2.0,
    ) {
        let correct: Vec<bool> = group.iter().map(|g| g.0).collect();
        let process: Vec<f64> = group.iter().map(|g| g.1).collect();
        let a = papo_advantages(&correct, &process, lambda).unwrap();
        let n = correct.len() as f64;
        prop_assert!(a.outcome.iter().sum::<f64>().abs() < 1e-9);
        let mixed = correct.iter().any(|&c| c) && correct.iter().any(|&c| !c);
        if mixed {
            let var = a.outcome.iter().map(|x| x * x).sum::<f64>() / n;
            prop_assert!((var - 1.0).abs() < 1e-9);
            let min_correct = (0..correct.len()).filter(|&i| correct[i]).map(|i| a.outcome[i]).fold(f64::INFINITY, f64::min);
            let max_wrong = (0..correct.len()).filter(|&i| !correct[i]).map(|i| a.outcome[i]).fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(min_correct > max_wrong);
        }
        for (i, &ok) in correct.iter().enumerate() {
            if !ok {
                prop_assert_eq!(a.process[i], 0.0);
            }
            prop_assert!((a.total[i] - (a.outcome[i] + lambda * a.process[i])).abs() < 1e-12);
        }
        prop_assert!(a.process.iter().sum::<f64>().abs() < 1e-9);
    }
}
