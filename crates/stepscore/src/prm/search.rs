//! PRM-guided search: a generator writes candidate solutions step by step
//! and a verifier (a PRM; it may be the same scorer) scores each step the
//! moment it is complete. Three methods, as huggingface/search-and-learn
//! defines them:
//!
//! - **best-of-N**: N independent samples, each written to its end.
//! - **beam search**: N beams write one step each; the best N/M by their
//!   aggregated step scores survive; at the next step each survivor is
//!   continued M times (itself and M-1 forks) so N beams write again.
//!   Beams that end (end of turn, token limit) are set aside as finished;
//!   the last allowed step is written to the end. The first N finished
//!   beams are the finalists.
//! - **diverse verifier tree search (DVTS)**: N/M independent subtrees;
//!   each writes M children of its current beam per step and continues
//!   the best child only. A subtree ends when its best child ends or has
//!   written a `\boxed{` answer; the M children of its last expansion are
//!   its finalists.
//!
//! Every method reports the choice three ways over its finalists (best by
//! aggregated PRM score, PRM-weighted vote, majority vote;
//! [`crate::select::Selection`]); [`SearchResult::chosen`] is the best one,
//! the choice search-and-learn makes.
//!
//! Prefixes are computed once: the prompt runs once, every candidate is a
//! fork of it, and a fork copies its parent's KV caches (generator and
//! verifier) instead of running the shared tokens again. A fork samples
//! from its own seed, derived from the options' seed and its index, so a
//! search is reproducible. Candidates advance together, one token each
//! per turn, so a progress display sees all of them being written at once;
//! the CPU engine runs a turn's forwards as one pass (the weights are read
//! once per turn, not once per candidate), the GPU engine one by one, with
//! the same tokens either way. A generator and verifier that
//! are the same scorer share its weights; they keep separate KV caches,
//! since the generator reads the chat layout and the verifier its family's
//! own layout (a head is trained on the latter).

use std::ops::Deref;

use serde::{Deserialize, Serialize};

use super::blocking::block_on;
use super::generate::{next_tokens, GenerateOptions, Generation, StopReason};
use super::scorer::Scorer;
use super::session::Session;
use crate::aggregate::{aggregate, Aggregation};
use crate::select::{select_with, Selection};
use crate::trace::{Step, Trace};
use crate::validate::Unscored;
use crate::{Error, Result};

/// Most candidates one search may hold: each live one keeps two KV caches.
pub const MAX_CANDIDATES: usize = 256;

/// The system message a search asks the generator with unless
/// [`GenerateOptions::system`] says otherwise: steps separated by blank
/// lines (the verifier's step rule) and a final answer the answer
/// extractor finds.
pub const DEFAULT_SEARCH_SYSTEM: &str = "Solve the problem step by step. Write each step as one short paragraph and leave a blank line between steps. End with the final answer written as \\boxed{ANSWER}.";

/// Which search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SearchMethod {
    /// N independent solutions, each written to its end.
    #[default]
    BestOfN,
    /// Step-level beam search: keep the best N/M, continue each M times.
    Beam,
    /// Diverse verifier tree search: N/M subtrees, M children per step each.
    Dvts,
}

impl SearchMethod {
    /// The name the options and outputs spell it with.
    pub fn name(self) -> &'static str {
        match self {
            SearchMethod::BestOfN => "best-of-n",
            SearchMethod::Beam => "beam",
            SearchMethod::Dvts => "dvts",
        }
    }
}

