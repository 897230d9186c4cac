//! `Scorer`, its results and its incremental `Session`s. Every engine call
//! runs detached from the interpreter (`py.detach`), so other Python threads
//! run meanwhile; the engine's own worker threads do the parallel work.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use stepscore::aggregate::{aggregate, Aggregation};
use stepscore::prm::{
    least_likely, HeadSource, Scorer as CoreScorer, ScorerOptions, Session as CoreSession,
    StepConfidence, TokenLogprob, TraceScore as CoreTraceScore,
};
use stepscore::segment::Segmenter;

use crate::catalog;
use crate::errors::{to_py, IntoPy};
use crate::text::CharIndex;
use crate::traces::{steps_arg, with_index};

/// The per-step scores of one trace.
#[pyclass(frozen, module = "stepscore._stepscore")]
pub struct TraceScore {
    inner: CoreTraceScore,
    /// Asked for with `token_logprobs=True` and given by the head.
    tokens: Option<StepTokens>,
    /// The scorer's threshold in force: its head's shipped one, else 0.5
    /// (`Scorer::threshold_in_force`, the one rule of every front end).
    threshold: f64,
}

/// A stretch of a step's text (char indices) and a log-prob; a token also
/// has the entropy of the distribution that predicted it.
#[derive(Debug, Clone, Copy)]
struct CharSpan {
    start: usize,
    end: usize,
    logprob: f64,
    entropy: Option<f64>,
}

/// Per step, its tokens and its least likely number, in char indices.
#[derive(Debug, Clone, Default)]
struct StepTokens {
    tokens: Vec<Vec<CharSpan>>,
    least_likely: Vec<Option<CharSpan>>,
}

impl StepTokens {
    /// `tokens` (byte spans) of the steps `texts`, converted to char indices.
    fn new<'a>(tokens: &[Vec<TokenLogprob>], texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = StepTokens::default();
        for (step, text) in tokens.iter().zip(texts) {
            let ix = CharIndex::new(text);
            let span = |start, end, logprob, entropy| {
                let (start, end) = ix.char_span(start, end);
                CharSpan {
                    start,
                    end,
                    logprob,
                    entropy,
                }
            };
            out.tokens.push(
                step.iter()
                    .map(|t| span(t.start, t.end, t.logprob, Some(t.entropy)))
                    .collect(),
            );
            out.least_likely
                .push(least_likely(step, text).map(|l| span(l.start, l.end, l.logprob, None)));
        }
        out
    }

    fn of(score: &CoreTraceScore, texts: &[&str], asked: bool) -> Option<Self> {
        let tokens = score.token_logprobs.as_ref().filter(|_| asked)?;
        Some(StepTokens::new(tokens, texts.iter().copied()))
    }
}

fn span_dict<'py>(py: Python<'py>, s: &CharSpan) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("start", s.start)?;
    d.set_item("end", s.end)?;
    d.set_item("logprob", s.logprob)?;
    if let Some(e) = s.entropy {
        d.set_item("entropy", e)?;
    }
    Ok(d)
}

fn token_lists<'py>(py: Python<'py>, steps: &[Vec<CharSpan>]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for step in steps {
        let list = PyList::empty(py);
        for t in step {
            list.append(span_dict(py, t)?)?;
        }
        out.append(list)?;
    }
    Ok(out)
}

fn least_list<'py>(py: Python<'py>, steps: &[Option<CharSpan>]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for s in steps {
        match s {
            Some(s) => out.append(span_dict(py, s)?)?,
            None => out.append(py.None())?,
        }
    }
    Ok(out)
}

#[pymethods]
impl TraceScore {
    /// One score per step; `None` for steps dropped by truncation, and for
    /// every step but the last under the outcome family (one score for the
    /// whole solution).
    #[getter]
    fn step_scores(&self) -> Vec<Option<f64>> {
        self.inner.step_scores.clone()
    }

