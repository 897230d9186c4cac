//! `Scorer.verify_stream`: the core's stream verifier (`prm::verify`) for
//! Python. Feed it what a generator gives — a streaming HTTP response's
//! bytes, a client library's chunk objects (as dicts or JSON text), or
//! plain text pieces — and it returns the events that input completed,
//! each step scored (detached from the interpreter). Step spans come back
//! as `str` indices into the whole generated text.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stepscore::prm::{Scorer as CoreScorer, StreamVerifier as CoreStreamVerifier, VerifyEvent};
use stepscore::Error;

use crate::errors::IntoPy;

pub fn start(
    scorer: &Arc<CoreScorer>,
    problem: &str,
    stop: bool,
    stop_below: Option<f64>,
    source: &str,
) -> Result<StreamVerifier, Error> {
    let inner =
        CoreStreamVerifier::new(Arc::clone(scorer), problem, source).stopping(stop, stop_below)?;
    Ok(StreamVerifier {
        inner,
        text: String::new(),
        chars: 0,
    })
}

/// A stream being verified (from `Scorer.verify_stream`). Each `feed*`
/// call returns the events its input completed: dicts with `event` one of
/// `text`, `step` (`step`, `text`, `start`, `end`, `score`), `stopped`
/// (`step`, `score`, `threshold`: drop the connection), `finished`
/// (`finish_reason`, `done`, `usage`, `steps`, ...).
#[pyclass(module = "stepscore._stepscore")]
pub struct StreamVerifier {
    inner: CoreStreamVerifier<Arc<CoreScorer>>,
    /// The generated text so far and its length in chars, for str indices.
    text: String,
    chars: usize,
}

/// What one `feed*` call hands the core.
enum Input {
    Bytes(Vec<u8>),
    Chunk(String),
    Text(String),
    Close,
    End(Option<String>),
}

impl StreamVerifier {
    /// Gives `input` to the core and collects the events it completed.
    fn run<'py>(&mut self, py: Python<'py>, input: Input) -> PyResult<Bound<'py, PyList>> {
        let inner = &mut self.inner;
        let events = py
            .detach(move || -> Result<Vec<VerifyEvent>, Error> {
                match input {
                    Input::Bytes(b) => inner.push(&b),
                    Input::Chunk(c) => inner.push_chunk(&c)?,
                    Input::Text(t) => inner.push_text(&t)?,
                    Input::Close => inner.close(),
                    Input::End(r) => inner.end(r.as_deref()),
                }
                let mut out = Vec::new();
                while let Some(ev) = inner.next_event() {
                    out.push(ev?);
                }
                Ok(out)
            })
            .py_err(py)?;
        let list = PyList::empty(py);
        for ev in events {
            list.append(self.event(py, ev)?)?;
        }
        Ok(list)
    }

    /// An event as a dict, a step's byte span turned into str indices.
    fn event<'py>(&mut self, py: Python<'py>, ev: VerifyEvent) -> PyResult<Bound<'py, PyDict>> {
        if let VerifyEvent::Text { text } = &ev {
            self.text.push_str(text);
            self.chars += text.chars().count();
        }
        let json = serde_json::to_string(&ev)
            .map_err(|e| Error::Internal(format!("event as JSON: {e}")))
            .py_err(py)?;
        let d = py
            .import("json")?
            .call_method1("loads", (json,))?
            .cast_into::<PyDict>()?;
        if let VerifyEvent::Step { start, end, .. } = ev {
            let char_at = |b: usize| self.text.get(..b).map_or(self.chars, |t| t.chars().count());
            d.set_item("start", char_at(start))?;
            d.set_item("end", char_at(end))?;
        }
        Ok(d)
    }
}

#[pymethods]
impl StreamVerifier {
    /// Bytes of a server-sent event stream (an HTTP response body, in pieces of any size).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        self.run(py, Input::Bytes(data.to_vec()))
    }

    /// One chunk, without SSE framing: a dict (an OpenAI client's chunk
    /// `.model_dump()`), its JSON text, or "[DONE]".
    fn feed_chunk<'py>(
        &mut self,
        py: Python<'py>,
        chunk: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let data = match chunk.extract::<String>() {
            Ok(s) => s,
            Err(_) => py
                .import("json")?
                .call_method1("dumps", (chunk,))?
                .extract::<String>()?,
        };
        self.run(py, Input::Chunk(data))
    }

    /// Plain generated text.
    fn feed_text<'py>(&mut self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyList>> {
        self.run(py, Input::Text(text.to_string()))
    }

    /// The response body ended (after `feed`): the last events, or the
    /// error of a stream cut short.
    fn close<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.run(py, Input::Close)
    }

    /// The generator is done (after `feed_chunk` / `feed_text`).
    #[pyo3(signature = (finish_reason = None))]
    fn end<'py>(
        &mut self,
        py: Python<'py>,
        finish_reason: Option<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.run(py, Input::End(finish_reason))
    }

    /// Whether a step scored below the threshold (drop the connection).
    #[getter]
    fn stopped(&self) -> bool {
        self.inner.stopped()
    }

    /// Whether nothing more will come: stopped, finished or failed.
    #[getter]
    fn ended(&self) -> bool {
        self.inner.ended()
    }

    /// The threshold in force (None: never stops).
    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.inner.threshold()
    }

    /// The generated text so far.
    #[getter]
    fn text(&self) -> String {
        self.text.clone()
    }

    /// The scores of the steps so far.
    #[getter]
    fn scores(&self) -> Vec<f64> {
        self.inner.session().scores().to_vec()
    }
}