impl std::fmt::Display for SearchMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a search does and how much it may spend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchOptions {
    pub method: SearchMethod,
    /// Candidates (N; default 4), 1 to [`MAX_CANDIDATES`].
    pub n: usize,
    /// Expansions per kept beam (M; default 4), for beam search and DVTS:
    /// N must be a multiple of M.
    pub beam_width: usize,
    /// Most steps a beam-search or DVTS candidate writes; the last one is
    /// written to the end (default 40). Best-of-N is bounded by tokens only.
    pub max_steps: usize,
    /// How a candidate's step scores rank it (default min;
    /// search-and-learn's default is last).
    pub aggregation: Aggregation,
    /// Most generated tokens over all candidates (none: unlimited). When it
    /// runs out every candidate ends where it is ([`StopReason::Budget`]).
    pub token_budget: Option<usize>,
    /// Sampling and per-candidate limits (`max_new_tokens`, `stop`,
    /// `chat`, `system`). `system` left out when read by serde: the search's
    /// own, [`DEFAULT_SEARCH_SYSTEM`] (`null`: none). Candidates stop at
    /// every step's end whatever `stop_at_step` says.
    #[serde(deserialize_with = "search_generation")]
    pub generate: GenerateOptions,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            method: SearchMethod::BestOfN,
            n: 4,
            beam_width: 4,
            max_steps: 40,
            aggregation: Aggregation::Min,
            token_budget: None,
            generate: GenerateOptions {
                system: Some(DEFAULT_SEARCH_SYSTEM.to_string()),
                ..GenerateOptions::default()
            },
        }
    }
}

/// A search's `generate` options as serde reads them: [`GenerateOptions`],
/// except that leaving `system` out keeps the search's system message
/// ([`SearchOptions::default`]'s) where GenerateOptions' own default has none.
fn search_generation<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<GenerateOptions, D::Error> {
    let given = serde_json::Value::deserialize(d)?;
    let keeps_system = given.get("system").is_none();
    let mut options: GenerateOptions = serde_path_to_error::deserialize(given).map_err(|e| {
        serde::de::Error::custom(match e.path().to_string().as_str() {
            "." => e.inner().to_string(),
            path => format!("`{path}`: {}", e.inner()),
        })
    })?;
    if keeps_system {
        options.system = SearchOptions::default().generate.system;
    }
    Ok(options)
}

impl SearchOptions {
    /// Refuses settings no search can run with, naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.n == 0 || self.n > MAX_CANDIDATES {
            return bad(format!("n = {}: must be 1 to {MAX_CANDIDATES}", self.n));
        }
        if self.method != SearchMethod::BestOfN {
            if self.beam_width == 0 || self.n % self.beam_width != 0 {
                return bad(format!(
                    "beam_width = {} with n = {}: n must be a positive multiple of beam_width",
                    self.beam_width, self.n
                ));
            }
            if self.max_steps == 0 {
                return bad("max_steps must be at least 1".into());
            }
        }
        if self.token_budget == Some(0) {
            return bad("token_budget must be at least 1 (or none)".into());
        }
        Ok(())
    }
}

/// Progress, in the order it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum SearchEvent {
    /// A candidate was made: from the prompt (`from` none) or as a fork of
    /// candidate `from`, whose text it starts with.
    Forked {
        candidate: usize,
        from: Option<usize>,
    },
    /// A candidate wrote a token (`text` may be empty while a character is
    /// split across tokens).
    Token { candidate: usize, text: String },
    /// The verifier scored a candidate's step `step` (0-based).
    Step {
        candidate: usize,
        step: usize,
        text: String,
        score: f64,
    },
    /// The search dropped a candidate (it stops being written).
    Pruned { candidate: usize },
    /// A candidate ended, for `stop_reason`.
    Finished {
        candidate: usize,
        stop_reason: StopReason,
    },
}

/// One candidate of a finished search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchCandidate {
    pub index: usize,
    /// The candidate it was forked from.
    pub parent: Option<usize>,
    /// Everything it generated (its ancestors' text included).
    pub text: String,
    /// Its steps, as the blank-line segmenter cuts `text`.
    pub steps: Vec<String>,
    /// The verifier's score of each step; shorter than `steps` when the last
    /// steps did not fit the verifier's token limit (they are unscored).
    pub scores: Vec<f64>,
    /// `scores` aggregated with the search's aggregation.
    pub score: Option<f64>,
    /// The final answer its text gives (see [`crate::answer::extract_answer`];
    /// for a pruned or unfinished candidate, what its text says so far).
    pub answer: Option<String>,
    /// Tokens in `text`.
    pub tokens: usize,
    /// Why it stopped being written; none for a candidate continued by
    /// forks (a DVTS beam or a beam that was expanded).
    pub stop_reason: Option<StopReason>,
    /// The search dropped it.
    pub pruned: bool,
    /// It is among the candidates the choice is made from.
    pub finalist: bool,
}

