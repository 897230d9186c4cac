//! The core's evaluation metrics (`stepscore::metrics`): step AUROC, the
//! expected calibration error and ProcessBench's F1, by the definitions
//! `stepscore eval` reports, so a script computes them the same way.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyAnyMethods, PyDict};
use stepscore::metrics::{self, ProcessBenchSample};

use crate::errors::IntoPy;
use crate::functions::{scores_arg, to_python};

/// Numbers for a metric: every entry a number (None is refused by name,
/// not read as a failing score as aggregation reads it).
fn numbers(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
    let out = scores_arg(v, what)?;
    match out.iter().position(|x| x.is_nan()) {
        Some(i) => Err(PyValueError::new_err(format!(
            "{what}[{i}] is None or NaN: a metric needs a number for every step"
        ))),
        None => Ok(out),
    }
}

/// Area under the ROC curve of `scores` for telling correct steps
/// (`labels` True) from wrong ones: the probability that a random correct
/// step outscores a random wrong one, ties counting one half. None when
/// either class is absent.
///
/// >>> auroc([0.9, 0.2, 0.7], [True, False, True])
/// 1.0
#[pyfunction]
pub fn auroc(
    py: Python<'_>,
    scores: &Bound<'_, PyAny>,
    labels: Vec<bool>,
) -> PyResult<Option<f64>> {
    metrics::auroc(&numbers(scores, "scores")?, &labels).py_err(py)
}

/// Expected calibration error of probabilities that a step is correct, over
/// `n_bins` equal-width bins on [0, 1] (`stepscore eval --bins`): a dict
/// `{"ece", "bins": [{"lo", "hi", "count", "mean_confidence", "accuracy"}]}`
/// (non-empty bins only), or None for no input. Probabilities outside
/// [0, 1] are refused (they are not probabilities).
#[pyfunction]
#[pyo3(signature = (probs, labels, n_bins = 10))]
pub fn calibration<'py>(
    py: Python<'py>,
    probs: &Bound<'py, PyAny>,
    labels: Vec<bool>,
    n_bins: usize,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    metrics::calibration(&numbers(probs, "probs")?, &labels, n_bins)
        .py_err(py)?
        .map(|c| to_python(py, &c))
        .transpose()
}

/// ProcessBench accuracy and F1 from samples, each a dict with `split`
/// (str), `label` (the first wrong step's index, -1 for none) and
/// `prediction` (the predicted index, -1 for none): a dict with `splits`
/// (per split: `n_erroneous`, `n_correct`, `acc_erroneous`, `acc_correct`,
/// `f1`), `overall`, and `mean_f1`, the unweighted mean of the splits' F1
/// (ProcessBench's "Avg."). `threshold` is recorded with the report.
#[pyfunction]
#[pyo3(signature = (samples, threshold))]
pub fn processbench_f1<'py>(
    py: Python<'py>,
    samples: &Bound<'py, PyAny>,
    threshold: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let mut rows = Vec::new();
    let items = samples
        .try_iter()
        .map_err(|_| PyTypeError::new_err("samples must be a sequence of dicts"))?;
    for (i, item) in items.enumerate() {
        let item = item?;
        let d = item
            .cast::<PyDict>()
            .map_err(|_| PyTypeError::new_err(format!("samples[{i}] must be a dict")))?;
        let field = |k: &str| -> PyResult<Bound<'py, PyAny>> {
            d.get_item(k)?
                .ok_or_else(|| PyValueError::new_err(format!("samples[{i}] has no `{k}`")))
        };
        let typed = |k: &str, what: &str| {
            PyTypeError::new_err(format!("samples[{i}][\"{k}\"] must be {what}"))
        };
        rows.push(ProcessBenchSample {
            split: field("split")?
                .extract()
                .map_err(|_| typed("split", "a str"))?,
            label: field("label")?
                .extract()
                .map_err(|_| typed("label", "an int"))?,
            prediction: field("prediction")?
                .extract()
                .map_err(|_| typed("prediction", "an int"))?,
        });
    }
    to_python(py, &metrics::processbench_f1(&rows, threshold))
}