    /// The index of the first scored step: 0, or the last step's when the
    /// model scores the whole solution once (the outcome family). The scored
    /// steps are `scored_from` up to `len(result) - truncated_steps`.
    #[getter]
    fn scored_from(&self) -> usize {
        self.inner.scored().first
    }

    /// An outcome reward model's logit for the whole solution (the last
    /// step's score is its sigmoid); None for the other families.
    #[getter]
    fn outcome_logit(&self) -> Option<f64> {
        self.inner.outcome_logit
    }

    /// What a generative verifier wrote, as a dict: `text` (the critique),
    /// `verdicts` (per step "correct", "incorrect", or None after its last
    /// verdict) and `stop_reason` (why writing stopped, absent for a given
    /// critique); None for the other families.
    #[getter]
    fn critique<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.inner
            .critique
            .as_ref()
            .map(|c| crate::functions::to_python(py, c))
            .transpose()
    }

    /// Tokens the engine processed.
    #[getter]
    fn tokens(&self) -> usize {
        self.inner.tokens
    }

    /// Steps dropped because the trace was over the token limit.
    #[getter]
    fn truncated_steps(&self) -> usize {
        self.inner.truncated_steps
    }

    /// Confidence-family statistics per scored step (dicts with `tokens`,
    /// `mean_logprob`, `min_logprob`, `mean_entropy`), else None.
    #[getter]
    fn confidence<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        self.inner
            .confidence
            .as_ref()
            .map(|c| confidence_list(py, c))
            .transpose()
    }

    /// With `token_logprobs=True`, from heads that read the LM's token
    /// statistics: per scored step, its tokens as dicts `start`, `end` (str
    /// indices into the step: `step[start:end]`), `logprob` and `entropy`
    /// (nats, of the distribution that predicted the token); else None.
    #[getter]
    fn token_logprobs<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        self.tokens
            .as_ref()
            .map(|t| token_lists(py, &t.tokens))
            .transpose()
    }

    /// With `token_logprobs=True`: per scored step, where to look (its least
    /// likely digit token widened to the whole number, else its least likely
    /// token) as a dict `start`, `end`, `logprob`, or None; else None.
    #[getter]
    fn least_likely<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        self.tokens
            .as_ref()
            .map(|t| least_list(py, &t.least_likely))
            .transpose()
    }

    /// The scored steps' scores combined: min, prod, last, mean or geo_mean.
    /// None when no step was scored.
    #[pyo3(signature = (how = "min"))]
    fn aggregate(&self, py: Python<'_>, how: &str) -> PyResult<Option<f64>> {
        let how: Aggregation = how.parse().py_err(py)?;
        Ok(aggregate(&self.inner.scored().scores, how))
    }

    /// The index of the first scored step below `threshold`, or None;
    /// without one, the threshold the scorer's head ships (else 0.5), as
    /// the CLI and the npm package use.
    #[pyo3(signature = (threshold = None))]
    fn first_error(&self, threshold: Option<f64>) -> Option<usize> {
        self.inner
            .scored()
            .first_error(threshold.unwrap_or(self.threshold))
    }

    fn __len__(&self) -> usize {
        self.inner.step_scores.len()
    }

    fn __repr__(&self) -> String {
        let scores: Vec<String> = self
            .inner
            .step_scores
            .iter()
            .map(|s| s.map_or("None".into(), |v| format!("{v:.4}")))
            .collect();
        format!(
            "TraceScore(step_scores=[{}], tokens={}, truncated_steps={})",
            scores.join(", "),
            self.inner.tokens,
            self.inner.truncated_steps
        )
    }
}

fn confidence_list<'py>(py: Python<'py>, c: &[StepConfidence]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in c {
        let d = PyDict::new(py);
        d.set_item("tokens", s.tokens)?;
        d.set_item("mean_logprob", s.mean_logprob)?;
        d.set_item("min_logprob", s.min_logprob)?;
        d.set_item("mean_entropy", s.mean_entropy)?;
        list.append(d)?;
    }
    Ok(list)
}