/// A search's candidates, its choice and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResult {
    pub method: SearchMethod,
    /// Every candidate the search made, in creation order.
    pub candidates: Vec<SearchCandidate>,
    /// The candidates the choice is made from.
    pub finalists: Vec<usize>,
    /// The finalist with the best aggregated score (the method's answer).
    pub chosen: Option<usize>,
    /// Best, majority and PRM-weighted vote over the finalists; its indices
    /// are candidate indices.
    pub selection: Selection,
    /// Tokens of the prompt, run once.
    pub prompt_tokens: usize,
    /// Tokens sampled, over all candidates.
    pub tokens_generated: usize,
    /// Tokens the verifier ran (prefixes shared by forks counted once).
    pub tokens_scored: usize,
    /// The token budget ran out before every candidate ended.
    pub budget_exhausted: bool,
    /// The event callback asked to stop; the result holds what was done.
    pub cancelled: bool,
}

impl Scorer {
    /// Runs a PRM-guided search for `problem` with this scorer generating
    /// and `verifier` scoring (it may be `self`). `on_event` sees progress
    /// and returns false to stop the search early (the result holds what
    /// was done, with [`SearchResult::cancelled`] set).
    pub fn search(
        &self,
        verifier: &Scorer,
        problem: &str,
        options: &SearchOptions,
        on_event: &mut dyn FnMut(&SearchEvent) -> bool,
    ) -> Result<SearchResult> {
        search(self, verifier, problem, options, on_event)
    }

    /// [`Scorer::search`] for async callers (the WebGPU engine in a browser).
    pub async fn search_async(
        &self,
        verifier: &Scorer,
        problem: &str,
        options: &SearchOptions,
        on_event: &mut dyn FnMut(&SearchEvent) -> bool,
    ) -> Result<SearchResult> {
        search_async(self, verifier, problem, options, on_event).await
    }
}

/// [`Scorer::search`] with the scorers held through any pointer
/// (`&Scorer`, `Rc`, `Arc`), for bindings whose searches cannot borrow.
pub fn search<S: Deref<Target = Scorer> + Clone>(
    generator: S,
    verifier: S,
    problem: &str,
    options: &SearchOptions,
    on_event: &mut dyn FnMut(&SearchEvent) -> bool,
) -> Result<SearchResult> {
    generator.blocking_allowed()?;
    verifier.blocking_allowed()?;
    block_on(search_async(
        generator, verifier, problem, options, on_event,
    ))
}

/// [`search`], awaited.
pub async fn search_async<S: Deref<Target = Scorer> + Clone>(
    generator: S,
    verifier: S,
    problem: &str,
    options: &SearchOptions,
    on_event: &mut dyn FnMut(&SearchEvent) -> bool,
) -> Result<SearchResult> {
    options.validate()?;
    let mut generate = options.generate.clone();
    generate.stop_at_step = true;
    let root = Generation::new_async(generator, problem, &generate).await?;
    let mut session = Session::new(verifier, problem);
    session.prime_async().await?;
    let mut run = Run {
        options,
        on_event,
        nodes: Vec::new(),
        generated: 0,
        scored: session.computed_tokens(),
        budget_exhausted: false,
        cancelled: false,
    };
    let prompt_tokens = root.prompt_tokens();
    let root = Live { gen: root, session };
    let finalists = match options.method {
        SearchMethod::BestOfN => run.best_of_n(&root).await?,
        SearchMethod::Beam => run.beam(&root).await?,
        SearchMethod::Dvts => run.dvts(&root).await?,
    };
    Ok(run.finish(finalists, prompt_tokens))
}

