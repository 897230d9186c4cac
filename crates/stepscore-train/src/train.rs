//! Minibatch Adam on class-balanced BCE, with early stopping on validation step AUROC.

use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, GradientsParams};
use burn::prelude::*;

use crate::calibrate::{calibrate, Calibrated};
use crate::config::{HeadKind, TrainConfig};
use crate::data::{Examples, RowLayout};
use crate::error::{Error, Result};
use crate::export::ExportedHead;
use crate::model::HeadModel;
use crate::standardize::Standardizer;

/// Rows per forward pass when predicting (bounds the tensor size, not the data size).
const PREDICT_CHUNK: usize = 4096;

/// One line of the training log. Epoch 0 is the untrained model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EpochLog {
    pub epoch: usize,
    /// Class-weighted BCE over the whole training set, measured after the epoch.
    pub train_loss: f64,
    pub train_auroc: Option<f64>,
    pub val_auroc: Option<f64>,
}

/// The outcome: the selected model, the standardization it expects, and the log.
#[derive(Debug)]
pub struct Trained {
    model: HeadModel,
    pub standardizer: Standardizer,
    pub history: Vec<EpochLog>,
    /// The epoch whose model was kept (best validation AUROC, else the last).
    pub best_epoch: usize,
    pub config: TrainConfig,
    /// Platt scaling and threshold from validation, applied by
    /// [`Trained::predict`] and folded into [`Trained::export`].
    pub calibration: Option<Calibrated>,
}

/// splitmix64: a tiny, fixed, seedable generator for the shuffle.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// Per-row weights that give both classes equal total weight: n / (2 n_class).
fn class_weights(y: &[bool]) -> Result<(f32, f32)> {
    let n = y.len() as f64;
    let pos = y.iter().filter(|&&b| b).count() as f64;
    let neg = n - pos;
    if pos == 0.0 || neg == 0.0 {
        return Err(Error::Data(format!(
            "training needs both classes; got {pos} correct and {neg} wrong steps"
        )));
    }
    Ok(((n / (2.0 * pos)) as f32, (n / (2.0 * neg)) as f32))
}

/// Mean of w * BCE(sigmoid(z), y), in the overflow-free form max(z,0) - y z + ln(1 + e^-|z|).
fn weighted_bce(logits: Tensor<1>, targets: Tensor<1>, weights: Tensor<1>) -> Tensor<1> {
    let per_row =
        logits.clone().clamp_min(0.0) - logits.clone() * targets + logits.abs().neg().exp().log1p();
    (per_row * weights).mean()
}

fn batch_tensors(
    ex: &Examples,
    rows: &[usize],
    w: (f32, f32),
    device: &Device,
) -> (Tensor<2>, Tensor<1>, Tensor<1>) {
    let mut x = Vec::with_capacity(rows.len() * ex.width);
    let mut y = Vec::with_capacity(rows.len());
    let mut weight = Vec::with_capacity(rows.len());
    for &r in rows {
        if let Some(row) = ex.row(r) {
            x.extend_from_slice(row);
            let label = ex.y.get(r).copied().unwrap_or(false);
            y.push(if label { 1f32 } else { 0.0 });
            weight.push(if label { w.0 } else { w.1 });
        }
    }
    let n = y.len();
    (
        Tensor::from_data(TensorData::new(x, [n, ex.width]), device),
        Tensor::from_data(TensorData::new(y, [n]), device),
        Tensor::from_data(TensorData::new(weight, [n]), device),
    )
}

fn read1(t: Tensor<1>) -> Result<Vec<f32>> {
    let data = t
        .try_into_data()
        .map_err(|e| Error::Backend(format!("reading predictions: {e:?}")))?;
    data.as_slice::<f32>()
        .map(<[f32]>::to_vec)
        .map_err(|e| Error::Backend(format!("reading predictions: {e:?}")))
}

/// Logits of an inference (non-autodiff) model for already standardized rows.
fn logits(model: &HeadModel, ex: &Examples, device: &Device) -> Result<Vec<f32>> {
    let mut out = Vec::with_capacity(ex.len());
    let all: Vec<usize> = (0..ex.len()).collect();
    for rows in all.chunks(PREDICT_CHUNK) {
        let (x, _, _) = batch_tensors(ex, rows, (1.0, 1.0), device);
        out.extend(read1(model.forward(x))?);
    }
    Ok(out)
}

