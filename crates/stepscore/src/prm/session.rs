//! Incremental scoring: score each step as it arrives, reusing the KV cache of
//! everything before it, so a trace being generated costs its new tokens, not
//! its whole prefix again; and N candidates for one problem that share the
//! prompt's prefix.
//!
//! Every append re-encodes the whole trace (cheap next to the forward pass)
//! and checks that the cached tokens are a prefix of the new encoding; only
//! the tokens past the cache run through the model. Where a family's layout
//! puts text after the last step marker (a chat turn's end), the cache is
//! kept only up to that marker, so the layout stays exact. If a tokenizer
//! ever merged across the boundary, the session notices the mismatch and
//! recomputes from the longest matching prefix: results never depend on the
//! cache.
//!
//! A session holds its scorer through any pointer (`Session<S>`): borrowed
//! (`Session<&Scorer>`, from [`Scorer::session`]) or shared (`Rc`/`Arc`), for
//! callers such as the JS bindings whose sessions cannot borrow. The
//! scorer's session constructors ([`Scorer::session`],
//! [`Scorer::score_candidates`]) live here, beside what they make, so the
//! scorer never imports its sessions.

use std::ops::Deref;

use super::engine::{block_on, keep_shared, BatchPart, EngineCache};
use super::head::{HeadOutput, StepConfidence};
use super::scorer::{Scorer, TokenLogprob};
use super::template::Encoded;
use crate::{Error, Result};

/// A trace being scored step by step, holding its scorer through `S`.
#[derive(Debug, Clone)]
pub struct Session<S> {
    scorer: S,
    problem: String,
    steps: Vec<String>,
    scores: Vec<f64>,
    confidence: Vec<StepConfidence>,
    /// Per step, its tokens' log-probs with byte spans in the step's text
    /// (empty when the head reads no token statistics).
    token_logprobs: Vec<Vec<TokenLogprob>>,
    /// Tokens whose keys and values the cache holds.
    cached: Vec<u32>,
    cache: EngineCache,
    /// Tokens run through the model so far, over the session's life.
    computed: usize,
}

/// An extension encoded and its cache trimmed, waiting for its forward pass.
struct Pending {
    new: Vec<String>,
    /// The whole trace's encoding with the new steps.
    enc: Encoded,
    /// Positions of `enc` the cache still holds.
    keep: usize,
    /// The layout of `enc.tokens[keep..]` the head reads.
    local: Encoded,
}

/// Candidates whose rows together stay under this run in one forward
/// pass, so N long candidates never make activations of N traces at once.
const BATCH_ROWS: usize = 2048;

impl Scorer {
    /// Starts scoring a trace step by step (see [`Session::append`]).
    ///
    /// ```
    /// use stepscore::prm::{Scorer, ScorerOptions};
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
    /// let scorer = Scorer::open(dir, &ScorerOptions::default())?;
    /// let mut session = scorer.session("What is 2 + 3?");
    /// let first = session.append("2 + 3 = 5.")?;
    /// session.append("The answer is 5.")?;
    /// assert_eq!(session.scores()[0], first);
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn session(&self, problem: &str) -> Session<&Scorer> {
        Session::new(self, problem)
    }

    /// Scores N candidate step lists for one problem, running the tokens
    /// they share (system prompt and problem) once, then all candidates'
    /// steps together (one forward pass on the CPU engine): the scores
    /// [`Scorer::score_steps`] gives each candidate alone, bit for bit.
    pub fn score_candidates(
        &self,
        problem: &str,
        candidates: &[Vec<&str>],
    ) -> Result<Vec<Vec<f64>>> {
        self.blocking_allowed()?;
        block_on(async {
            self.score_candidates_async(problem, candidates)
                .await
                .map_err(|e| e.error)
        })
    }

    /// [`Scorer::score_candidates`], awaited; a failure says which
    /// candidate it came from. Every candidate is encoded and checked
    /// before any runs.
    pub async fn score_candidates_async(
        &self,
        problem: &str,
        candidates: &[Vec<&str>],
    ) -> std::result::Result<Vec<Vec<f64>>, CandidateError> {
        let shared = |error| CandidateError { index: None, error };
        let mut base = self.session(problem);
        base.prime_async().await.map_err(shared)?;
        let mut sessions = Vec::with_capacity(candidates.len());
        let mut pending = Vec::with_capacity(candidates.len());
        for (index, steps) in candidates.iter().enumerate() {
            let mut s = base.clone();
            let p = s.prepare(steps).await.map_err(|error| CandidateError {
                index: Some(index),
                error,
            })?;
            sessions.push(s);
            pending.push(p);
        }
        let mut refs: Vec<&mut Session<&Scorer>> = sessions.iter_mut().collect();
        run_prepared(&mut refs, pending).await.map_err(shared)
    }
}

