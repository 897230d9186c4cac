//! WebAssembly bindings of stepscore for the npm package in `pkg/`.
//!
//! This layer only converts: JS values in (through serde-wasm-bindgen; traces
//! through the core's row reader in [`read`], so messages name the field at
//! fault exactly as the CLI's do), the
//! core crate's results out as camelCase objects ([`output`]), and every
//! error out as a JS `Error` with a stable `code` ([`error`]). Downloading,
//! progress, aborting and backend choice live in the package's JS, which
//! hands bytes to [`WasmScorer::from_gguf`] / [`WasmScorer::from_hf`].
//!
//! A scorer starts on the CPU engine; [`WasmScorer::with_backend`] moves it
//! to the WGSL engine on WebGPU. Results of the GPU arrive through the
//! event loop, so scoring returns Promises (`score`, `scoreMany`, a
//! session's `append`) on both engines; on the CPU they are settled at once.
//!
//! Nothing here panics on input; a panic hook is installed anyway so a bug
//! shows its message in the console before the instance traps.

pub mod error;
pub mod load;
pub mod options;
pub mod output;
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub mod pool;
pub mod read;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use stepscore::aggregate::{aggregate as aggregate_scores, first_error, Aggregation};
use stepscore::prm::{
    Backend, GenerateOptions, Generation, Scorer, SearchEvent, SearchOptions, SearchResult,
    Session, StreamVerifier, VerifyEvent,
};
use stepscore::segment::Segmenter;
use stepscore::stream::Finish;
use wasm_bindgen::prelude::*;

use crate::error::{Code, Error};
use crate::load::Loaded;
use crate::output::{
    segment_steps, Confidence, GpuBuffers, Score, ScoreOptions, SelectionOut, SessionTokens,
};
use crate::read::{read_options, trace_arg, traces_arg, Purpose};

#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// The JS face of [`Error`]: an `Error` named `StepscoreError` with `code`.
fn js_error(e: Error) -> JsValue {
    let err = js_sys::Error::new(&e.message);
    err.set_name("StepscoreError");
    // Setting a property on a fresh Error object cannot fail.
    let _ = js_sys::Reflect::set(
        &err,
        &JsValue::from_str("code"),
        &JsValue::from_str(e.code.as_str()),
    );
    err.into()
}

type JsResult<T> = std::result::Result<T, JsValue>;

/// A Promise settled by `fut` (rejected with a `StepscoreError`).
fn promise<F>(fut: F) -> js_sys::Promise
where
    F: std::future::Future<Output = JsResult<JsValue>> + 'static,
{
    wasm_bindgen_futures::future_to_promise(fut)
}

fn to_js<T: Serialize>(value: &T) -> JsResult<JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| {
            js_error(Error::invalid_argument(format!(
                "internal: result not representable in JS: {e}"
            )))
        })
}

/// Any JS value as JSON-like data; `code` is the error code if it is not.
fn from_js(value: JsValue, what: &str, code: Code) -> JsResult<Value> {
    serde_wasm_bindgen::from_value(value)
        .map_err(|e| js_error(Error::new(code, format!("{what}: {e}"))))
}

fn string_arg(value: &JsValue, what: &str, code: Code) -> JsResult<String> {
    value.as_string().ok_or_else(|| {
        js_error(Error::new(
            code,
            format!("{what} must be a string, got {}", type_name(value)),
        ))
    })
}

fn type_name(v: &JsValue) -> String {
    if v.is_null() {
        "null".into()
    } else if js_sys::Array::is_array(v) {
        "an array".into()
    } else {
        v.js_typeof()
            .as_string()
            .unwrap_or_else(|| "a value".into())
    }
}

/// Candidates for one problem: an array of step lists, each an array of
/// strings none of them blank ([`stepscore::validate::is_blank`]); the error names `candidates[i]` or `candidates[i][j]`.
fn candidates_arg(value: &JsValue) -> JsResult<Vec<Vec<String>>> {
    let bad = |m: String| js_error(Error::new(Code::TraceInvalid, m));
    let list = value.dyn_ref::<js_sys::Array>().ok_or_else(|| {
        bad(format!(
            "candidates must be an array of step lists, got {}",
            type_name(value)
        ))
    })?;
    let mut out = Vec::with_capacity(list.length() as usize);
    for (i, c) in list.iter().enumerate() {
        let steps = c.dyn_ref::<js_sys::Array>().ok_or_else(|| {
            bad(format!(
                "candidates[{i}] must be an array of step strings, got {}",
                type_name(&c)
            ))
        })?;
        let mut texts = Vec::with_capacity(steps.length() as usize);
        for (j, step) in steps.iter().enumerate() {
            let text = string_arg(&step, &format!("candidates[{i}][{j}]"), Code::TraceInvalid)?;
            if stepscore::validate::is_blank(&text) {
                return Err(bad(format!(
                    "candidates[{i}][{j}] is empty (nothing but whitespace or invisible characters)"
                )));
            }
            texts.push(text);
        }
        out.push(texts);
    }
    Ok(out)
}

