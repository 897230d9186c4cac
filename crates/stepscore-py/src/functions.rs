//! The model-free helpers: segmentation, aggregation, selection, answers
//! and reward shaping (results as numpy arrays). Offsets are str indices
//! (code points) on this side, converted to the core's byte offsets here.

use numpy::PyArray1;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use stepscore::aggregate::{
    aggregate as core_aggregate, first_error as core_first_error, Aggregation,
};
use stepscore::prm::verdict::first_error_with_verdict;
use stepscore::reward::{self, DenseMode};
use stepscore::segment::Segmenter;
use stepscore::Span;

use crate::errors::IntoPy;
use crate::text::CharIndex;
use crate::traces::traces;

/// Scores with None (an unscored step) read as NaN, which aggregation and
/// first-error treat as failing.
pub(crate) fn scores_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a sequence of numbers, not a str"
        )));
    }
    let mut out = Vec::new();
    for (i, x) in v
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a sequence of numbers")))?
        .enumerate()
    {
        let x = x?;
        if x.is_none() {
            out.push(f64::NAN);
        } else {
            out.push(x.extract::<f64>().map_err(|_| {
                PyTypeError::new_err(format!("{what}[{i}] must be a number or None"))
            })?);
        }
    }
    Ok(out)
}

/// Cuts `text` into steps. `segmenter`: auto (default: step markers when
/// the text has them, else blank lines, else lines), blank-line, newline,
/// step-marker, chat, or `regex:PATTERN` (the matches separate steps).
/// Returns dicts `{"text", "start", "end"}` (str indices, `text[start:end]
/// == step["text"]`), plus `role` and `tool` for chat turns.
///
/// >>> [s["text"] for s in segment("2+2=4.\n\nSo the answer is 4.")]
/// ['2+2=4.', 'So the answer is 4.']
#[pyfunction]
#[pyo3(signature = (text, segmenter = "auto"))]
pub fn segment<'py>(py: Python<'py>, text: &str, segmenter: &str) -> PyResult<Bound<'py, PyList>> {
    let seg: Segmenter = segmenter.parse().py_err(py)?;
    let index = CharIndex::new(text);
    let list = PyList::empty(py);
    for step in seg.segment(text) {
        let d = PyDict::new(py);
        d.set_item("text", &step.text)?;
        let span = step.span.unwrap_or(Span::new(0, 0));
        d.set_item("start", index.char(span.start))?;
        d.set_item("end", index.char(span.end))?;
        if let Some(role) = step.role {
            d.set_item("role", role.as_str())?;
        }
        if let Some(tool) = &step.tool {
            d.set_item("tool", tool)?;
        }
        list.append(d)?;
    }
    Ok(list)
}

/// Step scores combined into one: min (default), prod, last, mean, geo_mean.
/// None for no scores; a None or NaN score makes the result NaN.
///
/// >>> aggregate([0.9, 0.4, 0.7], "min")
/// 0.4
#[pyfunction]
#[pyo3(signature = (scores, how = "min"))]
pub fn aggregate(py: Python<'_>, scores: &Bound<'_, PyAny>, how: &str) -> PyResult<Option<f64>> {
    let how: Aggregation = how.parse().py_err(py)?;
    Ok(core_aggregate(&scores_arg(scores, "scores")?, how))
}

/// The index of the first step scoring below `threshold` (None and NaN
/// count as failing), or None when every step passes. With the verdict's
/// `solution_score` and `solution_threshold` (`Scorer.solution_threshold`),
/// a solution flagged by its score with no step below the threshold gets
/// its lowest step, as the CLI's `--verdict` marks it.
///
/// >>> first_error([0.9, 0.3, 0.8])
/// 1
/// >>> first_error([0.94, 0.91, 0.93], 0.6, solution_score=2.0, solution_threshold=4.2)
/// 1
#[pyfunction]
#[pyo3(signature = (scores, threshold = stepscore::aggregate::DEFAULT_THRESHOLD, solution_score = None, solution_threshold = None))]
pub fn first_error(
    scores: &Bound<'_, PyAny>,
    threshold: f64,
    solution_score: Option<f64>,
    solution_threshold: Option<f64>,
) -> PyResult<Option<usize>> {
    let scores = scores_arg(scores, "scores")?;
    match (solution_score, solution_threshold) {
        (None, None) => Ok(core_first_error(&scores, threshold)),
        (Some(s), Some(t)) => Ok(first_error_with_verdict(&scores, threshold, s, t)),
        _ => Err(PyValueError::new_err(
            "first_error: give both solution_score and solution_threshold, or neither",
        )),
    }
}