/// A loaded process reward model.
///
/// `model` is a GGUF file, a Hugging Face checkpoint directory, or a
/// catalog name (`catalog_models()`; fetched into the cache and verified on
/// first use); by default the default PRM, `stepscore-prm-qwen1.5b`
/// (Qwen2.5-Coder-1.5B-Instruct with stepscore's head trained on human step
/// labels, guarded by its arithmetic head).
/// `head` is a PRM head in its own safetensors file (e.g. from `stepscore
/// train`). The options are the core's `ScorerOptions`, by the same names
/// and with the same defaults as the CLI's flags and the npm load options:
/// `family` (score-head, value-head, math-shepherd, rlhflow, confidence, outcome,
/// generative; detected when omitted, except generative), `backend` (auto (default): a hardware GPU if
/// there is one, else the CPU; gpu; cpu), `threads` (None or 0: this
/// process's share, see `info()["threads_source"]`: the CPUs it may use
/// (affinity, cgroup quota), fewer when `OMP_NUM_THREADS` says so (torchrun's
/// ranks), or inside a Ray worker the CPUs Ray reserved for it),
/// `max_tokens` (1 to the model's context, the default), `truncation`
/// ("error" (default): longer traces raise `TraceTooLongError`;
/// "drop-steps": scored up to the last step that fits; `truncate=True` is
/// its older spelling), `quantize` ("q8_0" or "q4_0", Hugging Face
/// checkpoints only).
///
/// A scorer pickles as the arguments it was opened with (a catalog name
/// stays a name, a path becomes absolute; a default thread count is worked
/// out again where it is unpickled), so Ray and verl can ship it to workers.
///
/// >>> scorer = Scorer("tests/fixtures/prm/skywork-prm-tiny")
/// >>> scorer.score("What is 2+3?", ["2+3 = 5.", "The answer is 5."]).step_scores
/// [0.49..., 0.50...]
#[pyclass(frozen, module = "stepscore._stepscore")]
pub struct Scorer {
    inner: Arc<CoreScorer>,
    model: PathBuf,
    args: OpenArgs,
    threads_source: String,
}

/// What `score_batch` does with a trace it cannot score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ErrorMode {
    Raise,
    None,
    Return,
}

/// What a scorer was opened with: how it pickles. The options as the
/// caller gave them (`None`: the core's default), so a default is worked
/// out again where the scorer is unpickled.
#[derive(Debug, Clone)]
struct OpenArgs {
    model: Option<PathBuf>,
    head: Option<PathBuf>,
    family: Option<String>,
    backend: Option<String>,
    threads: Option<usize>,
    max_tokens: Option<usize>,
    truncation: Option<String>,
    quantize: Option<String>,
}

impl OpenArgs {
    /// The core's options, read by serde from the keyword arguments under
    /// their own names (one vocabulary, defaults and messages with the CLI
    /// and npm); `threads` is chosen by the caller.
    fn options(&self, threads: usize) -> stepscore::Result<ScorerOptions> {
        let mut given = serde_json::Map::new();
        let mut put = |k: &str, v: Option<serde_json::Value>| {
            if let Some(v) = v {
                given.insert(k.to_string(), v);
            }
        };
        put("family", self.family.clone().map(Into::into));
        put("backend", self.backend.clone().map(Into::into));
        put("max_tokens", self.max_tokens.map(Into::into));
        put("truncation", self.truncation.clone().map(Into::into));
        put("quantize", self.quantize.clone().map(Into::into));
        put("threads", Some(threads.into()));
        serde_path_to_error::deserialize(serde_json::Value::Object(given))
            .map_err(|e| stepscore::Error::InvalidArgument(format!("{}: {}", e.path(), e.inner())))
    }
}

/// A path argument that names an existing file, made absolute so it means
/// the same file in a worker with another working directory; anything else
/// (a catalog name) as given.
fn portable(p: Option<PathBuf>) -> Option<PathBuf> {
    p.map(|p| match p.exists() {
        true => std::path::absolute(&p).unwrap_or(p),
        false => p,
    })
}