/// A list of step scores; `null` / `undefined` (and NaN) entries read as
/// NaN (an unscored step, which aggregation and first-error treat as
/// failing). Any other value must be a probability in [0, 1]
/// ([`stepscore::validate`]).
fn scores_arg(value: &JsValue) -> JsResult<Vec<f64>> {
    let scores = scores_list(value)?;
    for (i, &s) in scores.iter().enumerate() {
        if !s.is_nan() {
            stepscore::validate::check_score(s, &format!("scores[{i}]"))
                .map_err(|p| js_error(Error::invalid_argument(p.to_string())))?;
        }
    }
    Ok(scores)
}

/// A score list as the core lays it out ([`stepscore::validate::Scored`]):
/// one score on the last step alone (an outcome reward model's, every other
/// entry null) is the whole solution's, at that step; otherwise each step's
/// score, a missing one counting as failing. Returns the scores and the index
/// of the step the first one belongs to.
fn scored_arg(value: &JsValue) -> JsResult<(Vec<f64>, usize)> {
    let scores = scores_arg(value)?;
    let nulls = null_entries(value);
    let n = scores.len();
    if n > 1 && nulls.len() == n - 1 && nulls.iter().all(|&i| i < n - 1) {
        return Ok((vec![scores[n - 1]], n - 1));
    }
    Ok((scores, 0))
}

/// The indices of `null` / `undefined` entries of a JS array (none in a
/// typed array).
fn null_entries(value: &JsValue) -> Vec<usize> {
    if !js_sys::Array::is_array(value) {
        return Vec::new();
    }
    js_sys::Array::from(value)
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_null() || v.is_undefined())
        .map(|(i, _)| i)
        .collect()
}

fn scores_list(value: &JsValue) -> JsResult<Vec<f64>> {
    let bad = |m: String| js_error(Error::invalid_argument(m));
    if let Some(typed) = value.dyn_ref::<js_sys::Float64Array>() {
        return Ok(typed.to_vec());
    }
    if !js_sys::Array::is_array(value) {
        return Err(bad(format!(
            "scores must be an array of numbers, got {}",
            type_name(value)
        )));
    }
    let array = js_sys::Array::from(value);
    array
        .iter()
        .enumerate()
        .map(|(i, v)| {
            if v.is_null() || v.is_undefined() {
                Ok(f64::NAN)
            } else {
                v.as_f64().ok_or_else(|| {
                    bad(format!(
                        "scores[{i}] must be a number, got {}",
                        type_name(&v)
                    ))
                })
            }
        })
        .collect()
}

fn aggregation_arg(value: &JsValue) -> JsResult<Aggregation> {
    if value.is_undefined() || value.is_null() {
        return Ok(Aggregation::default());
    }
    string_arg(value, "aggregation", Code::InvalidArgument)?
        .parse()
        .map_err(|e: stepscore::Error| js_error(Error::invalid_argument(e.to_string())))
}

/// Files of a Hugging Face checkpoint, collected by name before loading
/// (each `add` copies the bytes into wasm memory once).
#[wasm_bindgen]
#[derive(Default)]
pub struct HfFiles {
    files: BTreeMap<String, Vec<u8>>,
}

#[wasm_bindgen]
impl HfFiles {
    #[wasm_bindgen(constructor)]
    pub fn new() -> HfFiles {
        HfFiles::default()
    }

    pub fn add(&mut self, name: String, bytes: Vec<u8>) {
        self.files.insert(name, bytes);
    }
}

/// A loaded PRM on the CPU engine.
#[wasm_bindgen]
pub struct WasmScorer {
    loaded: Loaded,
}

#[wasm_bindgen]
impl WasmScorer {
    /// Loads a GGUF file's bytes; `name` names it in error messages.
    #[wasm_bindgen(js_name = fromGguf)]
    pub fn from_gguf(bytes: Vec<u8>, name: String, options: JsValue) -> JsResult<WasmScorer> {
        let options =
            load::parse_options(&from_js(options, "load options", Code::InvalidArgument)?)
                .map_err(js_error)?;
        let loaded = load::load_gguf(bytes, &name, &options).map_err(js_error)?;
        Ok(WasmScorer { loaded })
    }

    /// Loads a GGUF backbone plus a PRM head from its own safetensors file.
    #[wasm_bindgen(js_name = fromGgufWithHead)]
    pub fn from_gguf_with_head(
        bytes: Vec<u8>,
        name: String,
        head: &[u8],
        head_name: String,
        options: JsValue,
    ) -> JsResult<WasmScorer> {
        let options =
            load::parse_options(&from_js(options, "load options", Code::InvalidArgument)?)
                .map_err(js_error)?;
        let loaded = load::load_gguf_with_head(bytes, &name, head, &head_name, &options)
            .map_err(js_error)?;
        Ok(WasmScorer { loaded })
    }

