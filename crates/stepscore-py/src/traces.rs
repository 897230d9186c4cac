//! Python values into traces: a `(problem, steps)` pair directly, and any
//! mapping through the core's own row reader (ProcessBench, TRL PRM, raw,
//! chat and native rows, exactly as `stepscore score` reads them).

use std::io::Cursor;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use stepscore::io::{ReadOptions, TraceReader};
use stepscore::segment::Segmenter;
use stepscore::Trace;

use crate::errors::to_py;

/// Names the rows in errors (`traces line 3, field `steps``).
const SOURCE: &str = "traces";

/// JSON fallback for values `json.dumps` does not know: numpy arrays and
/// scalars (as Ray Data batches hold them) through their `tolist()`.
#[pyfunction]
pub fn _json_default<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if obj.hasattr("tolist")? {
        return obj.call_method0("tolist");
    }
    Err(PyTypeError::new_err(format!(
        "a value of type {} in a trace row is not JSON data",
        obj.get_type().name()?
    )))
}

/// One trace per item; a bad item is an error for that item only.
pub fn traces(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    segmenter: &Segmenter,
) -> PyResult<Vec<Result<Trace, PyErr>>> {
    if items.is_instance_of::<PyString>() || items.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(
            "traces must be a sequence of traces ((problem, steps) pairs or row dicts), not a single one",
        ));
    }
    let mut out: Vec<Option<Result<Trace, PyErr>>> = Vec::new();
    // Mappings, serialized as JSONL for the core reader: (slot, line).
    let mut rows: Vec<(usize, String)> = Vec::new();
    let json = py.import("json")?;
    let dumps = json.getattr("dumps")?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("default", wrap_pyfunction!(_json_default, py)?)?;
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        if item.is_instance_of::<PyDict>() {
            match dumps.call((&item,), Some(&kwargs)) {
                Ok(line) => {
                    rows.push((i, line.extract::<String>()?));
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(with_index(py, e, i)))),
            }
        } else {
            out.push(Some(pair(&item, i)));
        }
    }
    if !rows.is_empty() {
        let text: String = rows.iter().map(|(_, l)| format!("{l}\n")).collect();
        let opts = ReadOptions {
            segmenter: segmenter.clone(),
            source_name: SOURCE.to_string(),
            ..ReadOptions::default()
        };
        let reader = TraceReader::new(Cursor::new(text.into_bytes()), opts);
        // The reader yields one result per line, in order.
        for ((slot, _), result) in rows.iter().zip(reader) {
            out[*slot] = Some(result.map_err(|e| with_index(py, to_py(py, e), *slot)));
        }
    }
    Ok(out
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.unwrap_or_else(|| {
                Err(PyTypeError::new_err(format!(
                    "traces[{i}]: the row reader returned nothing"
                )))
            })
        })
        .collect())
}

/// `(problem, steps)`: a string and a sequence of strings.
fn pair(item: &Bound<'_, PyAny>, i: usize) -> PyResult<Trace> {
    let bad = || {
        let ty = item
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!(
            "traces[{i}] must be a (problem, steps) pair or a row dict, got {ty}"
        ))
    };
    if !(item.is_instance_of::<PyTuple>() || item.is_instance_of::<PyList>()) || item.len()? != 2 {
        return Err(bad());
    }
    let problem: String = item
        .get_item(0)?
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("traces[{i}][0] (the problem) must be a str")))?;
    let steps = steps_arg(&item.get_item(1)?, &format!("traces[{i}][1]"))?;
    Ok(Trace {
        problem,
        steps: steps.into_iter().map(stepscore::Step::new).collect(),
        ..Default::default()
    })
}

/// A sequence of step strings (a lone `str` is refused: it would read as
/// one step per character).
pub fn steps_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} (the steps) must be a sequence of str, not a single str"
        )));
    }
    v.extract::<Vec<String>>()
        .map_err(|_| PyTypeError::new_err(format!("{what} (the steps) must be a sequence of str")))
}

/// Marks an error with the index of the trace it belongs to.
pub fn with_index(py: Python<'_>, e: PyErr, index: usize) -> PyErr {
    let _ = e.value(py).setattr("index", index);
    e
}