/// The CPUs Ray reserved for this worker (an actor or task), by Ray's own
/// rule for `OMP_NUM_THREADS`: the floor of its CPU resource, at least 1, and
/// 1 for an actor that reserved none. None outside a Ray worker (Ray not
/// imported, not initialized, or this is the driver).
fn ray_cpus(py: Python<'_>) -> PyResult<Option<(usize, String)>> {
    let modules = py.import("sys")?.getattr("modules")?;
    let Ok(ray) = modules.get_item("ray") else {
        return Ok(None);
    };
    if !ray.call_method0("is_initialized")?.is_truthy()? {
        return Ok(None);
    }
    let ctx = ray.call_method0("get_runtime_context")?;
    let worker_mode = py.import("ray._private.worker")?.getattr("WORKER_MODE")?;
    if !ctx.getattr("worker")?.getattr("mode")?.eq(worker_mode)? {
        return Ok(None);
    }
    let assigned = ctx.call_method0("get_assigned_resources")?;
    let cpu: Option<f64> = assigned.call_method1("get", ("CPU",))?.extract()?;
    Ok(Some(match cpu {
        Some(c) => (
            (c.floor() as usize).max(1),
            format!("Ray reserved CPU={c} for this worker"),
        ),
        None => (1, "a Ray actor that reserved no CPU (Ray's rule: 1)".into()),
    }))
}

impl Scorer {
    /// One trace scored by `run` with the interpreter released, kept with
    /// its steps' token spans (when `token_logprobs`) and the threshold in force.
    fn score_with(
        &self,
        py: Python<'_>,
        problem: &str,
        steps: &Bound<'_, PyAny>,
        token_logprobs: bool,
        run: impl FnOnce(
                &stepscore::prm::Scorer,
                &str,
                &[&str],
            ) -> stepscore::Result<stepscore::prm::TraceScore>
            + Send,
    ) -> PyResult<TraceScore> {
        let steps = steps_arg(steps, "steps")?;
        let scorer = Arc::clone(&self.inner);
        let problem = problem.to_string();
        let (inner, tokens) = py
            .detach(move || {
                let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
                let score = run(&scorer, &problem, &refs)?;
                let tokens = StepTokens::of(&score, &refs, token_logprobs);
                Ok::<_, stepscore::Error>((score, tokens))
            })
            .py_err(py)?;
        Ok(TraceScore {
            inner,
            tokens,
            threshold: self.inner.threshold_in_force(None),
        })
    }
}

/// The thread count for `threads` and where it came from: the core's rule,
/// told the CPUs Ray reserved when this is a Ray worker.
fn choose_threads(py: Python<'_>, threads: Option<usize>) -> PyResult<(usize, String)> {
    let requested = threads.unwrap_or(0);
    let reserved = match requested {
        0 => ray_cpus(py)?.map(|(cpus, why)| stepscore::engine::Reservation { cpus, why }),
        _ => None,
    };
    let b = stepscore::engine::thread_count(requested, reserved);
    Ok((b.threads, b.source))
}