    /// Loads a catalog entry's GGUF file (the package fetched it and checked
    /// its sha256) with the head the core embeds for the entry; an unknown
    /// name throws `INVALID_ARGUMENT` listing the names.
    #[wasm_bindgen(js_name = fromCatalog)]
    pub fn from_catalog(bytes: Vec<u8>, entry: String, options: JsValue) -> JsResult<WasmScorer> {
        let options =
            load::parse_options(&from_js(options, "load options", Code::InvalidArgument)?)
                .map_err(js_error)?;
        let loaded = load::load_catalog(bytes, &entry, &options).map_err(js_error)?;
        Ok(WasmScorer { loaded })
    }

    /// Loads a Hugging Face checkpoint from its files (taken out of `files`).
    #[wasm_bindgen(js_name = fromHf)]
    pub fn from_hf(files: &mut HfFiles, options: JsValue) -> JsResult<WasmScorer> {
        let options =
            load::parse_options(&from_js(options, "load options", Code::InvalidArgument)?)
                .map_err(js_error)?;
        let loaded = load::load_hf(std::mem::take(&mut files.files), &options).map_err(js_error)?;
        Ok(WasmScorer { loaded })
    }

    /// Moves this scorer to `backend` (the core's names: `cpu`, `gpu` or
    /// `webgpu` for the WGSL engine on WebGPU, `auto` for the core's choice)
    /// and resolves to the scorer, which replaces this object (its
    /// handle is consumed). Rejects with `GPU_ERROR` when no device can be
    /// made or the model does not fit it; the model is freed then.
    #[wasm_bindgen(js_name = withBackend)]
    pub fn with_backend(self, backend: JsValue) -> JsResult<js_sys::Promise> {
        // The core's names: auto, gpu (also webgpu), cpu.
        let backend = string_arg(&backend, "backend", Code::InvalidArgument)?
            .parse::<Backend>()
            .map_err(|e| js_error(Error::invalid_argument(e.to_string())))?;
        let mut loaded = self.loaded;
        Ok(promise(async move {
            let scorer = Rc::get_mut(&mut loaded.scorer).ok_or_else(|| {
                js_error(Error::invalid_argument(
                    "the backend can only change before any session is started",
                ))
            })?;
            scorer
                .set_backend_async(backend)
                .await
                .map_err(|e| js_error(Error::from_load(e)))?;
            Ok(WasmScorer { loaded }.into())
        }))
    }

    /// Scores every step of one trace; the Promise resolves to
    /// `{stepScores, tokens, truncatedSteps, confidence?, tokenLogprobs?,
    /// leastLikely?}` (the last two with `options.tokenLogprobs`). A
    /// malformed trace throws at once, before anything runs.
    /// `what` names the trace in messages (`trace` when omitted; the
    /// package's abortable scoreMany passes `traces[i]`).
    pub fn score(
        &self,
        trace: JsValue,
        options: JsValue,
        what: Option<String>,
    ) -> JsResult<js_sys::Promise> {
        let options = score_options(options)?;
        let what = what.unwrap_or_else(|| "trace".into());
        let trace = trace_arg(
            from_js(trace, &what, Code::TraceInvalid)?,
            &what,
            Purpose::Score,
        )
        .map_err(js_error)?;
        let scorer = Rc::clone(&self.loaded.scorer);
        Ok(promise(async move {
            let score = scorer
                .score_async(&trace)
                .await
                .map_err(|e| js_error(Error::from_score(&what, e)))?;
            to_js(&Score::new(score, &step_texts(&trace), options))
        }))
    }

    /// The number of tokens scoring `trace` runs (the family's template
    /// included; may exceed the model's limit, which scoring refuses): what
    /// a page multiplies by its measured time per token to say how long a
    /// trace will take before it starts.
    #[wasm_bindgen(js_name = countTokens)]
    pub fn count_tokens(&self, trace: JsValue) -> JsResult<usize> {
        let trace = trace_arg(
            from_js(trace, "trace", Code::TraceInvalid)?,
            "trace",
            Purpose::Score,
        )
        .map_err(js_error)?;
        self.loaded
            .scorer
            .encode(&trace.problem, &step_texts(&trace))
            .map(|enc| enc.tokens.len())
            .map_err(|e| js_error(Error::from_score("trace", e)))
    }

    /// Scores several traces, one after another; all are checked before
    /// any is scored.
    #[wasm_bindgen(js_name = scoreMany)]
    pub fn score_many(&self, traces: JsValue, options: JsValue) -> JsResult<js_sys::Promise> {
        let options = score_options(options)?;
        let traces = traces_arg(
            from_js(traces, "traces", Code::TraceInvalid)?,
            "traces",
            Purpose::Score,
        )
        .map_err(js_error)?;
        let scorer = Rc::clone(&self.loaded.scorer);
        Ok(promise(async move {
            let mut scores = Vec::with_capacity(traces.len());
            for (i, t) in traces.iter().enumerate() {
                let s = scorer
                    .score_async(t)
                    .await
                    .map_err(|e| js_error(Error::from_score(&format!("traces[{i}]"), e)))?;
                scores.push(Score::new(s, &step_texts(t), options));
            }
            to_js(&scores)
        }))
    }

