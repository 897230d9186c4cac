//! Turning per-step scores into one trace score, and finding the first error.
//!
//! Defined edge cases:
//! - an empty score list has no aggregate: [`aggregate`] returns `None`;
//! - a NaN score poisons the aggregate: the result is `Some(NaN)`, so callers
//!   can never mistake an unscored step for a good one;
//! - [`first_error`] treats a NaN step as failing (it was not verified).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::validate::Scored;
use crate::Error;

/// How per-step scores combine into a trace score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// The weakest step decides (the usual choice for PRMs).
    #[default]
    Min,
    /// Product: the probability that every step is right, if independent.
    Prod,
    /// The last step's score.
    Last,
    /// Arithmetic mean.
    Mean,
    /// Geometric mean: the product's per-step rate, comparable across lengths.
    GeoMean,
}

impl Aggregation {
    pub const ALL: [Aggregation; 5] = [
        Aggregation::Min,
        Aggregation::Prod,
        Aggregation::Last,
        Aggregation::Mean,
        Aggregation::GeoMean,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Aggregation::Min => "min",
            Aggregation::Prod => "prod",
            Aggregation::Last => "last",
            Aggregation::Mean => "mean",
            Aggregation::GeoMean => "geo_mean",
        }
    }
}

impl fmt::Display for Aggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Aggregation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "min" => Ok(Aggregation::Min),
            "prod" | "product" => Ok(Aggregation::Prod),
            "last" => Ok(Aggregation::Last),
            "mean" | "avg" => Ok(Aggregation::Mean),
            "geo_mean" | "geomean" | "gmean" => Ok(Aggregation::GeoMean),
            _ => Err(Error::InvalidArgument(format!(
                "unknown aggregation `{s}` (expected one of min, prod, last, mean, geo_mean)"
            ))),
        }
    }
}

/// Combines step scores into one; `None` for an empty list, `Some(NaN)` if
/// any score is NaN. The geometric mean of scores containing a 0 is 0; of
/// scores containing a negative value it is NaN (scores are probabilities).
pub fn aggregate(scores: &[f64], how: Aggregation) -> Option<f64> {
    if scores.is_empty() {
        return None;
    }
    if scores.iter().any(|s| s.is_nan()) {
        return Some(f64::NAN);
    }
    let n = scores.len() as f64;
    Some(match how {
        Aggregation::Min => scores.iter().copied().fold(f64::INFINITY, f64::min),
        Aggregation::Prod => scores.iter().product(),
        Aggregation::Last => scores[scores.len() - 1],
        Aggregation::Mean => scores.iter().sum::<f64>() / n,
        Aggregation::GeoMean => {
            if scores.iter().any(|&s| s < 0.0) {
                f64::NAN
            } else if scores.contains(&0.0) {
                0.0
            } else {
                // Sum of logs: the direct product underflows on long traces.
                (scores.iter().map(|s| s.ln()).sum::<f64>() / n).exp()
            }
        }
    })
}

/// The first-error threshold when nothing names one (no argument, no
/// threshold shipped with the head): the one default of every front end.
pub const DEFAULT_THRESHOLD: f64 = 0.5;

/// ProcessBench's prediction: the index of the first step whose score is
/// below `threshold` (NaN counts as below), or `None` if every step passes.
pub fn first_error(scores: &[f64], threshold: f64) -> Option<usize> {
    scores.iter().position(|&s| s.is_nan() || s < threshold)
}

/// [`first_error`] in ProcessBench's integer form: `-1` when no step fails.
pub(crate) fn first_error_label(scores: &[f64], threshold: f64) -> i64 {
    first_error(scores, threshold).map_or(-1, |i| i as i64)
}

impl Scored {
    /// The index of the first step scoring below `threshold` (or NaN),
    /// [`first_error`]'s rule counted in the trace's steps.
    pub fn first_error(&self, threshold: f64) -> Option<usize> {
        first_error(&self.scores, threshold).map(|i| i + self.first)
    }