fn sigmoid(z: f32) -> f64 {
    1.0 / (1.0 + (-(z as f64)).exp())
}

/// Class-weighted BCE (f64) of `logits` against `ex.y`.
fn loss_of(logits: &[f32], y: &[bool], w: (f32, f32)) -> f64 {
    let total: f64 = logits
        .iter()
        .zip(y)
        .map(|(&z, &label)| {
            let z = z as f64;
            let t = if label { 1.0 } else { 0.0 };
            let weight = if label { w.0 } else { w.1 } as f64;
            weight * (z.max(0.0) - z * t + (-z.abs()).exp().ln_1p())
        })
        .sum();
    total / y.len().max(1) as f64
}

fn auroc_of(logits: &[f32], y: &[bool]) -> Result<Option<f64>> {
    let scores: Vec<f64> = logits.iter().map(|&z| sigmoid(z)).collect();
    Ok(stepscore::metrics::auroc(&scores, y)?)
}

fn check_config(cfg: &TrainConfig) -> Result<()> {
    let bad = |m: &str| Err(Error::InvalidArgument(m.to_string()));
    if cfg.batch_size == 0 {
        return bad("batch size must be at least 1");
    }
    if !(cfg.learning_rate.is_finite() && cfg.learning_rate > 0.0) {
        return bad("learning rate must be a positive number");
    }
    if !(cfg.weight_decay.is_finite() && cfg.weight_decay >= 0.0) {
        return bad("weight decay must be a non-negative number");
    }
    if let HeadKind::Mlp { hidden: 0 } = cfg.head {
        return bad("the MLP's hidden width must be at least 1");
    }
    Ok(())
}

/// Trains a head on `train` (raw features), selecting the epoch by AUROC on `val` when given.
pub fn train(train: &Examples, val: Option<&Examples>, cfg: &TrainConfig) -> Result<Trained> {
    check_config(cfg)?;
    if let Some(v) = val {
        if v.width != train.width {
            return Err(Error::Data(format!(
                "validation features have width {}, training features {}",
                v.width, train.width
            )));
        }
    }
    let weights = class_weights(&train.y)?;
    let standardizer = Standardizer::fit(train);
    let train_z = standardizer.apply(train);
    let val_z = val.map(|v| standardizer.apply(v));

    let device = Device::flex().autodiff();
    device.seed(cfg.seed);
    let infer_device = device.clone().inner();
    let mut model = HeadModel::new(cfg.head, train.width, &device);
    let mut optim = AdamConfig::new()
        .with_weight_decay(
            (cfg.weight_decay > 0.0).then(|| WeightDecayConfig::new(cfg.weight_decay)),
        )
        .init();
    let mut rng = SplitMix(cfg.seed);

    let evaluate = |model: &HeadModel, epoch: usize| -> Result<EpochLog> {
        let z = logits(model, &train_z, &infer_device)?;
        let val_auroc = match &val_z {
            Some(v) => auroc_of(&logits(model, v, &infer_device)?, &v.y)?,
            None => None,
        };
        Ok(EpochLog {
            epoch,
            train_loss: loss_of(&z, &train_z.y, weights),
            train_auroc: auroc_of(&z, &train_z.y)?,
            val_auroc,
        })
    };

    let mut history = vec![evaluate(&model.valid(), 0)?];
    let mut best = (0usize, history[0].val_auroc, model.valid());
    let mut order: Vec<usize> = (0..train_z.len()).collect();
    for epoch in 1..=cfg.epochs {
        rng.shuffle(&mut order);
        for rows in order.chunks(cfg.batch_size) {
            let (x, y, w) = batch_tensors(&train_z, rows, weights, &device);
            let loss = weighted_bce(model.forward(x), y, w);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optim.step(cfg.learning_rate, model, grads);
        }
        let current = model.valid();
        let log = evaluate(&current, epoch)?;
        let improved = match (log.val_auroc, best.1) {
            (Some(now), Some(before)) => now > before,
            (Some(_), None) => true,
            // Without validation AUROC the last epoch is kept.
            (None, _) => true,
        };
        history.push(log);
        if improved {
            best = (epoch, history.last().and_then(|l| l.val_auroc), current);
        } else if epoch - best.0 >= cfg.patience.max(1) {
            break;
        }
    }
    Ok(Trained {
        model: best.2,
        standardizer,
        history,
        best_epoch: best.0,
        config: cfg.clone(),
        calibration: None,
    })
}