    /// Starts verifying an external generator's answer to `problem` as it
    /// arrives ([`WasmStreamVerifier`]): stops below `threshold` (a number
    /// in [0, 1]; `undefined`: the head's shipped threshold; `null`: never
    /// stops). `source` names the stream in errors.
    #[wasm_bindgen(js_name = verifyStream)]
    pub fn verify_stream(
        &self,
        problem: JsValue,
        threshold: JsValue,
        source: String,
    ) -> JsResult<WasmStreamVerifier> {
        let problem = string_arg(&problem, "problem", Code::TraceInvalid)?;
        // undefined: (stop, the shipped threshold); null: never; a number: below it.
        let given = match (threshold.is_undefined(), threshold.is_null()) {
            (true, _) | (_, true) => None,
            _ => Some(threshold.as_f64().ok_or_else(|| {
                js_error(Error::invalid_argument(
                    "option `threshold` must be a number, null or left out",
                ))
            })?),
        };
        let verifier = StreamVerifier::new(Rc::clone(&self.loaded.scorer), &problem, &source)
            .stopping(!threshold.is_null(), given)
            .map_err(|e| js_error(Error::from_run("verifyStream", e)))?;
        Ok(WasmStreamVerifier {
            inner: Rc::new(RefCell::new(verifier)),
        })
    }

    /// Scores N candidate step lists for one `problem`, running the tokens
    /// they share (system prompt and problem) once and each candidate's
    /// steps in one pass; resolves to one list of step scores per
    /// candidate, the scores `score` gives each alone, bit for bit. Every
    /// candidate is checked before any runs.
    #[wasm_bindgen(js_name = scoreCandidates)]
    pub fn score_candidates(
        &self,
        problem: JsValue,
        candidates: JsValue,
    ) -> JsResult<js_sys::Promise> {
        let problem = string_arg(&problem, "problem", Code::TraceInvalid)?;
        let lists = candidates_arg(&candidates)?;
        let scorer = Rc::clone(&self.loaded.scorer);
        Ok(promise(async move {
            let refs: Vec<Vec<&str>> = lists
                .iter()
                .map(|l| l.iter().map(String::as_str).collect())
                .collect();
            let out = scorer
                .score_candidates_async(&problem, &refs)
                .await
                .map_err(|e| {
                    let what = e
                        .index
                        .map_or_else(|| "candidates".to_string(), |i| format!("candidates[{i}]"));
                    js_error(Error::from_score(&what, e.error))
                })?;
            to_js(&out)
        }))
    }

    /// Starts an incremental session for `problem`.
    pub fn session(&self, problem: JsValue) -> JsResult<WasmSession> {
        let problem = string_arg(&problem, "problem", Code::TraceInvalid)?;
        Ok(WasmSession {
            inner: Rc::new(RefCell::new(Session::new(
                Rc::clone(&self.loaded.scorer),
                &problem,
            ))),
        })
    }

    /// Starts generating after `prompt` with `options` (the core's
    /// `GenerateOptions`, camelCase keys: [`options`]); resolves to a
    /// [`WasmGeneration`] once the prompt has run. Bad options throw at once.
    pub fn generate(&self, prompt: JsValue, options: JsValue) -> JsResult<js_sys::Promise> {
        let prompt = string_arg(&prompt, "prompt", Code::InvalidArgument)?;
        let options: GenerateOptions = options::core_options(
            &from_js(options, "generate options", Code::InvalidArgument)?,
            "generate options",
        )
        .map_err(js_error)?;
        let scorer = Rc::clone(&self.loaded.scorer);
        Ok(promise(async move {
            let generation = Generation::new_async(scorer, &prompt, &options)
                .await
                .map_err(|e| js_error(Error::from_run("generate", e)))?;
            let cancel = generation.cancel_flag();
            Ok(WasmGeneration {
                inner: Rc::new(RefCell::new(generation)),
                cancel,
            }
            .into())
        }))
    }

    /// Runs a PRM-guided search for `problem` (the core's `SearchOptions`,
    /// camelCase keys) with this scorer generating and scoring. `on_event`,
    /// when given, is called with each of the core's `SearchEvent`s
    /// (camelCase keys); its returning `false` stops the search, which
    /// resolves with `cancelled: true`, and its throwing stops the search
    /// and rejects with what it threw. Resolves to the result, `selection`
    /// as `selectBest` gives it. Bad options throw at once.
    pub fn search(
        &self,
        problem: JsValue,
        options: JsValue,
        on_event: Option<js_sys::Function>,
    ) -> JsResult<js_sys::Promise> {
        let verifier = Rc::clone(&self.loaded.scorer);
        self.run_search(problem, options, on_event, verifier)
    }