/// Picks among N scored candidates to one problem: best-of-N, majority and
/// PRM-weighted vote. Each candidate is a row dict with per-step `scores`
/// (e.g. `{"problem", "steps", "scores"}` or `{"problem", "response",
/// "scores"}`); answers are extracted from the text (or `final_answer`).
/// Returns `{"best", "majority", "weighted", "candidates", "aggregation"}`.
#[pyfunction]
#[pyo3(signature = (candidates, how = "min", segmenter = "auto"))]
pub fn select_best<'py>(
    py: Python<'py>,
    candidates: &Bound<'py, PyAny>,
    how: &str,
    segmenter: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let how: Aggregation = how.parse().py_err(py)?;
    let seg: Segmenter = segmenter.parse().py_err(py)?;
    let mut list = Vec::new();
    for t in traces(py, candidates, &seg)? {
        list.push(t?);
    }
    let selection = stepscore::select::select(&list, how);
    to_python(py, &selection)
}

/// The final answer a response states (`\boxed{}`, `#### x`, "The answer
/// is ..."), or None.
///
/// >>> extract_answer("so the total is \\boxed{12}.")
/// '12'
#[pyfunction]
pub fn extract_answer(text: &str) -> Option<String> {
    stepscore::answer::extract_answer(text)
}

/// The equations `text` writes, each checked in exact rational arithmetic
/// (the core's `recompute`: words end an expression, a result may be shown
/// rounded): dicts with `start`, `end` (str indices of the equation),
/// `left`, `right`, `left_value` / `right_value` (the exact value of a side
/// that computes something, else None), `approx` (written with ≈) and `holds`.
///
/// >>> [e["holds"] for e in check_arithmetic("0.2 x 50 = 12, and 3 + 4 = 7")]
/// [False, True]
#[pyfunction]
pub fn check_arithmetic<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
    let chars = CharIndex::new(text);
    let out = PyList::empty(py);
    for e in stepscore::recompute::recompute(text).equations {
        let d = PyDict::new(py);
        let (start, end) = chars.char_span(e.start, e.end);
        d.set_item("start", start)?;
        d.set_item("end", end)?;
        d.set_item("left", e.left)?;
        d.set_item("right", e.right)?;
        d.set_item("left_value", e.left_value)?;
        d.set_item("right_value", e.right_value)?;
        d.set_item("approx", e.approx)?;
        d.set_item("holds", e.holds)?;
        out.append(d)?;
    }
    Ok(out)
}

/// An answer in canonical form (fractions, decimals, separators, units of
/// markup removed), as compared by `answers_equal`.
#[pyfunction]
pub fn normalize_answer(text: &str) -> String {
    stepscore::answer::normalize_answer(text)
}

/// One score per solution from its lowest step score and the model's
/// verdict (`Scorer.verdict`): the sum of their log-odds, compared with
/// `Scorer.solution_threshold`.
#[pyfunction]
pub fn solution_score(lowest_step: f64, p_yes: f64) -> f64 {
    stepscore::prm::verdict::solution_score(lowest_step, p_yes)
}

/// Whether two answers are the same after normalization (`"1/2"` equals `"0.5"`).
#[pyfunction]
pub fn answers_equal(a: &str, b: &str) -> bool {
    stepscore::answer::answers_equal(a, b)
}

fn array<'py>(py: Python<'py>, v: Vec<f64>) -> Bound<'py, PyArray1<f64>> {
    PyArray1::from_vec(py, v)
}

/// Progress rewards `v[k] - v[k-1]` (with `v[-1] = baseline`); they sum to
/// `v[-1] - baseline`.
#[pyfunction]
#[pyo3(signature = (values, baseline = 0.0))]
pub fn progress_rewards<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    baseline: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    Ok(array(
        py,
        reward::progress_rewards(&scores_arg(values, "values")?, baseline),
    ))
}

