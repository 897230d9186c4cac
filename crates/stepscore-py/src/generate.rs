//! `Scorer.generate`: a model writes text after a prompt, token by token;
//! the returned `Generation` is a Python iterator (a generator of tokens)
//! over the core's `GenerationOf`, each step run detached from the
//! interpreter so other Python threads run meanwhile.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use stepscore::prm::{GenerateOptions, GenerationOf, Scorer as CoreScorer};
use stepscore::sample::Sampling;

use crate::errors::IntoPy;

/// Sampling and stopping options as keyword arguments, with the core's defaults.
#[allow(clippy::too_many_arguments)]
pub fn options(
    max_new_tokens: usize,
    temperature: Option<f64>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    min_p: Option<f64>,
    repetition_penalty: Option<f64>,
    seed: u64,
    stop: Option<Vec<String>>,
    stop_at_step: bool,
    chat: bool,
    system: Option<String>,
) -> GenerateOptions {
    let d = Sampling::default();
    GenerateOptions {
        sampling: Sampling {
            temperature: temperature.unwrap_or(d.temperature),
            top_k: top_k.unwrap_or(d.top_k),
            top_p: top_p.unwrap_or(d.top_p),
            min_p: min_p.unwrap_or(d.min_p),
            repetition_penalty: repetition_penalty.unwrap_or(d.repetition_penalty),
            seed,
            ..d
        },
        max_new_tokens,
        stop: stop.unwrap_or_default(),
        stop_at_step,
        chat,
        system,
    }
}

pub fn start(
    py: Python<'_>,
    scorer: &Arc<CoreScorer>,
    prompt: &str,
    options: GenerateOptions,
) -> PyResult<Generation> {
    let scorer = Arc::clone(scorer);
    let prompt = prompt.to_string();
    let inner = py
        .detach(move || GenerationOf::new(scorer, &prompt, &options))
        .py_err(py)?;
    Ok(Generation { inner })
}

/// `Scorer.generate_many`: the core's `generate_many`, detached from the
/// interpreter; each finished generation as a dict.
pub fn many<'py>(
    py: Python<'py>,
    scorer: &Arc<CoreScorer>,
    prompt: &str,
    options: &GenerateOptions,
    n: usize,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let scorer = Arc::clone(scorer);
    let prompt = prompt.to_string();
    let gens = py
        .detach(move || stepscore::prm::generate_many(scorer, &prompt, options, n))
        .py_err(py)?;
    gens.iter()
        .map(|g| {
            let d = PyDict::new(py);
            d.set_item("text", g.text())?;
            d.set_item("tokens", g.tokens().to_vec())?;
            d.set_item("stop_reason", stop_name(g.stop_reason()))?;
            Ok(d)
        })
        .collect()
}

/// Text being generated (from `Scorer.generate`): iterate it for tokens,
/// dicts with `id`, `text` (what the token completed) and `logprob`.
#[pyclass(module = "stepscore._stepscore")]
pub struct Generation {
    inner: GenerationOf<Arc<CoreScorer>>,
}

#[pymethods]
impl Generation {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let inner = &mut self.inner;
        let Some(token) = py.detach(move || inner.next()) else {
            return Ok(None);
        };
        let token = token.py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("id", token.id)?;
        d.set_item("text", token.text)?;
        d.set_item("logprob", token.logprob)?;
        Ok(Some(d))
    }

    /// Runs to the end and returns the whole text.
    fn finish(&mut self, py: Python<'_>) -> PyResult<String> {
        let inner = &mut self.inner;
        py.detach(move || inner.finish().map(str::to_string))
            .py_err(py)
    }

    /// Stops before the next token (safe from another thread).
    fn cancel(&self) {
        self.inner.cancel_flag().store(true, Ordering::Relaxed);
    }

    /// The text so far (stop strings cut off).
    #[getter]
    fn text(&self) -> String {
        self.inner.text().to_string()
    }

    /// The generated token ids so far.
    #[getter]
    fn tokens(&self) -> Vec<u32> {
        self.inner.tokens().to_vec()
    }

    #[getter]
    fn prompt_tokens(&self) -> usize {
        self.inner.prompt_tokens()
    }

    /// Why it stopped ("end-of-turn", "stop-string", "step-end",
    /// "max-tokens", "context", "cancelled"), or None while running.
    #[getter]
    fn stop_reason(&self) -> Option<String> {
        stop_name(self.inner.stop_reason())
    }
}

/// A stop reason's name as the JSON output spells it.
fn stop_name(reason: Option<&stepscore::prm::StopReason>) -> Option<String> {
    reason
        .and_then(|r| serde_json::to_value(r).ok())
        .and_then(|v| v.as_str().map(str::to_string))
}

/// `Scorer.search`: runs the core's PRM-guided search detached from the
/// interpreter; `on_event` (when given) is called with each progress event
/// as a dict, holding the interpreter only for that call, and stops the
/// search by returning `False` (an exception it raises stops the search
/// and is raised from `search`). Returns the result as Python data.
pub fn search<'py>(
    py: Python<'py>,
    generator: &Arc<CoreScorer>,
    verifier: &Arc<CoreScorer>,
    problem: &str,
    options: stepscore::prm::SearchOptions,
    on_event: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (generator, verifier) = (Arc::clone(generator), Arc::clone(verifier));
    let problem = problem.to_string();
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        stepscore::prm::search(generator, verifier, &problem, &options, &mut |event| {
            let Some(callback) = &on_event else {
                return true;
            };
            Python::attach(|py| {
                let call = || -> PyResult<bool> {
                    let json = serde_json::to_string(event).map_err(|e| {
                        pyo3::exceptions::PyValueError::new_err(format!("internal: {e}"))
                    })?;
                    let value = py.import("json")?.call_method1("loads", (json,))?;
                    let out = callback.call1(py, (value,))?;
                    // Only an explicit False stops: a callback returning None goes on.
                    Ok(!out.bind(py).is(&pyo3::types::PyBool::new(py, false)))
                };
                match call() {
                    Ok(go_on) => go_on,
                    Err(e) => {
                        raised = Some(e);
                        false
                    }
                }
            })
        })
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let result = result.py_err(py)?;
    let json = serde_json::to_string(&result)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("internal: {e}")))?;
    py.import("json")?.call_method1("loads", (json,))
}