    /// [`WasmScorer::search`] with `verifier` scoring the steps.
    #[wasm_bindgen(js_name = searchVerifiedBy)]
    pub fn search_verified_by(
        &self,
        problem: JsValue,
        options: JsValue,
        on_event: Option<js_sys::Function>,
        verifier: &WasmScorer,
    ) -> JsResult<js_sys::Promise> {
        let verifier = Rc::clone(&verifier.loaded.scorer);
        self.run_search(problem, options, on_event, verifier)
    }

    /// Buffers alive on the GPU device; `null` on the CPU engine.
    #[wasm_bindgen(js_name = gpuBuffers)]
    pub fn gpu_buffers(&self) -> JsResult<JsValue> {
        match self.loaded.scorer.gpu_pool_stats() {
            Some(s) => to_js(&GpuBuffers::from(s)),
            None => Ok(JsValue::NULL),
        }
    }

    /// Model facts: family, format, dimensions, context, bytes loaded.
    pub fn info(&self) -> JsResult<JsValue> {
        to_js(&self.loaded.info())
    }
}

/// A trace scored step by step, reusing the KV cache of the steps before.
/// Shared with the Promise of an append in flight; a second append while
/// one runs is refused (the package queues them).
#[wasm_bindgen]
pub struct WasmSession {
    inner: Rc<RefCell<Session<Rc<Scorer>>>>,
}

const SESSION_BUSY: &str =
    "an append on this session is still running; await it before using the session";

impl WasmSession {
    fn with<T>(&self, f: impl FnOnce(&Session<Rc<Scorer>>) -> T) -> JsResult<T> {
        let s = self
            .inner
            .try_borrow()
            .map_err(|_| js_error(Error::invalid_argument(SESSION_BUSY)))?;
        Ok(f(&s))
    }
}

#[wasm_bindgen]
impl WasmSession {
    /// Appends a step; the Promise resolves to its score.
    // The session's RefCell stays borrowed across the GPU's await on
    // purpose: that borrow is what refuses a second append meanwhile.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn append(&self, step: JsValue) -> JsResult<js_sys::Promise> {
        let what = format!("step {}", self.with(|s| s.steps().len())?);
        let step = string_arg(&step, &what, Code::TraceInvalid)?;
        let inner = Rc::clone(&self.inner);
        Ok(promise(async move {
            let score = {
                let mut session = inner
                    .try_borrow_mut()
                    .map_err(|_| js_error(Error::invalid_argument(SESSION_BUSY)))?;
                session
                    .append_async(&step)
                    .await
                    .map_err(|e| js_error(Error::from_score(&what, e)))?
            };
            Ok(JsValue::from_f64(score))
        }))
    }

    pub fn scores(&self) -> JsResult<Vec<f64>> {
        self.with(|s| s.scores().to_vec())
    }

    pub fn steps(&self) -> JsResult<Vec<String>> {
        self.with(|s| s.steps().to_vec())
    }

    /// Confidence-family statistics per step (empty for other families).
    pub fn confidence(&self) -> JsResult<JsValue> {
        let c: Vec<Confidence> =
            self.with(|s| s.confidence().iter().map(Confidence::from).collect())?;
        to_js(&c)
    }

    /// Per step so far, its tokens (UTF-16 spans in the step's text) and
    /// least likely number, as `score(..., {tokenLogprobs: true})` gives
    /// them: `{tokenLogprobs, leastLikely}`, empty when the head reads no
    /// token statistics.
    #[wasm_bindgen(js_name = tokenLogprobs)]
    pub fn token_logprobs(&self) -> JsResult<JsValue> {
        let tokens = self.with(|s| {
            SessionTokens::new(s.token_logprobs(), s.steps().iter().map(String::as_str))
        })?;
        to_js(&tokens)
    }

    #[wasm_bindgen(js_name = computedTokens)]
    pub fn computed_tokens(&self) -> JsResult<usize> {
        self.with(|s| s.computed_tokens())
    }

    #[wasm_bindgen(js_name = cachedTokens)]
    pub fn cached_tokens(&self) -> JsResult<usize> {
        self.with(|s| s.cached_tokens())
    }
}

impl WasmScorer {
    fn run_search(
        &self,
        problem: JsValue,
        options: JsValue,
        on_event: Option<js_sys::Function>,
        verifier: Rc<Scorer>,
    ) -> JsResult<js_sys::Promise> {
        let problem = string_arg(&problem, "problem", Code::InvalidArgument)?;
        let raw = from_js(options, "search options", Code::InvalidArgument)?;
        let options: SearchOptions =
            options::core_options(&raw, "search options").map_err(js_error)?;
        options
            .validate()
            .map_err(|e| js_error(Error::from_run("search options", e)))?;
        let generator = Rc::clone(&self.loaded.scorer);
        Ok(promise(async move {
            let mut thrown: Option<JsValue> = None;
            let result = {
                let mut on = |event: &SearchEvent| -> bool {
                    let Some(f) = &on_event else { return true };
                    match event_js(event).and_then(|e| f.call1(&JsValue::NULL, &e)) {
                        Ok(r) => r.as_bool() != Some(false),
                        Err(e) => {
                            thrown = Some(e);
                            false
                        }
                    }
                };
                stepscore::prm::search_async(generator, verifier, &problem, &options, &mut on).await
            };
            if let Some(e) = thrown {
                return Err(e);
            }
            let result = result.map_err(|e| js_error(Error::from_run("search", e)))?;
            search_js(result)
        }))
    }
}