/// [`train`], Platt calibration on `val` and the threshold on `whole`'s traces (`None`:
/// `val`'s), when `val` is given, then the epoch log
/// and the calibration (JSON lines) and a summary on stderr, and the head written to `out`
/// (see [`Trained::save`]): what both `stepscore-train` and `stepscore train` do. Rows are
/// laid out as `layout` says, which the head file records.
pub fn train_and_save(
    train_ex: &Examples,
    val: Option<&Examples>,
    whole: Option<&Examples>,
    cfg: &TrainConfig,
    out: &std::path::Path,
    layout: &RowLayout,
) -> Result<Trained> {
    let mut trained = train(train_ex, val, cfg)?;
    for log in &trained.history {
        eprintln!("{}", serde_json::to_string(log).unwrap_or_default());
    }
    if let Some(v) = val {
        let z = trained.logits(v)?;
        let zw = whole.map(|w| trained.logits(w)).transpose()?;
        let c = calibrate(&z, v, zw.as_deref().zip(whole))?;
        eprintln!("{}", serde_json::json!({ "calibration": &c }).to_string());
        trained.calibration = Some(c);
    }
    trained.save(out, layout)?;
    eprintln!(
        "wrote {} (best epoch {}, validation step AUROC {}, threshold {})",
        out.display(),
        trained.best_epoch,
        trained
            .best_val_auroc()
            .map_or("n/a".to_string(), |a| format!("{a:.4}")),
        trained
            .calibration
            .as_ref()
            .and_then(|c| c.threshold)
            .map_or("n/a".to_string(), |t| format!("{t:.4}"))
    );
    Ok(trained)
}

impl Trained {
    /// P(step correct) for raw feature rows, computed by burn on standardized inputs.
    pub fn predict(&self, ex: &Examples) -> Result<Vec<f64>> {
        let (a, c) = self
            .calibration
            .as_ref()
            .map_or((1.0, 0.0), |c| (c.scale, c.offset));
        Ok(self
            .logits(ex)?
            .into_iter()
            .map(|z| 1.0 / (1.0 + (-(a * z + c)).exp()))
            .collect())
    }

    /// The head's uncalibrated logits for raw feature rows.
    fn logits(&self, ex: &Examples) -> Result<Vec<f64>> {
        if ex.width != self.standardizer.mean.len() {
            return Err(Error::Data(format!(
                "features have width {}, the head was trained on {}",
                ex.width,
                self.standardizer.mean.len()
            )));
        }
        let device = Device::flex();
        let z = logits(&self.model, &self.standardizer.apply(ex), &device)?;
        Ok(z.into_iter().map(f64::from).collect())
    }

    /// The validation AUROC of the kept epoch, when there was a validation set.
    pub fn best_val_auroc(&self) -> Option<f64> {
        self.history
            .iter()
            .find(|l| l.epoch == self.best_epoch)
            .and_then(|l| l.val_auroc)
    }

    /// Exports the head and writes it as safetensors with the training
    /// settings in the header metadata (`stepscore.*`): the row layout
    /// (`stepscore.step_stats`, `.stats_only`, `.layer`) and, when
    /// calibrated, the threshold and the validation ECE before and after.
    pub fn save(&self, path: &std::path::Path, layout: &RowLayout) -> Result<()> {
        let head = self.export()?;
        let kind = match self.config.head {
            HeadKind::Linear => "linear".to_string(),
            HeadKind::Mlp { hidden } => format!("mlp{hidden}"),
        };
        let mut meta = std::collections::HashMap::new();
        meta.insert("format".to_string(), "pt".to_string());
        meta.insert("stepscore.head".to_string(), kind);
        meta.insert(
            "stepscore.width".to_string(),
            self.standardizer.mean.len().to_string(),
        );
        // What the engine reads (row layout, threshold): the core's own spelling.
        let input = stepscore::prm::HeadInput {
            layers: layout.layers.clone(),
            stats: layout.stats.clone(),
            stats_only: layout.stats_only,
            threshold: self.calibration.as_ref().and_then(|c| c.threshold),
            // Fitted later, on the verdict over model-written solutions.
            solution_threshold: None,
            min_with: None,
        };
        meta.extend(input.metadata());
        meta.insert("stepscore.seed".to_string(), self.config.seed.to_string());
        meta.insert(
            "stepscore.best_epoch".to_string(),
            self.best_epoch.to_string(),
        );
        if let Some(a) = self.best_val_auroc() {
            meta.insert("stepscore.val_step_auroc".to_string(), format!("{a:.4}"));
        }
        if let Some(c) = &self.calibration {
            meta.insert(
                "stepscore.val_ece_before".to_string(),
                format!("{:.4}", c.ece_before),
            );
            meta.insert(
                "stepscore.val_ece_after".to_string(),
                format!("{:.4}", c.ece_after),
            );
        }
        head.save(path, meta)
    }