/// Runs each session's prepared extension (`None`: nothing to run) with
/// their new tokens as the rows of shared forward passes of at most
/// [`BATCH_ROWS`] rows, and commits each: entry i is session i's new
/// scores. On an error the sessions of the failed pass keep their
/// caches as they were before it. The sessions share one scorer.
async fn run_prepared<S: Deref<Target = Scorer>>(
    sessions: &mut [&mut Session<S>],
    mut pending: Vec<Option<Pending>>,
) -> Result<Vec<Vec<f64>>> {
    let mut scores = vec![Vec::new(); sessions.len()];
    let mut first = 0;
    while first < sessions.len() {
        // The next group: sessions while their rows stay under the cap
        // (always at least one).
        let mut rows = 0;
        let mut end = first;
        while end < sessions.len() {
            let r = pending[end]
                .as_ref()
                .map_or(0, |p| p.enc.tokens.len() - p.keep);
            if end > first && rows + r > BATCH_ROWS {
                break;
            }
            rows += r;
            end += 1;
        }
        let mut parts = Vec::new();
        let mut members = Vec::new();
        let mut scorer: Option<&Scorer> = None;
        for (i, (s, p)) in sessions[first..end]
            .iter_mut()
            .zip(&pending[first..end])
            .enumerate()
        {
            if let Some(p) = p {
                // Disjoint fields: the scorer read, the cache written.
                let Session {
                    scorer: sc, cache, ..
                } = &mut **s;
                scorer.get_or_insert(&**sc);
                parts.push(BatchPart {
                    tokens: &p.enc.tokens[p.keep..],
                    cache,
                    enc: &p.local,
                });
                members.push(first + i);
            }
        }
        let outs = match scorer {
            Some(scorer) => scorer.run_batch(&mut parts).await?,
            None => Vec::new(),
        };
        drop(parts);
        for (i, out) in members.into_iter().zip(outs) {
            let p = pending[i]
                .take()
                .ok_or_else(|| Error::Internal("a session's extension ran twice".into()))?;
            scores[i] = sessions[i].commit(p, out)?;
        }
        first = end;
    }
    Ok(scores)
}

/// Why [`Scorer::score_candidates_async`] failed: the error, and the
/// position of the candidate it came from (`None`: the shared prompt's
/// pass or a batch's forward pass).
#[derive(Debug)]
pub struct CandidateError {
    pub index: Option<usize>,
    pub error: Error,
}

impl std::fmt::Display for CandidateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "candidates[{i}]: {}", self.error),
            None => self.error.fmt(f),
        }
    }
}

impl std::error::Error for CandidateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<S: Deref<Target = Scorer>> Session<S> {
    /// Starts a session on `scorer`, any pointer to one (`&Scorer`, `Rc<Scorer>`, `Arc<Scorer>`).
    pub fn new(scorer: S, problem: &str) -> Self {
        let cache = scorer.new_cache();
        Session {
            scorer,
            problem: problem.to_string(),
            steps: Vec::new(),
            scores: Vec::new(),
            confidence: Vec::new(),
            token_logprobs: Vec::new(),
            cached: Vec::new(),
            cache,
            computed: 0,
        }
    }

    /// Runs the tokens that precede the first step (system prompt, problem)
    /// so candidates cloned from this session share them.
    pub fn prime(&mut self) -> Result<()> {
        self.scorer.blocking_allowed()?;
        block_on(self.prime_async())
    }

    /// [`Session::prime`], awaited.
    pub async fn prime_async(&mut self) -> Result<()> {
        if !self.steps.is_empty() || !self.cached.is_empty() {
            return Ok(());
        }
        // Any step text shows where the problem's tokens end.
        let probe = self.scorer.encode(&self.problem, &["0"])?;
        let end = probe
            .step_tokens
            .first()
            .map_or(0, |r| r.start)
            .min(probe.markers[0]);
        self.extend_cache(&probe.tokens[..end]).await
    }

    /// Appends a step and returns its score.
    pub fn append(&mut self, step: &str) -> Result<f64> {
        self.scorer.blocking_allowed()?;
        block_on(self.append_async(step))
    }

    /// [`Session::append`], awaited: the only way to append on WebGPU in
    /// a browser. A failed append leaves the session as it was before it.
    pub async fn append_async(&mut self, step: &str) -> Result<f64> {
        let scores = self.extend_async(&[step]).await?;
        scores
            .first()
            .copied()
            .ok_or_else(|| Error::InvalidArgument("the head returned no score".into()))
    }