/// Gao et al.'s Clip: `min(r - eta, 0)` per step.
#[pyfunction]
pub fn clip_rewards<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    eta: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    Ok(array(
        py,
        reward::clip_rewards(&scores_arg(rewards, "rewards")?, eta),
    ))
}

/// Gao et al.'s Delta: `r[k] - r[k+1]`, the last unchanged; the return
/// from step k on telescopes to `r[k]`.
#[pyfunction]
pub fn delta_rewards<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    Ok(array(
        py,
        reward::delta_rewards(&scores_arg(rewards, "rewards")?),
    ))
}

/// Outcome-gated process advantages (PAPO) for one group of responses:
/// `{"outcome", "process", "total"}` arrays, `total = outcome + lam * process`.
#[pyfunction]
#[pyo3(signature = (correct, process, lam = 1.0))]
pub fn papo_advantages<'py>(
    py: Python<'py>,
    correct: Vec<bool>,
    process: &Bound<'py, PyAny>,
    lam: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let adv =
        reward::papo_advantages(&correct, &scores_arg(process, "process")?, lam).py_err(py)?;
    let d = PyDict::new(py);
    d.set_item("outcome", array(py, adv.outcome))?;
    d.set_item("process", array(py, adv.process))?;
    d.set_item("total", array(py, adv.total))?;
    Ok(d)
}

/// Per-token rewards when step k covers tokens `[ends[k-1], ends[k])` of
/// `n_tokens`; `mode` last-token (default) or spread. They sum to the step
/// rewards' sum.
#[pyfunction]
#[pyo3(signature = (step_rewards, step_token_ends, n_tokens, mode = "last-token"))]
pub fn dense_token_rewards<'py>(
    py: Python<'py>,
    step_rewards: &Bound<'py, PyAny>,
    step_token_ends: Vec<usize>,
    n_tokens: usize,
    mode: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let mode: DenseMode = mode.parse().py_err(py)?;
    let r = reward::dense_token_rewards(
        &scores_arg(step_rewards, "step_rewards")?,
        &step_token_ends,
        n_tokens,
        mode,
    )
    .py_err(py)?;
    Ok(array(py, r))
}

/// A step's rewards shaped before placement: none, clip, delta, clip-delta
/// (Clip then Delta, Gao et al.'s combination) or progress.
fn shape(
    py: Python<'_>,
    r: Vec<f64>,
    shaping: Option<&str>,
    eta: f64,
    baseline: f64,
) -> PyResult<Vec<f64>> {
    Ok(
        match shaping.map(|s| s.to_ascii_lowercase().replace('_', "-")) {
            None => r,
            Some(s) => match s.as_str() {
                "none" => r,
                "clip" => reward::clip_rewards(&r, eta),
                "delta" => reward::delta_rewards(&r),
                "clip-delta" => reward::delta_rewards(&reward::clip_rewards(&r, eta)),
                "progress" => reward::progress_rewards(&r, baseline),
                _ => {
                    let _ = py;
                    return Err(PyValueError::new_err(format!(
                    "shaping={s:?}: expected None, \"clip\", \"delta\", \"clip-delta\" or \"progress\""
                )));
                }
            },
        },
    )
}

/// Offsets as `(start, end)` pairs: tuples, lists, or rows of an (n, 2) array.
fn offsets_arg(v: &Bound<'_, PyAny>) -> PyResult<Vec<(usize, usize)>> {
    let mut out = Vec::new();
    for (i, item) in v.try_iter()?.enumerate() {
        let item = item?;
        let pair: Vec<usize> = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "token_offsets[{i}] must be a (start, end) pair of non-negative ints"
            ))
        })?;
        match pair[..] {
            [s, e] => out.push((s, e)),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "token_offsets[{i}] has {} items, expected (start, end)",
                    pair.len()
                )))
            }
        }
    }
    Ok(out)
}