    /// [`Scored::first_error`] in ProcessBench's form: `-1` when no step fails.
    pub fn first_error_label(&self, threshold: f64) -> i64 {
        self.first_error(threshold).map_or(-1, |i| i as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    // proptest forks and times out through OS processes: native only.
    #[cfg(not(target_arch = "wasm32"))]
    use proptest::prelude::*;

    #[test]
    fn worked_examples() {
        let s = [0.9, 0.5, 0.8];
        assert_eq!(aggregate(&s, Aggregation::Min), Some(0.5));
        assert!((aggregate(&s, Aggregation::Prod).unwrap() - 0.36).abs() < 1e-12);
        assert_eq!(aggregate(&s, Aggregation::Last), Some(0.8));
        // (0.9 + 0.5 + 0.8) / 3 = 2.2 / 3
        assert!((aggregate(&s, Aggregation::Mean).unwrap() - 2.2 / 3.0).abs() < 1e-12);
        // 0.36^(1/3) = 0.711378...
        assert!((aggregate(&s, Aggregation::GeoMean).unwrap() - 0.36f64.cbrt()).abs() < 1e-12);
    }

    #[test]
    fn empty_and_nan() {
        for how in Aggregation::ALL {
            assert_eq!(aggregate(&[], how), None);
            assert!(aggregate(&[0.5, f64::NAN], how).unwrap().is_nan());
        }
        assert_eq!(first_error(&[0.9, f64::NAN, 0.1], 0.5), Some(1));
        assert_eq!(first_error(&[], 0.5), None);
        assert_eq!(first_error_label(&[0.9, 0.7], 0.5), -1);
        assert_eq!(first_error_label(&[0.9, 0.4, 0.1], 0.5), 1);
    }

    #[test]
    fn geo_mean_edges() {
        assert_eq!(aggregate(&[0.5, 0.0], Aggregation::GeoMean), Some(0.0));
        assert!(aggregate(&[0.5, -0.1], Aggregation::GeoMean)
            .unwrap()
            .is_nan());
        // 10,000 steps of 0.5: the product underflows to 0, the geometric mean does not.
        let long = vec![0.5; 10_000];
        assert!((aggregate(&long, Aggregation::GeoMean).unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn names_parse_back() {
        for how in Aggregation::ALL {
            assert_eq!(how.name().parse::<Aggregation>().unwrap(), how);
        }
        assert!("median".parse::<Aggregation>().is_err());
    }

    #[cfg(not(target_arch = "wasm32"))]
    proptest! {
        #[test]
        fn identities(scores in prop::collection::vec(0.0f64..=1.0, 1..40)) {
            let min = aggregate(&scores, Aggregation::Min).unwrap();
            let mean = aggregate(&scores, Aggregation::Mean).unwrap();
            let geo = aggregate(&scores, Aggregation::GeoMean).unwrap();
            let prod = aggregate(&scores, Aggregation::Prod).unwrap();
            let max = scores.iter().copied().fold(0.0, f64::max);
            // min <= geometric mean <= arithmetic mean <= max (AM-GM).
            prop_assert!(min <= geo + 1e-12);
            prop_assert!(geo <= mean + 1e-12);
            prop_assert!(mean <= max + 1e-12);
            // prod <= min for scores in [0, 1].
            prop_assert!(prod <= min + 1e-12);
            // geo_mean^n == prod.
            prop_assert!((geo.powi(scores.len() as i32) - prod).abs() < 1e-9);
            prop_assert_eq!(aggregate(&scores, Aggregation::Last).unwrap(), *scores.last().unwrap());
            // Permutation invariance of everything but `last`.
            let mut rev = scores.clone();
            rev.reverse();
            prop_assert_eq!(aggregate(&rev, Aggregation::Min).unwrap(), min);
            prop_assert!((aggregate(&rev, Aggregation::Mean).unwrap() - mean).abs() < 1e-12);
        }

        #[test]
        fn first_error_is_first_below(scores in prop::collection::vec(0.0f64..=1.0, 0..30), t in 0.0f64..=1.0) {
            match first_error(&scores, t) {
                Some(i) => {
                    prop_assert!(scores[i] < t);
                    prop_assert!(scores[..i].iter().all(|&s| s >= t));
                }
                None => prop_assert!(scores.iter().all(|&s| s >= t)),
            }
            // If any step fails, min is below the threshold, and conversely.
            if let Some(min) = aggregate(&scores, Aggregation::Min) {
                prop_assert_eq!(first_error(&scores, t).is_some(), min < t);
            }
        }
    }
}