/// A generation in progress ([`WasmScorer::generate`]): each `next()` runs
/// one token. Shared with the Promise of a `next()` in flight; a second
/// `next()` meanwhile is refused (the package awaits each).
#[wasm_bindgen]
pub struct WasmGeneration {
    inner: Rc<RefCell<Generation<Rc<Scorer>>>>,
    cancel: Arc<AtomicBool>,
}

const GENERATION_BUSY: &str =
    "a next() on this generation is still running; await it before using the generation";

impl WasmGeneration {
    fn with<T>(&self, f: impl FnOnce(&Generation<Rc<Scorer>>) -> T) -> JsResult<T> {
        let g = self
            .inner
            .try_borrow()
            .map_err(|_| js_error(Error::invalid_argument(GENERATION_BUSY)))?;
        Ok(f(&g))
    }
}

#[wasm_bindgen]
impl WasmGeneration {
    /// Resolves to the next token `{id, text, logprob}`, or `null` once the
    /// generation has stopped (`stopReason()` says why).
    // The RefCell stays borrowed across the GPU's await on purpose, as in
    // WasmSession::append.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn next(&self) -> JsResult<js_sys::Promise> {
        let inner = Rc::clone(&self.inner);
        Ok(promise(async move {
            let mut generation = inner
                .try_borrow_mut()
                .map_err(|_| js_error(Error::invalid_argument(GENERATION_BUSY)))?;
            match generation.next_async().await {
                None => Ok(JsValue::NULL),
                Some(Ok(token)) => to_js(&token),
                Some(Err(e)) => Err(js_error(Error::from_run("generate", e))),
            }
        }))
    }

    /// Stops the generation before its next token (stop reason `cancelled`);
    /// works while a `next()` is in flight.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// The text generated so far (a stop string cut off).
    pub fn text(&self) -> JsResult<String> {
        self.with(|g| g.text().to_string())
    }

    /// Why the generation stopped (the core's kebab-case names), or `null`.
    #[wasm_bindgen(js_name = stopReason)]
    pub fn stop_reason(&self) -> JsResult<JsValue> {
        let reason = self.with(|g| g.stop_reason().cloned())?;
        match reason {
            Some(r) => to_js(&r),
            None => Ok(JsValue::NULL),
        }
    }

    /// The generated token ids so far.
    pub fn tokens(&self) -> JsResult<Vec<u32>> {
        self.with(|g| g.tokens().to_vec())
    }

    /// Tokens of the prompt (with the chat template) run before the first.
    #[wasm_bindgen(js_name = promptTokens)]
    pub fn prompt_tokens(&self) -> JsResult<usize> {
        self.with(|g| g.prompt_tokens())
    }
}

/// A stream being verified ([`WasmScorer::verify_stream`]): the package
/// pushes what the generator sends (SSE bytes of a response body, chunk
/// objects as JSON text, or plain text) and pulls the core's
/// `VerifyEvent`s (camelCase keys); on `stopped` it drops the source.
#[wasm_bindgen]
pub struct WasmStreamVerifier {
    inner: Rc<RefCell<StreamVerifier<Rc<Scorer>>>>,
}

const VERIFIER_BUSY: &str =
    "a next() on this verifier is still running; await it before pushing more";

impl WasmStreamVerifier {
    fn with_mut<T>(&self, f: impl FnOnce(&mut StreamVerifier<Rc<Scorer>>) -> T) -> JsResult<T> {
        let mut v = self
            .inner
            .try_borrow_mut()
            .map_err(|_| js_error(Error::invalid_argument(VERIFIER_BUSY)))?;
        Ok(f(&mut v))
    }
}

#[wasm_bindgen]
impl WasmStreamVerifier {
    /// Bytes of an OpenAI-compatible streaming response body (SSE).
    pub fn push(&self, bytes: &[u8]) -> JsResult<()> {
        self.with_mut(|v| v.push(bytes))
    }

    /// One chunk handed over without SSE framing (WebLLM, wllama), as JSON.
    #[wasm_bindgen(js_name = pushChunk)]
    pub fn push_chunk(&self, data: &str) -> JsResult<()> {
        self.with_mut(|v| v.push_chunk(data))?
            .map_err(|e| js_error(Error::from_run("verifyStream", e)))
    }

    /// Plain generated text.
    #[wasm_bindgen(js_name = pushText)]
    pub fn push_text(&self, text: &str) -> JsResult<()> {
        self.with_mut(|v| v.push_text(text))?
            .map_err(|e| js_error(Error::from_run("verifyStream", e)))
    }

