//! Token generation with a scorer's model: the prompt (through the model's
//! chat template unless asked not to) is run once, then one token at a time
//! on the KV cache of the scorer's engine, each chosen by [`Sampler`] from
//! the last position's logits. [`Generation`] is an iterator of tokens (the
//! streaming interface) that stops at the end-of-turn / EOS token, a stop
//! string, the end of a step (a blank line, the segmenter's step rule), the
//! token budget, the context, or a cancel flag, and says which.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::blocking::block_on;
use super::chat::Message;
use super::engine::EngineCache;
use super::scorer::Scorer;
use crate::engine::exp;
use crate::engine::{Sampler, Sampling};
use crate::{Error, Result};

/// What to generate and when to stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerateOptions {
    pub sampling: Sampling,
    /// Most tokens to generate (default 512); at least 1.
    pub max_new_tokens: usize,
    /// Stop before the first of these strings (it is not part of the text).
    pub stop: Vec<String>,
    /// Stop when a step is complete: at the first blank line after some
    /// text (the blank-line segmenter's boundary, kept in the text).
    pub stop_at_step: bool,
    /// Wrap the prompt in the model's chat template as a user turn and
    /// start the assistant's turn (default true; a model without a chat
    /// template takes the prompt as it is).
    pub chat: bool,
    /// A system message for the chat template (the template's default
    /// otherwise).
    pub system: Option<String>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            sampling: Sampling::default(),
            max_new_tokens: 512,
            stop: Vec::new(),
            stop_at_step: false,
            chat: true,
            system: None,
        }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// The model wrote its end-of-turn or end-of-sequence token.
    EndOfTurn,
    /// A stop string appeared (it is cut from the text).
    StopString,
    /// A step was completed (`stop_at_step`).
    StepEnd,
    /// `max_new_tokens` were generated.
    MaxTokens,
    /// The model's context (or the scorer's token limit) is full.
    Context,
    /// [`Generation::cancel_flag`] was set.
    Cancelled,
    /// A search's token budget (over all its candidates) ran out.
    Budget,
}

impl StopReason {
    /// The name the JSON outputs spell it with.
    pub fn name(&self) -> &'static str {
        match self {
            StopReason::EndOfTurn => "end-of-turn",
            StopReason::StopString => "stop-string",
            StopReason::StepEnd => "step-end",
            StopReason::MaxTokens => "max-tokens",
            StopReason::Context => "context",
            StopReason::Cancelled => "cancelled",
            StopReason::Budget => "budget",
        }
    }
}

/// One generated token: its id, the text it completed (empty while a
/// character is split across tokens; the held bytes come with a later
/// token) and its log-probability under the model (temperature 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeneratedToken {
    pub id: u32,
    pub text: String,
    pub logprob: f64,
}

/// A generation in progress, holding its scorer through `S` (a reference,
/// or an `Arc` for bindings that outlive a borrow); iterate it for tokens.
pub struct Generation<S> {
    scorer: S,
    options: GenerateOptions,
    sampler: Sampler,
    cache: EngineCache,
    /// Prompt and generated tokens (the penalty's history).
    history: Vec<u32>,
    prompt_len: usize,
    /// The next forward's input: the token chosen last, not yet run.
    pending: Option<u32>,
    logits: Vec<f32>,
    /// The generated text so far, complete characters only.
    text: String,
    /// Where the step being written starts in `text` (`stop_at_step`).
    step_start: usize,
    stop: Option<StopReason>,
    stop_ids: Vec<u32>,
    cancel: Arc<AtomicBool>,
}

impl<S> std::fmt::Debug for Generation<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("prompt_tokens", &self.prompt_len)
            .field("generated", &(self.history.len() - self.prompt_len))
            .field("stop", &self.stop)
            .finish()
    }
}

impl Scorer {
    /// The prompt text generation runs for `prompt`: the chat template's
    /// user turn and assistant header when `options.chat` (and the model
    /// has a template), else `prompt` itself.
    pub fn generation_prompt(&self, prompt: &str, options: &GenerateOptions) -> Result<String> {
        match (&self.protocol().chat, options.chat) {
            (Some(chat), true) => {
                let mut messages = Vec::new();
                if let Some(system) = &options.system {
                    messages.push(Message {
                        role: "system",
                        content: system,
                    });
                }
                messages.push(Message {
                    role: "user",
                    content: prompt,
                });
                chat.render(&messages, true)
            }
            _ => Ok(prompt.to_string()),
        }
    }

