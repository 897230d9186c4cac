//! After training: Platt scaling fitted on validation so a step score is a
//! probability, the first-error threshold chosen on the calibrated
//! validation scores, and the expected calibration error before and after.
//!
//! Training weights the classes equally, so the raw sigmoid is not a
//! probability under the real class mix; Platt's `sigmoid(a * z + c)` over
//! the head's logit `z`, fitted on validation steps at their natural
//! frequencies, fixes the scale and the offset. It is folded into the head's
//! last layer, so the engine computes calibrated scores with no extra step.

use crate::data::Examples;
use crate::error::{Error, Result};

/// Reliability bins for the ECE figures (equal width on [0, 1]).
pub const ECE_BINS: usize = 10;

/// What calibration found on the validation set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Calibrated {
    /// Platt scale and offset: calibrated logit = `scale * z + offset`.
    pub scale: f64,
    pub offset: f64,
    pub ece_before: f64,
    pub ece_after: f64,
    /// The ProcessBench-F1-optimal first-error threshold on the calibrated
    /// validation scores (`None` when validation lacks correct or wrong traces).
    pub threshold: Option<f64>,
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Mean log loss of `sigmoid(a * z + c)` (plus the ridge on `a`), computed stably.
fn loss(z: &[f64], y: &[bool], a: f64, c: f64, ridge: f64) -> f64 {
    let total: f64 = z
        .iter()
        .zip(y)
        .map(|(&zi, &yi)| {
            // -ln sigmoid(t) for the true class, t = +-(a z + c): ln(1 + e^-t).
            let t = if yi { a * zi + c } else { -(a * zi + c) };
            if t > 0.0 {
                (-t).exp().ln_1p()
            } else {
                -t + t.exp().ln_1p()
            }
        })
        .sum();
    total / z.len() as f64 + 0.5 * ridge * a * a
}

/// Fits `p = sigmoid(a * z + c)` to labels `y` by Newton's method on the
/// log loss, each step halved until the loss falls (undamped Newton can
/// overshoot from far away), with a tiny ridge so separable data still
/// converge.
pub fn fit_platt(z: &[f64], y: &[bool]) -> Result<(f64, f64)> {
    if z.len() != y.len() || z.is_empty() {
        return Err(Error::Data(format!(
            "Platt scaling needs one label per logit ({} logits, {} labels)",
            z.len(),
            y.len()
        )));
    }
    if y.iter().all(|&b| b) || y.iter().all(|&b| !b) {
        return Err(Error::Data(
            "Platt scaling needs correct and wrong validation steps".into(),
        ));
    }
    const RIDGE: f64 = 1e-6;
    let (mut a, mut c) = (1.0f64, 0.0f64);
    for _ in 0..100 {
        // Gradient and Hessian of the mean log loss in (a, c).
        let (mut ga, mut gc, mut haa, mut hac, mut hcc) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (&zi, &yi) in z.iter().zip(y) {
            let p = sigmoid(a * zi + c);
            let r = p - if yi { 1.0 } else { 0.0 };
            let w = (p * (1.0 - p)).max(1e-12);
            ga += r * zi;
            gc += r;
            haa += w * zi * zi;
            hac += w * zi;
            hcc += w;
        }
        let n = z.len() as f64;
        let (ga, gc) = (ga / n + RIDGE * a, gc / n);
        let (haa, hac, hcc) = (haa / n + RIDGE, hac / n, hcc / n + RIDGE);
        let det = haa * hcc - hac * hac;
        if !(det.is_finite() && det > 0.0) {
            break;
        }
        let (mut da, mut dc) = ((hcc * ga - hac * gc) / det, (haa * gc - hac * ga) / det);
        let before = loss(z, y, a, c, RIDGE);
        let mut halvings = 0;
        while loss(z, y, a - da, c - dc, RIDGE) > before && halvings < 40 {
            da *= 0.5;
            dc *= 0.5;
            halvings += 1;
        }
        a -= da;
        c -= dc;
        if da.abs() < 1e-10 && dc.abs() < 1e-10 {
            break;
        }
    }
    if !(a.is_finite() && c.is_finite()) {
        return Err(Error::Data("Platt scaling diverged".into()));
    }
    Ok((a, c))
}