    /// Appends several steps in one pass over their tokens and returns
    /// their scores: the scores appending them one by one gives, bit for
    /// bit, at the cost of one forward pass instead of one per step.
    pub fn extend(&mut self, steps: &[&str]) -> Result<Vec<f64>> {
        self.scorer.blocking_allowed()?;
        block_on(self.extend_async(steps))
    }

    /// [`Session::extend`], awaited. A failed call leaves the session as
    /// it was before it.
    pub async fn extend_async(&mut self, new: &[&str]) -> Result<Vec<f64>> {
        let Some(pending) = self.prepare(new).await? else {
            return Ok(Vec::new());
        };
        let out = self
            .scorer
            .run(
                &pending.enc.tokens[pending.keep..],
                Some(&mut self.cache),
                Some(&pending.local),
            )
            .await?
            .ok_or_else(|| Error::InvalidArgument("the head returned no output".into()))?;
        self.commit(pending, out)
    }

    /// Extends several sessions on one scorer, each by its own steps, with
    /// their new tokens run together (one forward pass on the CPU engine,
    /// as [`Scorer::score_candidates`] does): entry i is what
    /// `sessions[i].extend_async(&news[i])` gives, bit for bit. A session
    /// whose steps cannot be scored (too long, a bad step) gets its error
    /// in its entry and is left as it was; the others still run. The outer
    /// error is the forward pass's.
    pub async fn extend_together(
        sessions: &mut [&mut Session<S>],
        news: &[Vec<&str>],
    ) -> Result<Vec<Result<Vec<f64>>>> {
        if sessions.len() != news.len() {
            return Err(Error::InvalidArgument(format!(
                "{} step lists for {} sessions: one per session",
                news.len(),
                sessions.len()
            )));
        }
        let Some(first) = sessions.first() else {
            return Ok(Vec::new());
        };
        let scorer: &Scorer = &first.scorer;
        if sessions
            .iter()
            .any(|s| !std::ptr::eq::<Scorer>(&*s.scorer, scorer))
        {
            return Err(Error::InvalidArgument(
                "extend_together: every session must run on the same scorer".into(),
            ));
        }
        let mut out: Vec<Result<Vec<f64>>> = Vec::with_capacity(sessions.len());
        let mut pending = Vec::with_capacity(sessions.len());
        for (s, new) in sessions.iter_mut().zip(news) {
            match s.prepare(new).await {
                Ok(p) => {
                    out.push(Ok(Vec::new()));
                    pending.push(p);
                }
                Err(e) => {
                    out.push(Err(e));
                    pending.push(None);
                }
            }
        }
        let scores = run_prepared(sessions, pending).await?;
        for (o, s) in out.iter_mut().zip(scores) {
            if o.is_ok() {
                *o = Ok(s);
            }
        }
        Ok(out)
    }