/// A candidate still being written: its generation and its verifier session.
struct Live<S> {
    gen: Generation<S>,
    session: Session<S>,
}

impl<S: Deref<Target = Scorer> + Clone> Live<S> {
    fn fork(&self, seed: u64) -> Result<Self> {
        Ok(Live {
            gen: self.gen.fork(seed)?,
            session: self.session.clone(),
        })
    }
}

/// A candidate: its record and, while it is written, its state.
struct Node<S> {
    record: SearchCandidate,
    live: Option<Live<S>>,
}

struct Run<'a, S> {
    options: &'a SearchOptions,
    on_event: &'a mut dyn FnMut(&SearchEvent) -> bool,
    nodes: Vec<Node<S>>,
    generated: usize,
    scored: usize,
    budget_exhausted: bool,
    cancelled: bool,
}

impl<S: Deref<Target = Scorer> + Clone> Run<'_, S> {
    fn emit(&mut self, event: SearchEvent) {
        if !self.cancelled && !(self.on_event)(&event) {
            self.cancelled = true;
        }
    }

    /// A new candidate forked from `from`'s state (`parent` when `from` is a
    /// candidate rather than the prompt).
    fn fork(&mut self, from: &Live<S>, parent: Option<usize>) -> Result<usize> {
        let index = self.nodes.len();
        let live = from.fork(fork_seed(self.options.generate.sampling.seed, index))?;
        let record = parent.map_or_else(
            || SearchCandidate {
                index,
                parent: None,
                text: String::new(),
                steps: Vec::new(),
                scores: Vec::new(),
                score: None,
                answer: None,
                tokens: 0,
                stop_reason: None,
                pruned: false,
                finalist: false,
            },
            |p| SearchCandidate {
                index,
                parent: Some(p),
                stop_reason: None,
                pruned: false,
                finalist: false,
                ..self.nodes[p].record.clone()
            },
        );
        self.nodes.push(Node {
            record,
            live: Some(live),
        });
        self.emit(SearchEvent::Forked {
            candidate: index,
            from: parent,
        });
        Ok(index)
    }

    /// Forks candidate `from` (which stays live).
    fn fork_candidate(&mut self, from: usize) -> Result<usize> {
        let live = self.nodes[from]
            .live
            .take()
            .ok_or_else(|| Error::Internal(format!("search: candidate {from} is not live")))?;
        let out = self.fork(&live, Some(from));
        self.nodes[from].live = Some(live);
        out
    }

    fn live(&mut self, i: usize) -> Result<&mut Live<S>> {
        self.nodes[i]
            .live
            .as_mut()
            .ok_or_else(|| Error::Internal(format!("search: candidate {i} is not live")))
    }

    fn budget_spent(&self) -> bool {
        // (Checked when a candidate pauses: `write_step` admits writers.)
        self.options
            .token_budget
            .is_some_and(|b| self.generated >= b)
    }

    fn is_finished(&self, i: usize) -> bool {
        self.nodes[i].record.stop_reason.is_some()
    }

    /// Writes one more step of each candidate in `active`, one token each
    /// per turn (their forwards batched: `generate::next_tokens`), then
    /// scores what each completed. A candidate whose generation ends
    /// (rather than pausing at a step's end) is finished.
    async fn write_step(&mut self, active: &[usize]) -> Result<()> {
        loop {
            // Who writes this turn: live candidates, as many as the budget allows.
            let mut turn = Vec::new();
            for &i in active {
                let cancelled = self.cancelled;
                let left = self
                    .options
                    .token_budget
                    .map(|b| b.saturating_sub(self.generated));
                let gen = &mut self.live(i)?.gen;
                if cancelled {
                    gen.stop(StopReason::Cancelled);
                } else if gen.stop_reason().is_none() && left.is_some_and(|l| l <= turn.len()) {
                    gen.stop(StopReason::Budget);
                    self.budget_exhausted = true;
                } else if gen.stop_reason().is_none() {
                    turn.push(i);
                }
            }
            if turn.is_empty() {
                break;
            }
            let mut gens = live_parts(&mut self.nodes, &turn, |l| &mut l.gen)?;
            let tokens = next_tokens(&mut gens).await?;
            drop(gens);
            for (&i, token) in turn.iter().zip(tokens) {
                if let Some(token) = token {
                    self.generated += 1;
                    self.emit(SearchEvent::Token {
                        candidate: i,
                        text: token.text,
                    });
                }
            }
        }
        self.score_steps(active).await
    }

    /// Scores what each candidate in `active` wrote since its last step
    /// (the step it completed, or the rest of its text when its generation
    /// ended), all candidates' steps run together by the verifier
    /// (`Session::extend_together`), then records each in `active`'s order.
    async fn score_steps(&mut self, active: &[usize]) -> Result<()> {
        let mut wrote = Vec::with_capacity(active.len());
        for &i in active {
            let live = self.live(i)?;
            let stop = live.gen.stop_reason().cloned();
            let step = match (&stop, live.gen.completed_step()) {
                (Some(StopReason::StepEnd), Some(step)) => Some(step.to_string()),
                _ => Some(live.gen.current_step().trim().to_string()).filter(|s| !s.is_empty()),
            };
            // After a step the verifier could not take, none fits.
            let record = &self.nodes[i].record;
            let scorable = record.steps.len() == record.scores.len();
            wrote.push((i, stop, step, scorable));
        }
        let to_score: Vec<(usize, &str)> = wrote
            .iter()
            .filter_map(|(i, _, step, scorable)| {
                step.as_deref().filter(|_| *scorable).map(|s| (*i, s))
            })
            .collect();
        let ids: Vec<usize> = to_score.iter().map(|&(i, _)| i).collect();
        let mut sessions = live_parts(&mut self.nodes, &ids, |l| &mut l.session)?;
        let before: Vec<usize> = sessions.iter().map(|s| s.computed_tokens()).collect();
        let news: Vec<Vec<&str>> = to_score.iter().map(|&(_, s)| vec![s]).collect();
        let results = Session::extend_together(&mut sessions, &news).await?;
        let computed: Vec<usize> = sessions
            .iter()
            .zip(&before)
            .map(|(s, b)| s.computed_tokens() - b)
            .collect();
        drop(sessions);
        drop((to_score, news));
        let mut results = ids.into_iter().zip(results.into_iter().zip(computed));
        let mut next = results.next();
        for (i, stop, step, _) in wrote {
            let mut scored = None;
            if next.as_ref().is_some_and(|(j, _)| *j == i) {
                scored = next.map(|(_, r)| r);
                next = results.next();
            }
            self.record_step(i, stop, step, scored)?;
        }
        Ok(())
    }

    /// Records what candidate `i` wrote (`step`, with the verifier's result
    /// and the tokens it ran, when it scored it) and ends the candidate
    /// unless it paused at a step's end.
    fn record_step(
        &mut self,
        i: usize,
        stop: Option<StopReason>,
        step: Option<String>,
        scored: Option<(Result<Vec<f64>>, usize)>,
    ) -> Result<()> {
        let live = self.live(i)?;
        let text = live.gen.text().to_string();
        let tokens = live.gen.tokens().len();
        if let Some(step) = step {
            let record_step = self.nodes[i].record.steps.len();
            self.nodes[i].record.steps.push(step.clone());
            match scored {
                Some((Ok(scores), computed)) => {
                    let score = scores.first().copied().ok_or_else(|| {
                        Error::Internal("search: the verifier returned no score".into())
                    })?;
                    self.scored += computed;
                    self.nodes[i].record.scores.push(score);
                    self.emit(SearchEvent::Step {
                        candidate: i,
                        step: record_step,
                        text: step,
                        score,
                    });
                }
                Some((Err(Error::TraceTooLong { .. }), _)) | None => {}
                Some((Err(e), _)) => return Err(e),
            }
        }
        let record = &mut self.nodes[i].record;
        record.text = text;
        record.tokens = tokens;
        record.score = aggregate(&record.scores, self.options.aggregation);
        // A candidate paused at a step's end when the search was cancelled
        // or its budget ran out ends there.
        let stop = match stop {
            Some(StopReason::StepEnd) if self.cancelled => Some(StopReason::Cancelled),
            Some(StopReason::StepEnd) if self.budget_spent() => {
                self.budget_exhausted = true;
                Some(StopReason::Budget)
            }
            other => other,
        };
        let record = &mut self.nodes[i].record;
        if stop != Some(StopReason::StepEnd) {
            let reason = stop.unwrap_or(StopReason::Cancelled);
            record.stop_reason = Some(reason.clone());
            self.nodes[i].live = None;
            self.emit(SearchEvent::Finished {
                candidate: i,
                stop_reason: reason,
            });
        }
        Ok(())
    }

    /// Continues a candidate paused at a step's end.
    fn resume(&mut self, i: usize) -> Result<()> {
        let live = self.live(i)?;
        live.gen.resume();
        Ok(())
    }

    /// Writes each candidate in `active` to its end, step by step.
    async fn write_to_end(&mut self, active: &[usize]) -> Result<()> {
        let mut active: Vec<usize> = active.to_vec();
        while !active.is_empty() {
            self.write_step(&active).await?;
            active.retain(|&i| !self.is_finished(i));
            for &i in &active {
                self.resume(i)?;
            }
        }
        Ok(())
    }

    fn prune(&mut self, i: usize) {
        self.nodes[i].record.pruned = true;
        self.nodes[i].live = None;
        self.emit(SearchEvent::Pruned { candidate: i });
    }

    /// The candidate's rank key: its aggregated score, a candidate without
    /// a finite one last.
    fn rank(&self, i: usize) -> f64 {
        self.nodes[i]
            .record
            .score
            .filter(|s| s.is_finite())
            .unwrap_or(f64::NEG_INFINITY)
    }

    /// `candidates` from best to worst; ties keep their order.
    fn best_first(&self, candidates: &[usize]) -> Vec<usize> {
        let mut sorted = candidates.to_vec();
        sorted.sort_by(|&a, &b| self.rank(b).total_cmp(&self.rank(a)));
        sorted
    }

    async fn best_of_n(&mut self, root: &Live<S>) -> Result<Vec<usize>> {
        let mut all = Vec::new();
        for _ in 0..self.options.n {
            all.push(self.fork(root, None)?);
        }
        self.write_to_end(&all).await?;
        Ok(all)
    }

    async fn beam(&mut self, root: &Live<S>) -> Result<Vec<usize>> {
        let n = self.options.n;
        let keep = n / self.options.beam_width;
        let mut active = Vec::new();
        for _ in 0..n {
            active.push(self.fork(root, None)?);
        }
        let mut finished: Vec<usize> = Vec::new();
        for iteration in 0..self.options.max_steps {
            if self.cancelled {
                break;
            }
            if iteration > 0 {
                // The survivors, each continued by forks until N write again.
                let survivors = active.clone();
                for k in survivors.len()..n {
                    active.push(self.fork_candidate(survivors[k % survivors.len()])?);
                }
            }
            if iteration + 1 == self.options.max_steps {
                self.write_to_end(&active).await?;
            } else {
                self.write_step(&active).await?;
            }
            finished.extend(active.iter().filter(|&&i| self.is_finished(i)));
            active.retain(|&i| !self.is_finished(i));
            if active.is_empty() {
                break;
            }
            let ranked = self.best_first(&active);
            for &i in &ranked[keep.min(ranked.len())..] {
                self.prune(i);
            }
            active.retain(|i| ranked[..keep.min(ranked.len())].contains(i));
            for &i in &active {
                self.resume(i)?;
            }
        }
        // Finished beams beyond N are not finalists.
        for i in finished[n.min(finished.len())..].to_vec() {
            self.prune(i);
        }
        finished.truncate(n);
        Ok(finished)
    }

    async fn dvts(&mut self, root: &Live<S>) -> Result<Vec<usize>> {
        let width = self.options.beam_width;
        // Per subtree: its current beam (none before the first step) and
        // the children of its last expansion.
        let subtrees = self.options.n / width;
        let mut beams: Vec<Option<usize>> = vec![None; subtrees];
        let mut last_children: Vec<Vec<usize>> = vec![Vec::new(); subtrees];
        let mut open: Vec<bool> = vec![true; subtrees];
        for iteration in 0..self.options.max_steps {
            if self.cancelled {
                break;
            }
            let mut children: Vec<(usize, Vec<usize>)> = Vec::new();
            for t in (0..subtrees).filter(|&t| open[t]) {
                let mut kids = Vec::new();
                for _ in 0..width {
                    kids.push(match beams[t] {
                        None => self.fork(root, None)?,
                        Some(b) => self.fork_candidate(b)?,
                    });
                }
                // The beam lives on in its children.
                if let Some(b) = beams[t] {
                    self.nodes[b].live = None;
                }
                children.push((t, kids));
            }
            if children.is_empty() {
                break;
            }
            let all: Vec<usize> = children.iter().flat_map(|(_, k)| k.clone()).collect();
            if iteration + 1 == self.options.max_steps {
                self.write_to_end(&all).await?;
            } else {
                self.write_step(&all).await?;
            }
            for (t, kids) in children {
                let best = self.best_first(&kids)[0];
                let done = self.is_finished(best)
                    || self.nodes[best].record.text.contains("\\boxed{")
                    || iteration + 1 == self.options.max_steps;
                if done {
                    open[t] = false;
                    // A finalist still paused at a step's end ends here.
                    for &k in &kids {
                        if !self.is_finished(k) {
                            self.end(k, StopReason::StepEnd);
                        }
                    }
                } else {
                    for &k in kids.iter().filter(|&&k| k != best) {
                        self.prune(k);
                    }
                    self.resume(best)?;
                }
                beams[t] = Some(best);
                last_children[t] = kids;
            }
        }
        Ok(last_children.into_iter().flatten().collect())
    }

    /// Ends a paused candidate where it is.
    fn end(&mut self, i: usize, reason: StopReason) {
        self.nodes[i].live = None;
        self.nodes[i].record.stop_reason = Some(reason.clone());
        self.emit(SearchEvent::Finished {
            candidate: i,
            stop_reason: reason,
        });
    }

    fn finish(mut self, finalists: Vec<usize>, prompt_tokens: usize) -> SearchResult {
        let traces: Vec<Trace> = finalists
            .iter()
            .map(|&i| {
                let r = &self.nodes[i].record;
                Trace {
                    response: Some(r.text.clone()),
                    steps: r
                        .steps
                        .iter()
                        .enumerate()
                        .map(|(k, s)| Step {
                            score: r.scores.get(k).copied(),
                            ..Step::new(s.clone())
                        })
                        .collect(),
                    ..Trace::default()
                }
            })
            .collect();
        let mut selection = select_with(&traces, self.options.aggregation, Unscored::Prefix);
        // Selection numbers the finalists; the result numbers candidates.
        for c in &mut selection.candidates {
            c.index = finalists[c.index];
        }
        for vote in [&mut selection.majority, &mut selection.weighted]
            .into_iter()
            .flatten()
        {
            for m in &mut vote.members {
                *m = finalists[*m];
            }
        }
        selection.best = selection.best.map(|k| finalists[k]);
        for &i in &finalists {
            self.nodes[i].record.finalist = true;
        }
        for node in &mut self.nodes {
            node.record.answer = crate::answer::extract_answer(&node.record.text);
        }
        SearchResult {
            method: self.options.method,
            candidates: self.nodes.into_iter().map(|n| n.record).collect(),
            chosen: selection.best,
            finalists,
            selection,
            prompt_tokens,
            tokens_generated: self.generated,
            tokens_scored: self.scored,
            budget_exhausted: self.budget_exhausted,
            cancelled: self.cancelled,
        }
    }
}