/// Per-token rewards on the *policy's* tokens of `response`.
///
/// `step_spans` are the steps' `(start, end)` in `response` (as `segment`
/// returns them), `step_rewards` one reward per step (e.g. PRM scores),
/// `token_offsets` the policy tokenizer's `(start, end)` per token (e.g. a
/// Hugging Face tokenizer's `offset_mapping`). Offsets are str indices, or
/// UTF-8 byte offsets with `offsets_unit="byte"`.
///
/// A token belongs to the step it starts in; a step's reward goes on its
/// last token (`mode="last-token"`) or is split evenly over its tokens
/// (`"spread"`). An empty token such as a special token at `(0, 0)` sits
/// where the previous token ended; tokens after the last step get 0. A step
/// with no token of its own is credited to the previous step's last token.
/// `shaping` (None, clip, delta, clip-delta, progress; `eta`, `baseline`)
/// transforms the step rewards first. The result sums to the (shaped) step
/// rewards' sum.
///
/// >>> dense_rewards("ab\n\ncd", [(0, 2), (4, 6)], [0.9, 0.2], [(0, 1), (1, 4), (4, 6)])
/// array([0. , 0.9, 0.2])
#[pyfunction]
#[pyo3(signature = (response, step_spans, step_rewards, token_offsets, *, mode = "last-token",
                    shaping = None, eta = 0.0, baseline = 0.0, offsets_unit = "char"))]
#[allow(clippy::too_many_arguments)]
pub fn dense_rewards<'py>(
    py: Python<'py>,
    response: &str,
    step_spans: &Bound<'py, PyAny>,
    step_rewards: &Bound<'py, PyAny>,
    token_offsets: &Bound<'py, PyAny>,
    mode: &str,
    shaping: Option<&str>,
    eta: f64,
    baseline: f64,
    offsets_unit: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let mode: DenseMode = mode.parse().py_err(py)?;
    let chars = match offsets_unit {
        "char" => true,
        "byte" => false,
        other => {
            return Err(PyValueError::new_err(format!(
                "offsets_unit must be \"char\" or \"byte\", got {other:?}"
            )))
        }
    };
    let index = CharIndex::new(response);
    let to_byte = |i: usize, what: &dyn Fn() -> String| -> PyResult<usize> {
        if chars {
            index.byte(i, what)
        } else {
            Ok(i)
        }
    };
    let mut spans = Vec::new();
    for (k, item) in step_spans.try_iter()?.enumerate() {
        let item = item?;
        // A span pair, or a step dict from `segment`.
        let (s, e) = if let Ok(d) = item.cast::<PyDict>() {
            let get = |key: &str| -> PyResult<usize> {
                d.get_item(key)?
                    .ok_or_else(|| PyTypeError::new_err(format!("step_spans[{k}] has no {key:?}")))?
                    .extract()
            };
            (get("start")?, get("end")?)
        } else {
            let pair: Vec<usize> = item.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "step_spans[{k}] must be a (start, end) pair or a step dict"
                ))
            })?;
            match pair[..] {
                [s, e] => (s, e),
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "step_spans[{k}] must have 2 items"
                    )))
                }
            }
        };
        spans.push(Span::new(
            to_byte(s, &|| format!("step_spans[{k}] start"))?,
            to_byte(e, &|| format!("step_spans[{k}] end"))?,
        ));
    }
    let mut offsets = offsets_arg(token_offsets)?;
    for (t, o) in offsets.iter_mut().enumerate() {
        *o = (
            to_byte(o.0, &|| format!("token_offsets[{t}] start"))?,
            to_byte(o.1, &|| format!("token_offsets[{t}] end"))?,
        );
    }
    let rewards = shape(
        py,
        scores_arg(step_rewards, "step_rewards")?,
        shaping,
        eta,
        baseline,
    )?;
    let r = reward::dense_rewards_at_offsets(&rewards, &spans, &offsets, response.len(), mode)
        .py_err(py)?;
    Ok(array(py, r))
}

/// Any serde value as Python data (through JSON: dicts, lists, numbers).
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let text = serde_json::to_string(value)
        .map_err(|e| PyValueError::new_err(format!("internal: result not serializable: {e}")))?;
    py.import("json")?.call_method1("loads", (text,))
}