    /// Starts generating after `prompt` (see [`Scorer::generation_prompt`]).
    /// The prompt runs here; each token runs when the iterator asks for the
    /// next one. Errors: options out of range, a prompt that fills the
    /// context, a model opened without its LM head or with layers dropped.
    pub fn generate(&self, prompt: &str, options: &GenerateOptions) -> Result<Generation<&Scorer>> {
        Generation::new(self, prompt, options)
    }

    /// [`Scorer::generate`] for async callers (the WebGPU engine in a browser).
    pub async fn generate_async(
        &self,
        prompt: &str,
        options: &GenerateOptions,
    ) -> Result<Generation<&Scorer>> {
        Generation::new_async(self, prompt, options).await
    }
}

impl<S: Deref<Target = Scorer>> Generation<S> {
    /// [`Scorer::generate`] on a scorer held through `S`.
    pub fn new(scorer: S, prompt: &str, options: &GenerateOptions) -> Result<Self> {
        scorer.blocking_allowed()?;
        block_on(Self::new_async(scorer, prompt, options))
    }

    /// [`Generation::new`] for async callers.
    pub async fn new_async(scorer: S, prompt: &str, options: &GenerateOptions) -> Result<Self> {
        let sampler = Sampler::new(options.sampling.clone())?;
        if options.max_new_tokens == 0 {
            return Err(Error::InvalidArgument(
                "max_new_tokens must be at least 1".into(),
            ));
        }
        if let Some(s) = options.stop.iter().find(|s| s.is_empty()) {
            return Err(Error::InvalidArgument(format!(
                "stop string {s:?}: an empty stop string would stop before anything is written"
            )));
        }
        scorer.can_generate()?;
        let text = scorer.generation_prompt(prompt, options)?;
        let tokens = scorer.tokenizer().encode(&text, true)?;
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("the prompt has no tokens".into()));
        }
        // At least one generated token must fit after the prompt.
        if tokens.len() >= scorer.max_tokens() {
            return Err(Error::TraceTooLong {
                tokens: tokens.len() + 1,
                limit: scorer.max_tokens(),
                truncating: false,
                by_length: None,
            });
        }
        let mut stop_ids: Vec<u32> = scorer.tokenizer().eos_id().into_iter().collect();
        if let Some(chat) = &scorer.protocol().chat {
            stop_ids.extend(scorer.tokenizer().token_to_id(&chat.end_of_turn()?));
        }
        let mut cache = scorer.new_cache();
        scorer.cache_ready(&mut cache).await?;
        let logits = scorer.last_logits(&tokens, &mut cache).await?;
        Ok(Generation {
            scorer,
            options: options.clone(),
            sampler,
            prompt_len: tokens.len(),
            history: tokens,
            cache,
            pending: None,
            logits,
            text: String::new(),
            step_start: 0,
            stop: None,
            stop_ids,
            cancel: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl<S: Clone> Generation<S> {
    /// A copy of this generation that continues from the same point (the
    /// same tokens, a copy of the KV cache, so their shared prefix is never
    /// run again) but samples with `seed`'s own random stream. It has its
    /// own cancel flag.
    pub fn fork(&self, seed: u64) -> Result<Self> {
        let mut sampling = self.sampler.params().clone();
        sampling.seed = seed;
        Ok(Generation {
            scorer: self.scorer.clone(),
            options: self.options.clone(),
            sampler: Sampler::new(sampling)?,
            cache: self.cache.clone(),
            history: self.history.clone(),
            prompt_len: self.prompt_len,
            pending: self.pending,
            logits: self.logits.clone(),
            text: self.text.clone(),
            step_start: self.step_start,
            stop: self.stop.clone(),
            stop_ids: self.stop_ids.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl<S: Deref<Target = Scorer>> Generation<S> {
    /// Why generation stopped, once it has.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        self.stop.as_ref()
    }

    /// The text generated so far (stop strings cut off).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The generated token ids so far.
    pub fn tokens(&self) -> &[u32] {
        &self.history[self.prompt_len..]
    }

    /// Prompt tokens run before the first generated one.
    pub fn prompt_tokens(&self) -> usize {
        self.prompt_len
    }

    /// The text of the step being written: everything after the last
    /// completed step (all the text when `stop_at_step` is off).
    pub fn current_step(&self) -> &str {
        &self.text[self.step_start..]
    }

    /// The step just completed (`stop_at_step`), trimmed as the blank-line
    /// segmenter trims it, when the generation stopped at a step's end.
    pub fn completed_step(&self) -> Option<&str> {
        if self.stop != Some(StopReason::StepEnd) {
            return None;
        }
        let piece = self.current_step();
        step_boundary(piece).map(|end| piece[..end].trim())
    }

    /// Continues after a step's end: the next step starts after the blank
    /// line (any text the same token carried past it belongs to the next
    /// step). Returns false, changing nothing, unless stopped at a step's end.
    pub fn resume(&mut self) -> bool {
        if self.stop != Some(StopReason::StepEnd) {
            return false;
        }
        let Some(end) = step_boundary(self.current_step()) else {
            return false;
        };
        self.step_start += end;
        self.stop = None;
        // The text past the boundary may already hold the next step's end,
        // and the step's last token may have been the last one allowed.
        if step_boundary(self.current_step()).is_some() {
            self.stop = Some(StopReason::StepEnd);
        } else if self.tokens().len() >= self.options.max_new_tokens {
            self.stop = Some(StopReason::MaxTokens);
        }
        true
    }

    /// Ends the generation now, for `reason` (a search's budget, a
    /// caller's cancel); a generation already stopped keeps its reason.
    pub fn stop(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
    }

    /// Setting this flag (from any thread) stops the generation before its
    /// next token, with [`StopReason::Cancelled`].
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Runs generation to its end and returns the text.
    pub fn finish(&mut self) -> Result<&str> {
        for t in self.by_ref() {
            t?;
        }
        Ok(&self.text)
    }

    /// The next token, or `None` once stopped ([`Generation::stop_reason`]).
    pub async fn next_async(&mut self) -> Option<Result<GeneratedToken>> {
        match self.advance().await {
            Ok(Some(t)) => Some(Ok(t)),
            Ok(None) => None,
            Err(e) => {
                // An error ends the generation: the cache may be part-filled.
                self.stop.get_or_insert(StopReason::Cancelled);
                Some(Err(e))
            }
        }
    }

    async fn advance(&mut self) -> Result<Option<GeneratedToken>> {
        match self.prepare() {
            Next::Stopped => Ok(None),
            Next::Run(t) => {
                self.logits = self.scorer.last_logits(&[t], &mut self.cache).await?;
                self.choose()
            }
            Next::Choose => self.choose(),
        }
    }

    /// What the next token needs: nothing (stopped), a forward of the token
    /// chosen last (taken out of `pending`), or only a choice.
    fn prepare(&mut self) -> Next {
        if self.stop.is_some() {
            return Next::Stopped;
        }
        if self.cancel.load(Ordering::Relaxed) {
            self.stop = Some(StopReason::Cancelled);
            return Next::Stopped;
        }
        match self.pending.take() {
            Some(_) if self.history.len() >= self.scorer.max_tokens() => {
                self.stop = Some(StopReason::Context);
                Next::Stopped
            }
            Some(t) => Next::Run(t),
            None => Next::Choose,
        }
    }

    /// Chooses the next token from the current logits and records it.
    fn choose(&mut self) -> Result<Option<GeneratedToken>> {
        let id = self.sampler.next(&self.logits, &self.history)?;
        let logprob = log_softmax_at(&self.logits, id);
        if self.stop_ids.contains(&id) {
            self.stop = Some(StopReason::EndOfTurn);
            return Ok(None);
        }
        self.history.push(id);
        self.pending = Some(id);
        let generated = &self.history[self.prompt_len..];
        let decoded = self.scorer.tokenizer().decode(generated, true)?;
        // A character split across tokens decodes to U+FFFD at the end:
        // hold it back until its last byte arrives.
        let complete = decoded.trim_end_matches('\u{FFFD}');
        let mut text = match complete.strip_prefix(self.text.as_str()) {
            Some(new) => new.to_string(),
            None => String::new(),
        };
        if complete.len() > self.text.len() && complete.starts_with(self.text.as_str()) {
            self.text = complete.to_string();
        }
        if let Some(cut) = self.first_stop_string() {
            let keep_new = text.len().saturating_sub(self.text.len() - cut);
            text.truncate(keep_new);
            self.text.truncate(cut);
            self.stop = Some(StopReason::StopString);
        } else if self.options.stop_at_step && step_boundary(self.current_step()).is_some() {
            self.stop = Some(StopReason::StepEnd);
        } else if generated.len() >= self.options.max_new_tokens {
            self.stop = Some(StopReason::MaxTokens);
        }
        Ok(Some(GeneratedToken { id, text, logprob }))
    }

    /// The byte offset of the earliest stop string in the text.
    fn first_stop_string(&self) -> Option<usize> {
        self.options
            .stop
            .iter()
            .filter_map(|s| self.text.find(s.as_str()))
            .min()
    }
}

/// What a generation's next token needs (see `Generation::prepare`).
enum Next {
    Stopped,
    Run(u32),
    Choose,
}

/// The next token of each of several generations on one scorer, as
/// [`Generation::next_async`] of each in turn would give them (the same
/// tokens, bits and stops), with their forwards run as one pass on the CPU
/// engine: a decode step of N candidates reads the weights once. `None`
/// for a generation that has stopped. Generations on different scorers
/// are refused.
pub async fn next_tokens<S: Deref<Target = Scorer>>(
    gens: &mut [&mut Generation<S>],
) -> Result<Vec<Option<GeneratedToken>>> {
    if let Some(first) = gens.first() {
        let scorer: &Scorer = &first.scorer;
        if gens
            .iter()
            .any(|g| !std::ptr::eq::<Scorer>(&*g.scorer, scorer))
        {
            return Err(Error::InvalidArgument(
                "next_tokens: every generation must run on the same scorer".into(),
            ));
        }
    }
    let plans: Vec<Next> = gens.iter_mut().map(|g| g.prepare()).collect();
    let (mut tokens, mut caches, mut which) = (Vec::new(), Vec::new(), Vec::new());
    let mut scorer: Option<&Scorer> = None;
    for (i, (g, plan)) in gens.iter_mut().zip(&plans).enumerate() {
        if let Next::Run(t) = plan {
            // Disjoint fields: the scorer read, the cache written.
            let Generation {
                scorer: s, cache, ..
            } = &mut **g;
            scorer.get_or_insert(&**s);
            tokens.push(*t);
            caches.push(cache);
            which.push(i);
        }
    }
    let rows = match scorer {
        Some(scorer) => Some(scorer.last_logits_rows(&tokens, &mut caches).await),
        None => None,
    };
    drop(caches);
    match rows {
        Some(Ok(rows)) => {
            for (&i, logits) in which.iter().zip(rows) {
                gens[i].logits = logits;
            }
        }
        Some(Err(e)) => {
            // The forward failed: these generations end (their caches
            // were left as they were).
            for &i in &which {
                gens[i].stop.get_or_insert(StopReason::Cancelled);
            }
            return Err(e);
        }
        None => {}
    }
    let mut out = Vec::with_capacity(gens.len());
    for (g, plan) in gens.iter_mut().zip(plans) {
        out.push(match plan {
            Next::Stopped => None,
            Next::Run(_) | Next::Choose => match g.choose() {
                Ok(t) => t,
                Err(e) => {
                    g.stop.get_or_insert(StopReason::Cancelled);
                    return Err(e);
                }
            },
        });
    }
    Ok(out)
}

/// `n` generations after one prompt, run to their ends: the prompt runs
/// once (each generation continues a copy of its cache) and their decode
/// steps run together ([`next_tokens`]). Generation `i` samples with seed
/// `options.sampling.seed + i` and writes what [`Scorer::generate`] with
/// that seed writes, token for token. For best-of-N sampling and for
/// Monte-Carlo completions from a solution's prefix.
pub fn generate_many<S: Deref<Target = Scorer> + Clone>(
    scorer: S,
    prompt: &str,
    options: &GenerateOptions,
    n: usize,
) -> Result<Vec<Generation<S>>> {
    scorer.blocking_allowed()?;
    block_on(generate_many_async(scorer, prompt, options, n))
}

/// [`generate_many`], awaited.
pub(crate) async fn generate_many_async<S: Deref<Target = Scorer> + Clone>(
    scorer: S,
    prompt: &str,
    options: &GenerateOptions,
    n: usize,
) -> Result<Vec<Generation<S>>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let base = Generation::new_async(scorer, prompt, options).await?;
    let seed = options.sampling.seed;
    let mut gens = (0..n as u64)
        .map(|i| base.fork(seed.wrapping_add(i)))
        .collect::<Result<Vec<_>>>()?;
    drop(base);
    loop {
        let mut refs: Vec<&mut Generation<S>> = gens.iter_mut().collect();
        if next_tokens(&mut refs).await?.iter().all(Option::is_none) {
            return Ok(gens);
        }
    }
}

impl<S: Deref<Target = Scorer>> Iterator for Generation<S> {
    type Item = Result<GeneratedToken>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = self.scorer.blocking_allowed() {
            return Some(Err(e));
        }
        block_on(async { Ok(self.next_async().await) }).unwrap_or_else(|e| Some(Err(e)))
    }
}

/// Where the first step of `text` ends: just past the first blank line
/// that follows some non-blank text. The segmenter's rule
/// ([`crate::segment::first_step_end`]), which the stream verifier cuts at too.
pub(crate) fn step_boundary(text: &str) -> Option<usize> {
    crate::segment::first_step_end(text)
}

/// A step is complete at the first blank line that follows some text.
#[cfg(test)]
fn step_complete(text: &str) -> bool {
    step_boundary(text).is_some()
}

/// ln softmax(logits)[id], max-shifted, e^x by the engines' function, summed in id order.
fn log_softmax_at(logits: &[f32], id: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let total: f64 = logits.iter().map(|&l| exp(l - max) as f64).sum();
    (logits[id as usize] - max) as f64 - total.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_ends_at_the_first_blank_line_after_text() {
        assert!(!step_complete("\n\n"));
        assert!(!step_complete("First, 2 + 2 = 4.\n"));
        assert!(step_complete("First, 2 + 2 = 4.\n\n"));
        assert!(step_complete("First.\n\nSecond"));
        assert!(step_complete("First.\n\n"));
        // A whitespace-only or CRLF blank line ends a step, as it does for the segmenter.
        assert!(step_complete("First.\n \nSecond"));
        assert!(step_complete("First.\r\n\r\n"));
        assert!(step_complete("First.\n \t\nSecond"));
        assert!(!step_complete("First.\n  "));
    }

    #[test]
    fn the_boundary_is_just_past_the_first_blank_line() {
        assert_eq!(step_boundary("\n\nA.\n\nB.\n\n"), Some(6));
        assert_eq!(step_boundary("A.\r\n\r\nB"), Some(6));
        assert_eq!(step_boundary("A.\nB."), None);
        // Any whitespace-only line is blank, as for the segmenter (U+00A0 here).
        assert_eq!(step_boundary("A.\n\u{a0}\nB"), Some(6));
    }

    #[test]
    fn stop_reasons_are_named_as_serde_writes_them() {
        use StopReason::*;
        for r in [
            EndOfTurn, StopString, StepEnd, MaxTokens, Context, Cancelled, Budget,
        ] {
            assert_eq!(serde_json::to_value(&r).unwrap(), r.name());
        }
    }

    #[test]
    fn log_softmax_matches_the_definition() {
        let logits = [1.0f32, 2.0, 3.0];
        let want = 2.0f64 - (1f64.exp() + 2f64.exp() + 3f64.exp()).ln();
        assert!((log_softmax_at(&logits, 1) - want).abs() < 1e-6);
    }
}