/// Platt scaling and ECE from the head's logits `z` on the validation
/// examples `val`, and the shipped first-error threshold on the whole traces
/// of `whole` (its logits and examples; `None`: `val`'s own traces).
pub fn calibrate(
    z: &[f64],
    val: &Examples,
    whole: Option<(&[f64], &Examples)>,
) -> Result<Calibrated> {
    let (scale, offset) = fit_platt(z, &val.y)?;
    let before: Vec<f64> = z.iter().map(|&z| sigmoid(z)).collect();
    let after: Vec<f64> = z.iter().map(|&z| sigmoid(scale * z + offset)).collect();
    let ece = |p: &[f64]| -> Result<f64> {
        Ok(stepscore::metrics::calibration(p, &val.y, ECE_BINS)?.map_or(0.0, |c| c.ece))
    };
    let (traces, p): (&Examples, Vec<f64>) = match whole {
        Some((zw, w)) => (w, zw.iter().map(|&z| sigmoid(scale * z + offset)).collect()),
        None => (val, after.clone()),
    };
    let scores: Vec<&[f64]> = traces
        .traces
        .iter()
        .filter_map(|(rows, _)| p.get(rows.clone()))
        .collect();
    let labels: Vec<i64> = traces.traces.iter().map(|(_, l)| *l).collect();
    let threshold = if scores.len() == labels.len() && !labels.is_empty() {
        stepscore::metrics::calibrate_threshold(&scores, &labels).ok()
    } else {
        None
    };
    Ok(Calibrated {
        scale,
        offset,
        ece_before: ece(&before)?,
        ece_after: ece(&after)?,
        threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_recovers_a_known_scale_and_offset() {
        // Labels drawn deterministically with P(y) = sigmoid(2z - 1).
        let mut z = Vec::new();
        let mut y = Vec::new();
        let mut state = 7u64;
        for i in 0..20000 {
            let zi = (i % 200) as f64 / 40.0 - 2.5;
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            z.push(zi);
            y.push(u < sigmoid(2.0 * zi - 1.0));
        }
        let (a, c) = fit_platt(&z, &y).unwrap();
        assert!(
            (a - 2.0).abs() < 0.1 && (c + 1.0).abs() < 0.1,
            "a {a} c {c}"
        );
    }

    #[test]
    fn calibration_lowers_the_ece_of_an_overconfident_head() {
        // Logits 4x too large: sigmoid(z) is overconfident; Platt brings a ~ 0.25.
        let mut state = 11u64;
        let z: Vec<f64> = (0..4000).map(|i| (i % 40) as f64 / 2.0 - 10.0).collect();
        let y: Vec<bool> = z
            .iter()
            .map(|&zi| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 11) as f64 / (1u64 << 53) as f64) < sigmoid(zi / 4.0)
            })
            .collect();
        let mut val = Examples::new(1, z.iter().map(|&v| v as f32).collect(), y).unwrap();
        val.traces = (0..400).map(|t| (t * 10..t * 10 + 10, -1)).collect();
        let c = calibrate(&z, &val, None).unwrap();
        assert!(c.scale > 0.15 && c.scale < 0.4, "{c:?}");
        assert!(c.ece_after < c.ece_before, "{c:?}");
        // Only correct traces: no F1, no threshold.
        assert_eq!(c.threshold, None);
    }

    #[test]
    fn the_threshold_comes_from_the_whole_traces_when_given() {
        // Validation: one-step traces only (no threshold is meaningful there);
        // whole traces: two of three steps, the second flagged by z < 0.
        let z = [2.0, -2.0, 1.0, -1.0];
        let mut val = Examples::new(1, vec![0.0; 4], vec![true, false, true, false]).unwrap();
        val.traces = vec![(0..1, -1), (2..3, -1)];
        assert_eq!(calibrate(&z, &val, None).unwrap().threshold, None);
        let zw = [3.0, -3.0, 3.0, 3.0, 3.0, 3.0];
        let mut whole = Examples::new(1, vec![0.0; 6], vec![true; 6]).unwrap();
        whole.traces = vec![(0..3, 1), (3..6, -1)];
        let c = calibrate(&z, &val, Some((&zw, &whole))).unwrap();
        let t = c.threshold.expect("whole traces give a threshold");
        let p = |z: f64| sigmoid(c.scale * z + c.offset);
        // Separates the flagged step from every correct one: F1 1.
        assert!(p(-3.0) < t && t <= p(3.0), "{c:?}");
    }

    #[test]
    fn one_class_is_refused() {
        assert!(fit_platt(&[0.1, 0.2], &[true, true]).is_err());
        assert!(fit_platt(&[], &[]).is_err());
    }
}