    /// Encodes the session's steps plus `new` and trims the cache to what
    /// the new encoding can reuse: what is left to run is the tokens past
    /// `keep`, read by the head through `local`. `None` when `new` is empty.
    async fn prepare(&mut self, new: &[&str]) -> Result<Option<Pending>> {
        if new.is_empty() {
            return Ok(None);
        }
        let family = self.scorer.family();
        if family.writes_critique() {
            return Err(Error::InvalidArgument(format!(
                "the {family} family scores the steps from one critique of the whole solution: \
                 steps cannot be scored as they arrive (sessions, streams, search); score the \
                 finished solution instead"
            )));
        }
        if !family.scores_each_step() {
            return Err(Error::InvalidArgument(format!(
                "the {family} family scores a whole solution once, on its last step: steps cannot \
                 be scored as they arrive (sessions, streams, search); score the finished \
                 solution instead"
            )));
        }
        let mut steps: Vec<&str> = self.steps.iter().map(String::as_str).collect();
        let k0 = steps.len();
        steps.extend_from_slice(new);
        let enc = self.scorer.encode(&self.problem, &steps)?;
        let limit = self.scorer.max_tokens();
        if enc.tokens.len() > limit {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit,
                truncating: false,
                by_length: None,
            });
        }
        let first_needed = enc.first_needed(k0);
        // Reuse the cache as far as it agrees with the new encoding and stays
        // before every position the new steps' head reads.
        // (A cache on a device that was since recreated holds nothing.)
        let valid = self.scorer.cache_ready(&mut self.cache).await?;
        let keep = keep_shared(
            &mut self.cache,
            &mut self.cached,
            &enc.tokens,
            first_needed,
            valid,
        );
        let local = enc.tail(k0, keep);
        Ok(Some(Pending {
            new: new.iter().map(|s| s.to_string()).collect(),
            enc,
            keep,
            local,
        }))
    }

    /// Records the head's output for a prepared extension whose tokens
    /// the cache now holds.
    fn commit(&mut self, pending: Pending, out: HeadOutput) -> Result<Vec<f64>> {
        let Pending {
            new,
            enc,
            keep,
            local,
        } = pending;
        let scores: Vec<f64> = out.scores.iter().flatten().copied().collect();
        if scores.len() != new.len() {
            return Err(Error::Internal(format!(
                "the head returned {} scores for {} steps",
                scores.len(),
                new.len()
            )));
        }
        self.computed += enc.tokens.len() - keep;
        self.cached.extend_from_slice(&enc.tokens[keep..]);
        // Keep the cache only through the last step's marker and tokens:
        // what follows (a turn's end) changes when the next step arrives.
        let last = enc.markers.len() - 1;
        let stable = (enc.markers[last] + 1).max(enc.step_tokens[last].end);
        self.cache.truncate(stable);
        self.cached.truncate(stable);
        self.steps.extend(new);
        self.scores.extend_from_slice(&scores);
        if let Some(c) = out.confidence {
            self.confidence.extend(c);
        }
        if let Some(lps) = out.token_logprobs.as_ref() {
            for (lp, spans) in lps.iter().zip(&local.step_spans) {
                self.token_logprobs
                    .push(TokenLogprob::with_spans(lp, spans));
            }
        }
        Ok(scores)
    }

    async fn extend_cache(&mut self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Ok(());
        }
        let valid = self.scorer.cache_ready(&mut self.cache).await?;
        if valid < self.cached.len() {
            // The device was recreated: the cache holds nothing now.
            self.cache.truncate(0);
            self.cached.clear();
        }
        self.scorer.run(tokens, Some(&mut self.cache), None).await?;
        self.computed += tokens.len();
        self.cached.extend_from_slice(tokens);
        Ok(())
    }

    /// The scorer this session runs on.
    pub fn scorer(&self) -> &Scorer {
        &self.scorer
    }

    /// Scores of the steps appended so far.
    pub fn scores(&self) -> &[f64] {
        &self.scores
    }

    /// Confidence-family statistics of the steps so far (empty for other families).
    pub fn confidence(&self) -> &[StepConfidence] {
        &self.confidence
    }

    /// Per step so far, its tokens' log-probs with byte spans in the step's
    /// text, as [`TraceScore::token_logprobs`](super::scorer::TraceScore)
    /// gives them (empty when the head reads no token statistics).
    pub fn token_logprobs(&self) -> &[Vec<TokenLogprob>] {
        &self.token_logprobs
    }

    /// The steps appended so far.
    pub fn steps(&self) -> &[String] {
        &self.steps
    }

    /// Tokens the model has processed over this session's life (cache hits excluded).
    pub fn computed_tokens(&self) -> usize {
        self.computed
    }

    /// Tokens currently held in the KV cache.
    pub fn cached_tokens(&self) -> usize {
        self.cached.len()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::rc::Rc;

    use super::*;
    use crate::prm::ScorerOptions;

    /// A session owning its scorer through `Rc` scores exactly like the
    /// borrowing one, and both match the fixture's independent reference.
    #[test]
    fn owned_session_matches_borrowed_session_and_reference() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/prm/skywork-prm-tiny");
        let reference: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("reference.json")).unwrap()).unwrap();
        let case = &reference["cases"][0];
        let problem = case["problem"].as_str().unwrap();
        let steps: Vec<&str> = case["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        let want: Vec<f64> = case["step_scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();

        let scorer = Rc::new(Scorer::open(&dir, &ScorerOptions::default()).unwrap());
        let mut owned = Session::new(Rc::clone(&scorer), problem);
        let mut borrowed = scorer.session(problem);
        for (i, step) in steps.iter().enumerate() {
            let a = owned.append(step).unwrap();
            let b = borrowed.append(step).unwrap();
            assert_eq!(a.to_bits(), b.to_bits(), "step {i}");
            assert!(
                (a - want[i]).abs() <= 1e-4,
                "step {i}: {a} vs reference {}",
                want[i]
            );
        }
        assert_eq!(owned.computed_tokens(), borrowed.computed_tokens());
        // The session keeps the scorer alive on its own.
        drop(borrowed);
        drop(scorer);
        assert_eq!(owned.scores().len(), steps.len());
        assert!(owned.append("One more step.").unwrap().is_finite());
    }
}