#[pymethods]
impl Scorer {
    #[new]
    #[pyo3(signature = (model = None, *, head = None, family = None, backend = None, threads = None,
                        max_tokens = None, truncation = None, quantize = None, truncate = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Option<PathBuf>,
        head: Option<PathBuf>,
        family: Option<String>,
        backend: Option<String>,
        threads: Option<usize>,
        max_tokens: Option<usize>,
        truncation: Option<String>,
        quantize: Option<String>,
        truncate: Option<bool>,
    ) -> PyResult<Self> {
        let truncation = match (truncation, truncate) {
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err(
                    "give truncation= or its older spelling truncate=, not both",
                ))
            }
            (None, Some(t)) => {
                let warn = py.import("warnings")?;
                let category = py.import("builtins")?.getattr("DeprecationWarning")?;
                warn.call_method1(
                    "warn",
                    (
                        "truncate= is the older spelling of truncation=\"drop-steps\"",
                        category,
                        2,
                    ),
                )?;
                Some(if t { "drop-steps" } else { "error" }.to_string())
            }
            (t, None) => t,
        };
        let args = OpenArgs {
            model: portable(model.clone()),
            head: portable(head.clone()),
            family,
            backend,
            threads: threads.filter(|&n| n > 0),
            max_tokens,
            truncation,
            quantize,
        };
        let (threads, threads_source) = choose_threads(py, threads)?;
        let options = args.options(threads).py_err(py)?;
        let head = match head {
            Some(h) => HeadSource::File(h),
            None => HeadSource::Checkpoint,
        };
        let opened = py
            .detach(move || {
                stepscore::catalog::open(
                    model.as_deref(),
                    head,
                    &options,
                    &mut catalog::show_progress,
                )
            })
            .py_err(py)?;
        Ok(Scorer {
            inner: Arc::new(opened.scorer),
            model: opened.path,
            args,
            threads_source,
        })
    }

    /// Pickling: the arguments it was opened with (see the class docs).
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        let a = &self.args;
        let kwargs = PyDict::new(py);
        kwargs.set_item("head", &a.head)?;
        kwargs.set_item("family", &a.family)?;
        kwargs.set_item("backend", &a.backend)?;
        kwargs.set_item("threads", a.threads)?;
        kwargs.set_item("max_tokens", a.max_tokens)?;
        kwargs.set_item("truncation", &a.truncation)?;
        kwargs.set_item("quantize", &a.quantize)?;
        Ok((PyTuple::new(py, [a.model.clone()])?, kwargs))
    }

    /// The engine threads this scorer runs.
    #[getter]
    fn threads(&self) -> usize {
        self.inner.model().threads()
    }

    /// What this scorer is: `model` (the file), `family`, `backend` (which
    /// engine and why), `threads` and `threads_source` (why that many),
    /// `max_tokens`, `threshold`, `version`.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("model", &self.model)?;
        d.set_item("family", self.family())?;
        d.set_item("backend", self.backend())?;
        d.set_item("threads", self.threads())?;
        d.set_item("threads_source", &self.threads_source)?;
        d.set_item("max_tokens", self.max_tokens())?;
        d.set_item("threshold", self.threshold())?;
        d.set_item("version", env!("CARGO_PKG_VERSION"))?;
        Ok(d)
    }

    /// The PRM family in use.
    #[getter]
    fn family(&self) -> &'static str {
        self.inner.family().name()
    }

    /// The first-error threshold the model's head was shipped with (a step
    /// scored below it is the error), or None.
    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.inner.threshold()
    }

    /// The solution threshold the model's head was shipped with, for
    /// `solution_score(lowest step score, verdict p_yes)`: a solution scoring
    /// below it is flagged; None when the head has none.
    #[getter]
    fn solution_threshold(&self) -> Option<f64> {
        self.inner.solution_threshold()
    }

    /// The model's own verdict on the whole solution: a second pass in which
    /// it reads the problem and the steps as a student's solution and is
    /// asked whether the last step is correct. Returns
    /// `{"p_yes": P(Yes) / (P(Yes) + P(No)), "tokens": the pass's tokens}`.
    /// Needs a chat model opened with its LM head (the default PRM is one).
    fn verdict<'py>(
        &self,
        py: Python<'py>,
        problem: &str,
        steps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let steps = steps_arg(steps, "steps")?;
        let scorer = Arc::clone(&self.inner);
        let problem = problem.to_string();
        let v = py
            .detach(move || {
                let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
                scorer.verdict(&problem, &refs)
            })
            .py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("p_yes", v.p_yes)?;
        d.set_item("tokens", v.tokens)?;
        Ok(d)
    }

    /// The token limit per trace.
    #[getter]
    fn max_tokens(&self) -> usize {
        self.inner.max_tokens()
    }

    /// Which engine runs, and why.
    #[getter]
    fn backend(&self) -> String {
        self.inner.backend_report().to_string()
    }

    /// The model file or directory it was loaded from.
    #[getter]
    fn model(&self) -> PathBuf {
        self.model.clone()
    }

    /// The text a generative verifier (family "generative") writes its
    /// critique after, for `steps`: to have the critique written elsewhere
    /// (a vLLM server) and read it with `score_critique`.
    fn critique_prompt(
        &self,
        py: Python<'_>,
        problem: &str,
        steps: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let steps = steps_arg(steps, "steps")?;
        let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
        self.inner.critique_prompt(problem, &refs).py_err(py)
    }

    /// Scores `steps` from `critique`, the text a generative verifier
    /// (family "generative") wrote after its prompt, e.g. on a vLLM server:
    /// each step's score is P(correct) at its verdict, read as `score` reads
    /// the critique it writes itself (`TraceScore.critique`).
    #[pyo3(signature = (problem, steps, critique))]
    fn score_critique(
        &self,
        py: Python<'_>,
        problem: &str,
        steps: &Bound<'_, PyAny>,
        critique: &str,
    ) -> PyResult<TraceScore> {
        let critique = critique.to_string();
        self.score_with(py, problem, steps, false, move |scorer, problem, steps| {
            scorer.score_critique(problem, steps, &critique)
        })
    }

    /// Scores `steps` (a sequence of str) as the response to `problem`.
    /// `token_logprobs=True` also keeps each token's log-prob with its span
    /// in the step (`TraceScore.token_logprobs`, `least_likely`).
    #[pyo3(signature = (problem, steps, *, token_logprobs = false))]
    fn score(
        &self,
        py: Python<'_>,
        problem: &str,
        steps: &Bound<'_, PyAny>,
        token_logprobs: bool,
    ) -> PyResult<TraceScore> {
        self.score_with(
            py,
            problem,
            steps,
            token_logprobs,
            |scorer, problem, steps| scorer.score_steps(problem, steps),
        )
    }

    /// Scores many traces with the interpreter released. Each trace is a
    /// `(problem, steps)` pair or a row dict in any format `stepscore score`
    /// reads (ProcessBench, TRL PRM, raw `{problem, response}` cut by
    /// `segmenter`, chat `{messages}`, native). `errors="raise"` raises the
    /// first bad trace's error (its `index` attribute says which);
    /// `errors="none"` puts None in its place and scores the rest;
    /// `errors="return"` puts the error itself (a `StepscoreError` or
    /// `TypeError` with its `index`) in its place and scores the rest.
    #[pyo3(signature = (traces, *, segmenter = "auto", errors = "raise", token_logprobs = false))]
    fn score_batch(
        &self,
        py: Python<'_>,
        traces: &Bound<'_, PyAny>,
        segmenter: &str,
        errors: &str,
        token_logprobs: bool,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let mode = match errors {
            "raise" => ErrorMode::Raise,
            "none" => ErrorMode::None,
            "return" => ErrorMode::Return,
            other => {
                return Err(PyValueError::new_err(format!(
                    "errors must be \"raise\", \"none\" or \"return\", got {other:?}"
                )))
            }
        };
        let seg: Segmenter = segmenter.parse().py_err(py)?;
        let parsed = crate::traces::traces(py, traces, &seg)?;
        let mut good = Vec::with_capacity(parsed.len());
        let mut slots: Vec<Result<usize, PyErr>> = Vec::with_capacity(parsed.len());
        for (i, r) in parsed.into_iter().enumerate() {
            match r {
                Ok(t) => {
                    slots.push(Ok(good.len()));
                    good.push(t);
                }
                Err(e) if mode == ErrorMode::Raise => return Err(e),
                Err(e) => slots.push(Err(with_index(py, e, i))),
            }
        }
        let scorer = Arc::clone(&self.inner);
        let results: Vec<stepscore::Result<TraceScore>> = py.detach(move || {
            good.iter()
                .map(|t| {
                    let inner = scorer.score(t)?;
                    let texts: Vec<&str> = t.steps.iter().map(|s| s.text.as_str()).collect();
                    let tokens = StepTokens::of(&inner, &texts, token_logprobs);
                    let threshold = scorer.threshold_in_force(None);
                    Ok(TraceScore {
                        inner,
                        tokens,
                        threshold,
                    })
                })
                .collect()
        });
        let mut results: Vec<Option<stepscore::Result<TraceScore>>> =
            results.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(slots.len());
        for (i, slot) in slots.into_iter().enumerate() {
            let outcome = match slot {
                Ok(k) => results[k]
                    .take()
                    .expect("each good trace has one result")
                    .map_err(|e| with_index(py, to_py(py, e), i)),
                Err(e) => Err(e),
            };
            match (outcome, mode) {
                (Ok(score), _) => out.push(Py::new(py, score)?.into_any()),
                (Err(e), ErrorMode::Raise) => return Err(e),
                (Err(_), ErrorMode::None) => out.push(py.None()),
                (Err(e), ErrorMode::Return) => out.push(e.into_value(py).into_any()),
            }
        }
        Ok(out)
    }

    /// Scores N candidate step lists for one problem, running the shared
    /// prompt once. Returns one list of step scores per candidate.
    fn score_candidates(
        &self,
        py: Python<'_>,
        problem: &str,
        candidates: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Vec<f64>>> {
        let mut lists = Vec::new();
        for (i, c) in candidates.try_iter()?.enumerate() {
            lists.push(steps_arg(&c?, &format!("candidates[{i}]"))?);
        }
        let scorer = Arc::clone(&self.inner);
        let problem = problem.to_string();
        py.detach(move || {
            let refs: Vec<Vec<&str>> = lists
                .iter()
                .map(|l| l.iter().map(String::as_str).collect())
                .collect();
            scorer.score_candidates(&problem, &refs)
        })
        .py_err(py)
    }

    /// Starts generating text after `prompt` (through the model's chat
    /// template unless `chat=False`) and returns the `Generation` iterator
    /// of tokens. The keywords are the core's `GenerateOptions` with its
    /// sampling fields flat (max_new_tokens, temperature, top_k, top_p,
    /// min_p, repetition_penalty, penalty_last_n, seed, stop, stop_at_step,
    /// chat, system), with the core's defaults (llama.cpp's sampling;
    /// `temperature=0` is greedy); `None` keeps a default. The model must
    /// keep its LM head: open a backbone or the confidence family
    /// (`Scorer("smollm2-135m")`).
    #[pyo3(signature = (prompt, **options))]
    fn generate(
        &self,
        py: Python<'_>,
        prompt: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<crate::generate::Generation> {
        let options = crate::generate::core_options(py, "generate", options, &[])?;
        crate::generate::start(py, &self.inner, prompt, options)
    }

    /// Runs `n` generations after one `prompt` to their ends and returns
    /// a list of dicts (`text`, `tokens`, `stop_reason`): the prompt runs
    /// once and the generations' decode steps run together, and
    /// generation i is what `generate(..., seed=seed + i).finish()` writes.
    /// Keywords are `generate`'s.
    #[pyo3(signature = (prompt, n, **options))]
    fn generate_many<'py>(
        &self,
        py: Python<'py>,
        prompt: &str,
        n: usize,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let options = crate::generate::core_options(py, "generate_many", options, &[])?;
        crate::generate::many(py, &self.inner, prompt, &options, n)
    }

    /// Starts verifying a streamed answer to `problem` (see
    /// `StreamVerifier`): each step is scored the moment it completes, and
    /// the verifier says stop when one scores below `stop_below` (default:
    /// the PRM's shipped threshold; `stop=False` never stops). `source`
    /// names the stream in errors.
    #[pyo3(signature = (problem, *, stop_below=None, stop=true, source="<stream>"))]
    fn verify_stream(
        &self,
        py: Python<'_>,
        problem: &str,
        stop_below: Option<f64>,
        stop: bool,
        source: &str,
    ) -> PyResult<crate::verify::StreamVerifier> {
        crate::verify::start(&self.inner, problem, stop, stop_below, source).py_err(py)
    }

    /// PRM-guided search for `problem`: this scorer writes candidates and
    /// `verifier` (default: this scorer) scores each step as it completes.
    /// The other keywords are the core's `SearchOptions`, flat, with its
    /// defaults: `method` "best-of-n" (default), "beam" (N beams, the best
    /// N/M kept and each continued M times per step) or "dvts" (N/M
    /// subtrees, M children per step, the best continued); `n`,
    /// `beam_width`, `max_steps`; `aggregation` ranks candidates by their
    /// step scores ("min", "prod", "last", "mean", "geo_mean");
    /// `token_budget` caps generated tokens over all candidates; and
    /// `generate`'s keywords but `stop_at_step` (`system` defaults to a
    /// prompt asking for blank-line separated steps and a boxed answer).
    /// `on_event(dict)` sees each event ("forked", "token", "step",
    /// "pruned", "finished") and stops the search by returning False.
    /// Returns a dict: `candidates` (text, steps, scores, score, answer,
    /// pruned, finalist, ...), `finalists`, `chosen`, `selection` (best /
    /// majority / weighted) and token counts.
    #[pyo3(signature = (problem, *, verifier=None, on_event=None, **options))]
    fn search<'py>(
        &self,
        py: Python<'py>,
        problem: &str,
        verifier: Option<PyRef<'py, Scorer>>,
        on_event: Option<Py<PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let refused = [(
            "stop_at_step",
            "search candidates always stop at each step's end",
        )];
        let options = crate::generate::core_options(py, "search", options, &refused)?;
        let verifier = verifier.map_or_else(|| Arc::clone(&self.inner), |v| Arc::clone(&v.inner));
        crate::generate::search(py, &self.inner, &verifier, problem, options, on_event)
    }

    /// Starts scoring a trace step by step: each `append` runs only the new
    /// step's tokens (the KV cache keeps the rest).
    fn session(&self, problem: &str) -> Session {
        Session {
            inner: CoreSession::new(Arc::clone(&self.inner), problem),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Scorer(model={:?}, family={:?}, max_tokens={})",
            self.model.display().to_string(),
            self.family(),
            self.inner.max_tokens()
        )
    }
}