    /// The head over raw features: standardization folded into the first
    /// layer, Platt scaling (when calibrated) into the last.
    pub fn export(&self) -> Result<ExportedHead> {
        let head = self.export_uncalibrated()?;
        Ok(match &self.calibration {
            Some(c) => head.scaled(c.scale, c.offset),
            None => head,
        })
    }

    fn export_uncalibrated(&self) -> Result<ExportedHead> {
        let layers = self.model.layers()?;
        let first = layers
            .first()
            .ok_or_else(|| Error::Backend("model has no layers".into()))?;
        let (w0, b0) = self.standardizer.fold(&first.weight, &first.bias);
        match (self.config.head, layers.get(1)) {
            (HeadKind::Linear, None) => {
                let [bias] = b0[..] else {
                    return Err(Error::Backend(format!(
                        "linear head has {} biases",
                        b0.len()
                    )));
                };
                Ok(ExportedHead::Linear { weight: w0, bias })
            }
            (HeadKind::Mlp { hidden }, Some(out)) => {
                let [b2] = out.bias[..] else {
                    return Err(Error::Backend(format!(
                        "output layer has {} biases",
                        out.bias.len()
                    )));
                };
                Ok(ExportedHead::Mlp {
                    hidden,
                    w0,
                    b0,
                    w2: out.weight.clone(),
                    b2,
                })
            }
            (kind, _) => Err(Error::Backend(format!(
                "{kind:?} head has {} layers",
                layers.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_bce_matches_hand_values() {
        let device = Device::flex();
        // z = 0: ln 2 for either label. z = 2, y = 1: ln(1 + e^-2). z = -3, y = 1: 3 + ln(1 + e^-3).
        let z = [0.0f32, 2.0, -3.0];
        let y = [0.0f32, 1.0, 1.0];
        let w = [1.0f32, 2.0, 0.5];
        let expected =
            (1.0 * 2f64.ln() + 2.0 * (-2f64).exp().ln_1p() + 0.5 * (3.0 + (-3f64).exp().ln_1p()))
                / 3.0;
        let t = |v: &[f32]| Tensor::<1>::from_data(TensorData::new(v.to_vec(), [v.len()]), &device);
        let got: f32 = weighted_bce(t(&z), t(&y), t(&w)).into_scalar();
        assert!((got as f64 - expected).abs() < 1e-6, "{got} vs {expected}");
        // The f64 evaluation loss agrees.
        let got64 = loss_of(&z, &[false, true, true], (2.0, 1.0));
        let expected64 =
            (2f64.ln() + 2.0 * (-2f64).exp().ln_1p() + 2.0 * (3.0 + (-3f64).exp().ln_1p())) / 3.0;
        assert!((got64 - expected64).abs() < 1e-12);
    }

    #[test]
    fn class_weights_balance_the_classes() {
        // 3 correct, 1 wrong: 4 / (2*3) and 4 / (2*1); each class then weighs 2 in total.
        let (p, n) = class_weights(&[true, true, true, false]).unwrap();
        assert!((p - 2.0 / 3.0).abs() < 1e-7 && (n - 2.0).abs() < 1e-7);
        assert!(class_weights(&[false, false]).is_err());
    }

    #[test]
    fn shuffle_is_a_fixed_permutation() {
        let mut a: Vec<usize> = (0..10).collect();
        SplitMix(1).shuffle(&mut a);
        let mut b: Vec<usize> = (0..10).collect();
        SplitMix(1).shuffle(&mut b);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_ne!(a, (0..10).collect::<Vec<_>>());
    }
}
