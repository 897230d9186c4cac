//! A tiny training run on a fixed toy set: two Gaussian blobs in 8 dimensions.

use std::collections::HashMap;
use std::path::Path;

use safetensors::SafeTensors;
use stepscore_train::{train, Examples, ExportedHead, HeadKind, TrainConfig};

/// splitmix64 + Box–Muller: a fixed, dependency-free source of normal samples.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-12);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// 100 correct + 100 wrong rows; class means differ by 1 standard deviation in every
/// dimension, so the Bayes AUROC is Phi(sqrt(8) / sqrt(2)) = Phi(2) ~ 0.977. Each dimension is
/// then scaled by 3(i+1) and shifted by 10 i, so standardization (and its folding) matters.
fn blobs() -> Examples {
    let (dims, n) = (8, 200);
    let mut rng = Rng(7);
    let mut x = Vec::with_capacity(n * dims);
    let mut y = Vec::with_capacity(n);
    for r in 0..n {
        let correct = r % 2 == 0;
        for i in 0..dims {
            let centre = if correct { 0.5 } else { -0.5 };
            let v = centre + rng.normal();
            x.push((v * 3.0 * (i + 1) as f64 + 10.0 * i as f64) as f32);
        }
        y.push(correct);
    }
    Examples::new(dims, x, y).unwrap()
}

fn config(head: HeadKind) -> TrainConfig {
    TrainConfig {
        head,
        epochs: 40,
        batch_size: 32,
        learning_rate: 1e-2,
        weight_decay: 0.0,
        patience: 40,
        seed: 3,
    }
}

fn check_run(head: HeadKind) -> ExportedHead {
    let data = blobs();
    let trained = train(&data, None, &config(head)).unwrap();
    let first = trained.history.first().unwrap().train_loss;
    let last = trained.history.last().unwrap().train_loss;
    assert!(last < 0.7 * first, "{head:?}: loss {first} -> {last}");

    let predicted = trained.predict(&data).unwrap();
    let auroc = stepscore::metrics::auroc(&predicted, &data.y)
        .unwrap()
        .unwrap();
    assert!(auroc > 0.9, "{head:?}: toy AUROC {auroc}");

    // Export, serialize, re-read: the file's tensors have the family's shapes...
    let head_weights = trained.export().unwrap();
    let bytes = head_weights.to_safetensors(HashMap::new()).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let shapes: HashMap<String, Vec<usize>> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.shape().to_vec()))
        .collect();
    let expected: HashMap<String, Vec<usize>> = match head {
        HeadKind::Linear => [
            ("v_head.summary.weight", vec![1, 8]),
            ("v_head.summary.bias", vec![1]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        HeadKind::Mlp { hidden } => [
            ("v_head.summary.0.weight", vec![hidden, 8]),
            ("v_head.summary.0.bias", vec![hidden]),
            ("v_head.summary.2.weight", vec![1, hidden]),
            ("v_head.summary.2.bias", vec![1]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    };
    assert_eq!(shapes, expected);

    // ...and the re-read weights, applied by hand to the RAW rows, give burn's predictions
    // on the standardized rows: the standardization is folded in correctly.
    let reread = ExportedHead::from_safetensors(&bytes, Path::new("toy.safetensors")).unwrap();
    assert_eq!(reread, head_weights);
    for (r, &p) in predicted.iter().enumerate() {
        let by_hand = reread.score(data.row(r).unwrap()).unwrap();
        assert!(
            (by_hand - p).abs() < 1e-5,
            "{head:?} row {r}: by hand {by_hand}, trainer {p}"
        );
    }
    reread
}

#[test]
fn linear_head_learns_the_blobs_and_exports_raw_space_weights() {
    check_run(HeadKind::Linear);
}

#[test]
fn mlp_head_learns_the_blobs_and_exports_raw_space_weights() {
    check_run(HeadKind::Mlp { hidden: 16 });
}

#[test]
fn training_is_reproducible_with_a_fixed_seed() {
    let data = blobs();
    let a = train(&data, None, &config(HeadKind::Linear))
        .unwrap()
        .export()
        .unwrap();
    let b = train(&data, None, &config(HeadKind::Linear))
        .unwrap()
        .export()
        .unwrap();
    assert_eq!(a, b);
}

#[test]
fn early_stopping_keeps_the_best_validation_epoch() {
    let data = blobs();
    let cfg = TrainConfig {
        patience: 2,
        epochs: 40,
        ..config(HeadKind::Linear)
    };
    let trained = train(&data, Some(&data), &cfg).unwrap();
    let best = trained
        .history
        .iter()
        .filter_map(|l| l.val_auroc)
        .fold(f64::MIN, f64::max);
    let kept = trained
        .history
        .iter()
        .find(|l| l.epoch == trained.best_epoch)
        .unwrap();
    assert_eq!(kept.val_auroc, Some(best));
    // Stopped at most `patience` epochs after the best one.
    assert!(trained.history.last().unwrap().epoch <= trained.best_epoch + 2);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let one_class = Examples::new(2, vec![0.0, 1.0, 2.0, 3.0], vec![true, true]).unwrap();
    assert!(train(&one_class, None, &config(HeadKind::Linear))
        .unwrap_err()
        .to_string()
        .contains("both classes"));
    let data = blobs();
    let narrow = Examples::new(1, vec![0.0, 1.0], vec![true, false]).unwrap();
    assert!(train(&data, Some(&narrow), &config(HeadKind::Linear)).is_err());
    assert!(train(
        &data,
        None,
        &TrainConfig {
            batch_size: 0,
            ..config(HeadKind::Linear)
        }
    )
    .is_err());
    assert!(Examples::new(2, vec![0.0, f32::NAN], vec![true]).is_err());
}