/// A trace being scored step by step (from `Scorer.session`).
#[pyclass(module = "stepscore._stepscore")]
pub struct Session {
    inner: CoreSession<Arc<CoreScorer>>,
}

#[pymethods]
impl Session {
    /// Appends a step and returns its score. A failed append leaves the
    /// session as it was.
    fn append(&mut self, py: Python<'_>, step: &str) -> PyResult<f64> {
        let inner = &mut self.inner;
        let step = step.to_string();
        py.detach(move || inner.append(&step)).py_err(py)
    }

    /// An independent copy (e.g. to try several next steps from one prefix).
    fn fork(&self) -> Session {
        Session {
            inner: self.inner.clone(),
        }
    }

    /// Scores of the steps appended so far.
    #[getter]
    fn scores(&self) -> Vec<f64> {
        self.inner.scores().to_vec()
    }

    /// The steps appended so far.
    #[getter]
    fn steps(&self) -> Vec<String> {
        self.inner.steps().to_vec()
    }

    /// Per step so far, as `TraceScore.token_logprobs` (empty when the head
    /// reads no token statistics).
    #[getter]
    fn token_logprobs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        token_lists(py, &self.step_tokens().tokens)
    }

    /// Per step so far, as `TraceScore.least_likely`.
    #[getter]
    fn least_likely<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        least_list(py, &self.step_tokens().least_likely)
    }

    /// Tokens the model has run over this session's life (cache hits excluded).
    #[getter]
    fn computed_tokens(&self) -> usize {
        self.inner.computed_tokens()
    }

    /// Tokens held in the KV cache.
    #[getter]
    fn cached_tokens(&self) -> usize {
        self.inner.cached_tokens()
    }

    fn __len__(&self) -> usize {
        self.inner.steps().len()
    }
}

impl Session {
    fn step_tokens(&self) -> StepTokens {
        StepTokens::new(
            self.inner.token_logprobs(),
            self.inner.steps().iter().map(String::as_str),
        )
    }
}