    /// The generator is done (chunks or text; `finishReason` if it said one).
    pub fn end(&self, finish_reason: Option<String>) -> JsResult<()> {
        self.with_mut(|v| v.end(finish_reason.as_deref()))
    }

    /// The response body has ended.
    pub fn close(&self) -> JsResult<()> {
        self.with_mut(|v| v.close())
    }

    /// Resolves to the next event, or `null` when more input is needed or
    /// nothing more will come (`ended()` says which). A step is scored
    /// before its event resolves.
    // The RefCell stays borrowed across the GPU's await on purpose, as in
    // WasmSession::append.
    #[allow(clippy::await_holding_refcell_ref)]
    pub fn next(&self) -> JsResult<js_sys::Promise> {
        let inner = Rc::clone(&self.inner);
        Ok(promise(async move {
            let mut v = inner
                .try_borrow_mut()
                .map_err(|_| js_error(Error::invalid_argument(VERIFIER_BUSY)))?;
            match v.next_event_async().await {
                None => Ok(JsValue::NULL),
                Some(Ok(event)) => {
                    let out = camel_js(&event)?;
                    // The server's own `usage` object keeps the server's keys.
                    if let VerifyEvent::Finished(Finish { usage: Some(u), .. }) = &event {
                        js_sys::Reflect::set(&out, &JsValue::from_str("usage"), &to_js(u)?)?;
                    }
                    Ok(out)
                }
                Some(Err(e)) => Err(js_error(Error::from_run("verifyStream", e))),
            }
        }))
    }

    /// Whether nothing more will come: stopped, finished or failed.
    pub fn ended(&self) -> JsResult<bool> {
        self.with_mut(|v| v.ended())
    }

    /// The threshold in force (`null`: never stops).
    pub fn threshold(&self) -> JsResult<Option<f64>> {
        self.with_mut(|v| v.threshold())
    }
}

/// A core value as a JS object with camelCase keys.
fn camel_js<T: Serialize>(value: &T) -> JsResult<JsValue> {
    let json = serde_json::to_value(value).map_err(|e| {
        js_error(Error::new(
            Code::Internal,
            format!("internal: result not representable as JSON: {e}"),
        ))
    })?;
    to_js(&options::camel_keys(json))
}

fn event_js(event: &SearchEvent) -> JsResult<JsValue> {
    camel_js(event)
}

/// The core's result with camelCase keys; `selection` in `selectBest`'s form.
fn search_js(result: SearchResult) -> JsResult<JsValue> {
    let selection = SelectionOut::from(result.selection.clone());
    let out = camel_js(&result)?;
    js_sys::Reflect::set(&out, &JsValue::from_str("selection"), &to_js(&selection)?)?;
    Ok(out)
}

fn score_options(options: JsValue) -> JsResult<ScoreOptions> {
    ScoreOptions::parse(&from_js(options, "score options", Code::InvalidArgument)?)
        .map_err(js_error)
}

fn step_texts(trace: &stepscore::Trace) -> Vec<&str> {
    trace.steps.iter().map(|s| s.text.as_str()).collect()
}

/// Splits a response into steps: `[{text, start, end, role?, tool?}]`, with
/// UTF-16 offsets. `segmenter`: auto (default: step markers, else blank
/// lines, else single lines), blank-line, newline, step-marker, chat, or
/// `regex:<pattern>`.
#[wasm_bindgen]
pub fn segment(text: JsValue, segmenter: JsValue) -> JsResult<JsValue> {
    let text = string_arg(&text, "text", Code::InvalidArgument)?;
    let seg: Segmenter = if segmenter.is_undefined() || segmenter.is_null() {
        Segmenter::default()
    } else {
        string_arg(&segmenter, "segmenter", Code::InvalidArgument)?
            .parse()
            .map_err(|e: stepscore::Error| js_error(Error::invalid_argument(e.to_string())))?
    };
    let steps = segment_steps(&text, seg.segment(&text)).map_err(js_error)?;
    to_js(&steps)
}

/// Reads a trace file's text with the core's reader, as `stepscore read`
/// does: `{records: [{at, format, trace}], errors: [{at, message, text}]}`,
/// every row in input order, the good rows kept when others are bad.
/// `options`: `{format?, segmenter?, name?, maxLineBytes?}` (`name` names
/// the file in errors).
#[wasm_bindgen(js_name = readTraces)]
pub fn read_traces(text: JsValue, options: JsValue) -> JsResult<JsValue> {
    let text = string_arg(&text, "text", Code::InvalidArgument)?;
    let options = if options.is_undefined() {
        Value::Null
    } else {
        from_js(options, "readTraces options", Code::InvalidArgument)?
    };
    let opts = read_options(&options).map_err(js_error)?;
    let result = stepscore::io::read_text(text.as_bytes(), opts)
        .map_err(|e| js_error(Error::new(Code::Internal, e.to_string())))?;
    to_js(&result)
}

