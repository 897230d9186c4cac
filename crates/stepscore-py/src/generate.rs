//! `Scorer.generate`: a model writes text after a prompt, token by token;
//! the returned `Generation` is a Python iterator (a generator of tokens)
//! over the core's `CoreGeneration`, each step run detached from the
//! interpreter so other Python threads run meanwhile.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::collections::BTreeMap;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use stepscore::prm::{GenerateOptions, Generation as CoreGeneration, Scorer as CoreScorer};

use crate::errors::IntoPy;

/// The core's options `T` (`GenerateOptions`, `SearchOptions`) from the
/// keyword arguments of `call`, read by serde: the core's names, defaults
/// and checks, so no keyword or default is written here. Keywords are flat
/// (`temperature=0`, not `sampling={...}`): each lands at its field's place
/// in `T`. `None` leaves the core's default; a keyword `T` lacks, or one
/// of `refused` (with its reason), is a TypeError.
pub fn core_options<T: Serialize + DeserializeOwned + Default>(
    py: Python<'_>,
    call: &str,
    given: Option<&Bound<'_, PyDict>>,
    refused: &[(&str, &str)],
) -> PyResult<T> {
    let places = keyword_places(&serde_json::to_value(T::default()).expect("options serialize"));
    let mut tree = Map::new();
    for (key, value) in given.into_iter().flat_map(|d| d.iter()) {
        let key: String = key.extract()?;
        if let Some((_, why)) = refused.iter().find(|(k, _)| *k == key) {
            return Err(PyTypeError::new_err(format!(
                "{call}() takes no `{key}`: {why}"
            )));
        }
        let Some(path) = places.get(&key) else {
            let known: Vec<&str> = places.keys().map(String::as_str).collect();
            return Err(PyTypeError::new_err(format!(
                "{call}() got an unexpected keyword argument '{key}' (its options: {})",
                known.join(", ")
            )));
        };
        if value.is_none() {
            continue;
        }
        let value: Value = pythonize::depythonize(&value)
            .map_err(|e| PyTypeError::new_err(format!("{call}({key}=...): {e}")))?;
        let mut at = &mut tree;
        for group in &path[..path.len() - 1] {
            at = match at
                .entry(group.clone())
                .or_insert_with(|| Value::Object(Map::new()))
            {
                Value::Object(m) => m,
                _ => unreachable!("groups are objects"),
            };
        }
        at.insert(key, value);
    }
    serde_path_to_error::deserialize(Value::Object(tree))
        .map_err(|e| stepscore::Error::InvalidArgument(keyword_error(call, &e)))
        .py_err(py)
}

/// Each keyword's path in the options' serde form: the fields of `default`,
/// with those holding an object (`sampling`, a search's `generate`) opened
/// so their own fields are keywords too.
fn keyword_places(default: &Value) -> BTreeMap<String, Vec<String>> {
    fn walk(v: &Value, path: &mut Vec<String>, out: &mut BTreeMap<String, Vec<String>>) {
        for (k, field) in v.as_object().into_iter().flatten() {
            path.push(k.clone());
            match field {
                Value::Object(_) => walk(field, path, out),
                _ => {
                    let before = out.insert(k.clone(), path.clone());
                    debug_assert!(before.is_none(), "keyword `{k}` at two places");
                }
            }
            path.pop();
        }
    }
    let mut out = BTreeMap::new();
    walk(default, &mut Vec::new(), &mut out);
    out
}

/// A serde error as the keyword it is about: `call(key=...): message`. A
/// nested group read by its own reader (a search's `generate`) names its
/// field in backticks at the start of the message.
fn keyword_error(call: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let inner = e.inner().to_string();
    let (path, message) = match inner.strip_prefix('`').and_then(|r| r.split_once("`: ")) {
        Some((nested, m)) => (nested.to_string(), m.to_string()),
        None => (e.path().to_string(), inner),
    };
    let key = path.rsplit('.').next().unwrap_or(&path);
    format!("{call}({key}=...): {message}")
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
        .detach(move || CoreGeneration::new(scorer, &prompt, &options))
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
    inner: CoreGeneration<Arc<CoreScorer>>,
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