/// One part (`part`) of each live candidate in `ids`, borrowed at once
/// (disjoint nodes), in `ids`' order.
fn live_parts<'a, S, T>(
    nodes: &'a mut [Node<S>],
    ids: &[usize],
    part: impl Fn(&'a mut Live<S>) -> &'a mut T,
) -> Result<Vec<&'a mut T>> {
    let mut slots: Vec<Option<&'a mut Live<S>>> =
        nodes.iter_mut().map(|n| n.live.as_mut()).collect();
    ids.iter()
        .map(|&i| {
            slots
                .get_mut(i)
                .and_then(Option::take)
                .map(&part)
                .ok_or_else(|| Error::Internal(format!("search: candidate {i} is not live")))
        })
        .collect()
}

/// Candidate `index`'s sampling seed: the options' seed and the index mixed
/// by SplitMix64's finalizer, so no two candidates' random streams overlap
/// (seeds one increment apart would give shifted copies of one stream).
fn fork_seed(seed: u64, index: usize) -> u64 {
    let mut z = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generate_object_without_system_keeps_the_search_s_system_message() {
        let read = |json: &str| serde_json::from_str::<SearchOptions>(json).unwrap();
        let default = SearchOptions::default().generate.system;
        assert!(default.is_some());
        assert_eq!(read("{}").generate.system, default);
        let partial = read(r#"{"generate": {"max_new_tokens": 8}}"#);
        assert_eq!(partial.generate.system, default);
        assert_eq!(partial.generate.max_new_tokens, 8);
        assert_eq!(
            read(r#"{"generate": {"system": null}}"#).generate.system,
            None
        );
        assert_eq!(
            read(r#"{"generate": {"system": "Be brief."}}"#)
                .generate
                .system
                .as_deref(),
            Some("Be brief.")
        );
        let unknown = serde_json::from_str::<SearchOptions>(r#"{"generate": {"temp": 1}}"#);
        assert!(unknown.unwrap_err().to_string().contains("temp"));
        let typed = r#"{"generate": {"sampling": {"top_p": "high"}}}"#;
        let wrong = serde_json::from_str::<SearchOptions>(typed).unwrap_err();
        assert!(wrong.to_string().contains("`sampling.top_p`"), "{wrong}");
    }

    #[test]
    fn options_are_validated_by_field() {
        let ok = SearchOptions::default();
        assert!(ok.validate().is_ok());
        let err = |o: SearchOptions| o.validate().unwrap_err().to_string();
        assert!(err(SearchOptions { n: 0, ..ok.clone() }).contains("n = 0"));
        assert!(err(SearchOptions {
            method: SearchMethod::Dvts,
            n: 6,
            beam_width: 4,
            ..ok.clone()
        })
        .contains("multiple of beam_width"));
        // Best-of-N ignores the beam width.
        assert!(SearchOptions {
            n: 6,
            beam_width: 4,
            ..ok.clone()
        }
        .validate()
        .is_ok());
        assert!(err(SearchOptions {
            token_budget: Some(0),
            ..ok
        })
        .contains("token_budget"));
    }

    #[test]
    fn options_read_from_json_with_defaults_and_refuse_unknown_fields() {
        let o: SearchOptions =
            serde_json::from_str(r#"{"method": "dvts", "n": 8, "beam_width": 2}"#).unwrap();
        assert_eq!(o.method, SearchMethod::Dvts);
        assert_eq!(o.max_steps, 40);
        assert!(serde_json::from_str::<SearchOptions>(r#"{"beams": 2}"#).is_err());
    }

    #[test]
    fn fork_seeds_differ_and_repeat() {
        let seeds: Vec<u64> = (0..64).map(|i| fork_seed(7, i)).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), seeds.len());
        assert_eq!(fork_seed(7, 3), seeds[3]);
        assert_ne!(fork_seed(8, 3), seeds[3]);
    }
}