/// Checks traces as `scoreMany` does before scoring any (so a scoring that
/// is aborted between traces never started on a bad list); returns how many.
#[wasm_bindgen(js_name = checkTraces)]
pub fn check_traces(traces: JsValue) -> JsResult<usize> {
    let traces = traces_arg(
        from_js(traces, "traces", Code::TraceInvalid)?,
        "traces",
        Purpose::Score,
    )
    .map_err(js_error)?;
    Ok(traces.len())
}

/// The core's model catalog, in the core's own JSON form (`stepscore fetch
/// --list --json`): what a model name given to `StepScorer.load` means.
#[wasm_bindgen]
pub fn catalog() -> JsResult<JsValue> {
    to_js(&stepscore::catalog::ENTRIES)
}

/// Every backend name the core accepts, canonical ones first.
/// Threads a scorer loaded now can use: the threaded build's pool plus the
/// calling thread, 1 in the single-thread build.
#[wasm_bindgen(js_name = availableThreads)]
pub fn available_threads() -> usize {
    stepscore::engine::available()
}

#[wasm_bindgen(js_name = backendNames)]
pub fn backend_names() -> Vec<String> {
    Backend::NAMES.iter().map(|n| n.to_string()).collect()
}

/// The canonical name of a backend (`webgpu` -> `gpu`); an unknown one
/// throws `INVALID_ARGUMENT` with the core's message.
#[wasm_bindgen(js_name = parseBackend)]
pub fn parse_backend(name: JsValue) -> JsResult<String> {
    string_arg(&name, "backend", Code::InvalidArgument)?
        .parse::<Backend>()
        .map(|b| b.name().to_string())
        .map_err(|e| js_error(Error::invalid_argument(e.to_string())))
}

/// The core's software-adapter policy ([`stepscore::prm::is_software_adapter`]):
/// whether a WebGPU adapter, by its description and `isFallbackAdapter`,
/// runs on the CPU (then `auto` keeps to the CPU engine).
#[wasm_bindgen(js_name = isSoftwareAdapter)]
pub fn is_software_adapter(description: &str, is_fallback: bool) -> bool {
    stepscore::prm::is_software_adapter(description, is_fallback)
}

/// One score from step scores (`min` by default); `null` for no scores, NaN
/// when any score is NaN or missing.
#[wasm_bindgen]
pub fn aggregate(scores: JsValue, how: JsValue) -> JsResult<Option<f64>> {
    Ok(aggregate_scores(
        &scored_arg(&scores)?.0,
        aggregation_arg(&how)?,
    ))
}

/// The index of the first step scoring below `threshold` (the core's
/// DEFAULT_THRESHOLD, 0.5, by default;
/// a missing or NaN score counts as below), or -1 when every step passes. A
/// list scored on its last step alone (an outcome reward model's) is that
/// step's score.
#[wasm_bindgen(js_name = firstError)]
pub fn first_error_index(scores: JsValue, threshold: JsValue) -> JsResult<i32> {
    let (scores, first) = scored_arg(&scores)?;
    let threshold = if threshold.is_undefined() || threshold.is_null() {
        stepscore::aggregate::DEFAULT_THRESHOLD
    } else {
        threshold
            .as_f64()
            .filter(|t| (0.0..=1.0).contains(t))
            .ok_or_else(|| {
                js_error(Error::invalid_argument(
                    "threshold must be a number in [0, 1] (step scores are probabilities)",
                ))
            })?
    };
    match first_error(&scores, threshold).map(|i| i + first) {
        None => Ok(-1),
        Some(i) => {
            i32::try_from(i).map_err(|_| js_error(Error::invalid_argument("too many scores")))
        }
    }
}

/// Best-of-N, majority and score-weighted vote over candidate responses.
#[wasm_bindgen(js_name = selectBest)]
pub fn select_best(candidates: JsValue, how: JsValue) -> JsResult<JsValue> {
    let how = aggregation_arg(&how)?;
    let traces = traces_arg(
        from_js(candidates, "candidates", Code::TraceInvalid)?,
        "candidates",
        Purpose::Select,
    )
    .map_err(js_error)?;
    to_js(&SelectionOut::from(stepscore::select::select(&traces, how)))
}

/// The equations `text` writes, each checked in exact rational arithmetic
/// (the core's `recompute`), with UTF-16 spans.
#[wasm_bindgen(js_name = checkArithmetic)]
pub fn check_arithmetic(text: JsValue) -> JsResult<JsValue> {
    let text = string_arg(&text, "text", Code::InvalidArgument)?;
    to_js(&crate::output::equations(&text))
}

/// The final answer a response states (`\boxed{}`, "the answer is ..."), if any.
#[wasm_bindgen(js_name = extractAnswer)]
pub fn extract_answer(text: JsValue) -> JsResult<Option<String>> {
    Ok(stepscore::answer::extract_answer(&string_arg(
        &text,
        "text",
        Code::InvalidArgument,
    )?))
}
