//! The `Scorer`: load a PRM checkpoint once, then score traces.
//!
//! A scorer holds one engine ([`Engine`], chosen at load or by
//! [`Scorer::set_backend_async`]); every forward pass goes through it, so
//! nothing here knows which engine runs.

use serde::{Deserialize, Serialize};

use super::backend::{Backend, BackendReport};
use super::blocking::ASYNC_ONLY;
use super::engine::{block_on, Engine, EngineCache};
use super::family::Family;
use super::family::{encode, Protocol};
use super::features::{self, FeatureCache, FeatureJob, FeatureOptions, StepFeatures};
use super::head::{Head, HeadOutput, TokensRead};
use super::template::Encoded;
use super::token_classes::OperatorRows;
use crate::engine::Tokenizer;
use crate::engine::{Hidden, Transformer};
use crate::{Error, Result};

use super::options::Truncation;

/// One token of a step: `start..end` bytes of the step's text, its
/// log-probability given everything before it, and the entropy (nats) of
/// the distribution that predicted it: a token far less likely than that
/// distribution's typical one (`-logprob` well above `entropy`) is one the
/// model was confident against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub start: usize,
    pub end: usize,
    pub logprob: f64,
    pub entropy: f64,
}

impl TokenLogprob {
    /// A step's tokens' `(log-prob, entropy)` paired with their spans
    /// (`Encoded.step_spans`).
    pub(crate) fn with_spans(stats: &[(f64, f64)], spans: &[(usize, usize)]) -> Vec<TokenLogprob> {
        stats
            .iter()
            .zip(spans)
            .map(|(&(logprob, entropy), &(start, end))| TokenLogprob {
                start,
                end,
                logprob,
                entropy,
            })
            .collect()
    }
}
/// A loaded PRM: decoder, tokenizer, prompt protocol and head.
#[derive(Debug)]
pub struct Scorer {
    pub(super) tokenizer: Tokenizer,
    pub(super) protocol: Protocol,
    /// The operator tokens' vocabulary rows, built at the first feature
    /// extraction with confidence statistics.
    pub(super) operators: std::sync::OnceLock<OperatorRows>,
    pub(super) max_tokens: usize,
    pub(super) truncation: Truncation,
    /// The engine, with the decoder's weights and the head it runs.
    pub(super) engine: Engine,
    /// False when the blocks after the head's layer were dropped at load
    /// (the model can then not generate).
    pub(super) all_layers: bool,
}
impl Scorer {
    pub fn family(&self) -> Family {
        self.protocol.family
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The decoder's weights on the host (the CPU engine's, and what a GPU
    /// engine uploads).
    pub fn model(&self) -> &Transformer {
        self.engine.model()
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The first-error threshold the model's head was shipped with (chosen
    /// on validation data with the head); `None` when it has none.
    pub fn threshold(&self) -> Option<f64> {
        self.engine.head().and_then(Head::threshold)
    }

    /// Which of a step's tokens the head's score reads through the LM's
    /// token statistics ([`TokensRead::None`] without a head).
    pub fn tokens_read(&self) -> TokensRead {
        self.engine
            .head()
            .map_or(TokensRead::None, Head::tokens_read)
    }

    /// The step threshold in force: `given` (a caller's explicit choice),
    /// else the head's shipped [`Scorer::threshold`], else 0.5 (ProcessBench's
    /// convention for an uncalibrated PRM). The one rule of every front end
    /// that flags a first error (`score`, `serve`), so a server and the CLI
    /// never flag the same steps differently.
    pub fn threshold_in_force(&self, given: Option<f64>) -> f64 {
        given
            .or(self.threshold())
            .unwrap_or(crate::aggregate::DEFAULT_THRESHOLD)
    }

    /// The solution threshold the model's head was shipped with, for use with
    /// its verdict (see [`crate::prm::verdict::solution_score`]).
    pub fn solution_threshold(&self) -> Option<f64> {
        self.engine.head().and_then(Head::solution_threshold)
    }

    /// Which engine this scorer runs on, and why.
    pub fn backend_report(&self) -> &BackendReport {
        self.engine.report()
    }

    /// Moves this scorer to `backend`, setting up the device and uploading
    /// the model when it is a GPU one: how a browser gets the WebGPU
    /// engine (natively, [`ScorerOptions::backend`] does the same at load).
    /// Sessions must be started after this.
    pub async fn set_backend_async(&mut self, backend: Backend) -> Result<()> {
        self.engine.set_backend_async(backend).await
    }

    /// Device buffers of the GPU engine (None on the CPU engine, or before
    /// a device exists): the leak tests' counter.
    #[cfg(feature = "gpu")]
    pub fn gpu_pool_stats(&self) -> Option<crate::engine::PoolStats> {
        self.engine.pool_stats()
    }

    /// Destroys the GPU device as a driver reset would (tests of recovery):
    /// the next call fails with [`Error::Gpu`], the one after recreates the
    /// device and re-uploads the model.
    /// Test support (feature `testing`).
    #[cfg(all(feature = "gpu", any(test, feature = "testing")))]
    pub fn simulate_device_loss(&self) {
        self.engine.destroy_device();
    }

    /// The head; an error for a backbone opened without one.
    pub(crate) fn head(&self) -> Result<&Head> {
        self.engine.head().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "this {} model was opened as a backbone for feature extraction, without a head: it cannot score",
                self.protocol.family
            ))
        })
    }

    /// Fails when results can only be awaited (the WebGPU engine in a
    /// browser): the blocking methods call this before starting any work.
    pub(super) fn blocking_allowed(&self) -> Result<()> {
        if self.engine.async_only() {
            return Err(Error::InvalidArgument(ASYNC_ONLY.into()));
        }
        Ok(())
    }

    /// The token ids and marker positions the scorer would run for a trace.
    pub fn encode(&self, problem: &str, steps: &[&str]) -> Result<Encoded> {
        let enc = encode(&self.protocol, &self.tokenizer, problem, steps)?;
        self.check_vocabulary(&enc)?;
        Ok(enc)
    }

    /// The tokenizer gave an id the model has no embedding for: the
    /// tokenizer and the model do not match (a model error), whatever the
    /// text was.
    pub(super) fn check_vocabulary(&self, enc: &Encoded) -> Result<()> {
        let vocab = self.model().config().vocab_size;
        if let Some((i, &t)) = enc
            .tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= vocab)
        {
            return Err(Error::model(
                "tokenizer",
                format!(
                    "token id {t} (position {i}) is out of range for the model's vocabulary of \
                     {vocab}: the tokenizer does not match the model's embeddings"
                ),
            ));
        }
        Ok(())
    }

    /// The hidden state at each step's marker.
    pub fn step_features(&self, problem: &str, steps: &[&str]) -> Result<StepFeatures> {
        self.step_features_with(problem, steps, &FeatureOptions::default())
    }

    /// The features `options` asks for: the hidden states of chosen layers
    /// at each step's marker, with or without the confidence statistics
    /// (`features.rs`), from the scoring path's own encode + forward.
    pub fn step_features_with(
        &self,
        problem: &str,
        steps: &[&str],
        options: &FeatureOptions,
    ) -> Result<StepFeatures> {
        let mut cache = self.feature_cache();
        self.step_features_cached(&mut cache, problem, steps, 0, options)
    }

    /// A cache for [`Scorer::step_features_cached`].
    pub fn feature_cache(&self) -> FeatureCache {
        FeatureCache::new(self.new_cache())
    }

    /// The features of `steps[from..]` (as [`Scorer::step_features_with`]
    /// gives them, bit for bit), running only the tokens `cache` does not
    /// already hold: traces that share a prefix (alternatives of one step
    /// after the same earlier steps) pay for that prefix once. Afterwards
    /// the cache holds this trace's tokens.
    pub fn step_features_cached(
        &self,
        cache: &mut FeatureCache,
        problem: &str,
        steps: &[&str],
        from: usize,
        options: &FeatureOptions,
    ) -> Result<StepFeatures> {
        let mut job = [FeatureJob {
            cache,
            problem,
            steps,
            from,
        }];
        self.step_features_batch(&mut job, options)?
            .pop()
            .unwrap_or_else(|| {
                Err(Error::Internal(
                    "a feature batch of one gave nothing".into(),
                ))
            })
    }

    /// [`Scorer::step_features_cached`] of several traces, each on its own
    /// cache, with their new tokens in one forward pass on the CPU engine
    /// (each weight matrix unpacked once for all of them): entry i is what
    /// `step_features_cached` gives job i alone, bit for bit. A job that
    /// cannot run (too long, a bad step) gets its error in its entry (its
    /// cache may be cut back to a prefix it shares, still consistent); the
    /// outer error is the forward pass's.
    pub fn step_features_batch(
        &self,
        jobs: &mut [FeatureJob<'_>],
        options: &FeatureOptions,
    ) -> Result<Vec<Result<StepFeatures>>> {
        let taps = features::forward_taps(self.model(), options)?;
        self.blocking_allowed()?;
        let operators = if options.confidence {
            if self.operators.get().is_none() {
                // Another thread may have set it meanwhile: the same table.
                let _ = self
                    .operators
                    .set(OperatorRows::load(self.model(), &self.tokenizer)?);
            }
            self.operators.get()
        } else {
            None
        };
        let mut prepared: Vec<Result<(Encoded, usize, usize)>> = Vec::with_capacity(jobs.len());
        for job in jobs.iter_mut() {
            prepared.push((|| {
                let (enc, truncated_steps) = self.encode_fitted(job.problem, job.steps)?;
                let from = job.from.min(enc.markers.len());
                let valid = block_on(self.cache_ready(&mut job.cache.cache))?;
                let keep = job.cache.reuse(&enc.tokens, enc.first_needed(from), valid);
                Ok((enc.tail(from, keep), from, truncated_steps))
            })());
        }
        let mut tokens = Vec::new();
        let mut caches = Vec::new();
        for (job, p) in jobs.iter_mut().zip(&prepared) {
            if let Ok((local, _, _)) = p {
                tokens.push(local.tokens.as_slice());
                caches.push(&mut job.cache.cache);
            }
        }
        let mut hidden =
            block_on(self.engine.forward_batch(&tokens, &mut caches, &taps))?.into_iter();
        drop(caches);
        let mut out = Vec::with_capacity(jobs.len());
        for (job, p) in jobs.iter_mut().zip(prepared) {
            out.push(p.and_then(|(local, from, truncated_steps)| {
                let h = hidden
                    .next()
                    .ok_or_else(|| Error::Internal("a feature batch lost a part".into()))?;
                job.cache.tokens.extend_from_slice(&local.tokens);
                features::collect(
                    self.model(),
                    operators,
                    &local,
                    &h,
                    from,
                    truncated_steps,
                    options,
                )
            }));
        }
        Ok(out)
    }

    /// Runs the decoder over `tokens` on this scorer's engine and returns
    /// the final-normed hidden states on the host: from position 0 without
    /// a cache, else after what `cache` holds (made by
    /// [`Scorer::new_cache`]), whose keys and values they extend. No
    /// template, no head: for benchmarks and tools that time or inspect the
    /// engine itself.
    ///
    /// ```
    /// use stepscore::prm::{Scorer, ScorerOptions};
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
    /// let scorer = Scorer::open(dir, &ScorerOptions::default())?;
    /// let tokens = scorer.encode("What is 2 + 3?", &["2 + 3 = 5."])?.tokens;
    /// let whole = scorer.forward(&tokens, None)?;
    /// let mut cache = scorer.new_cache();
    /// scorer.forward(&tokens[..4], Some(&mut cache))?;
    /// let rest = scorer.forward(&tokens[4..], Some(&mut cache))?;
    /// assert_eq!(rest.n_tokens, tokens.len() - 4);
    /// assert_eq!(cache.len(), tokens.len());
    /// assert_eq!(whole.n_tokens, tokens.len());
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn forward(&self, tokens: &[u32], cache: Option<&mut EngineCache>) -> Result<Hidden> {
        self.blocking_allowed()?;
        block_on(async {
            let cache = match cache {
                Some(c) => {
                    let held = c.len();
                    if self.cache_ready(c).await? < held {
                        return Err(Error::Gpu(
                            "the device was recreated since this cache was filled: start a new cache"
                                .into(),
                        ));
                    }
                    Some(c)
                }
                None => None,
            };
            let taps = self.engine.forward(tokens, cache, &[]).await?;
            Ok(taps.last)
        })
    }

    pub(super) fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    /// Whether this scorer's model can generate: it kept its LM head and
    /// every block (a value-head PRM drops both when its head needs neither;
    /// open the checkpoint with [`HeadSource::Backbone`] to generate).
    pub fn can_generate(&self) -> Result<()> {
        if !self.all_layers || self.model().weights().vocab_projection().is_none() {
            return Err(Error::InvalidArgument(
                "this model was opened without its LM head or its last blocks (its PRM head \
                 needs neither): open it as a backbone to generate"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Logits over the vocabulary at the last of `tokens`, run after `cache`.
    pub(super) async fn last_logits(
        &self,
        tokens: &[u32],
        cache: &mut EngineCache,
    ) -> Result<Vec<f32>> {
        self.engine.last_logits(tokens, cache).await
    }

    /// [`Scorer::last_logits`] of one token for each of several caches, in
    /// one pass on the CPU engine (see `Engine::last_logits_rows`).
    pub(super) async fn last_logits_rows(
        &self,
        tokens: &[u32],
        caches: &mut [&mut EngineCache],
    ) -> Result<Vec<Vec<f32>>> {
        self.engine.last_logits_rows(tokens, caches).await
    }

    /// An empty KV cache on this scorer's engine.
    pub fn new_cache(&self) -> EngineCache {
        self.engine.new_cache()
    }

    /// Makes `cache` usable on the engine's current state; how many
    /// positions it still holds (0 after a device was recreated).
    pub(super) async fn cache_ready(&self, cache: &mut EngineCache) -> Result<usize> {
        self.engine.cache_ready(cache).await
    }

    /// Runs `tokens` on the engine (after `cache`, when given) and, with
    /// `enc` (positions relative to `tokens`), this scorer's head on them.
    pub(super) async fn run(
        &self,
        tokens: &[u32],
        cache: Option<&mut EngineCache>,
        enc: Option<&Encoded>,
    ) -> Result<Option<HeadOutput>> {
        if enc.is_some() {
            self.head()?;
        }
        self.engine.run(tokens, cache, enc).await
    }

    /// [`Scorer::run`] of several sequences in one pass where the engine
    /// can (see [`Engine::run_batch`](super::engine::Engine::run_batch)).
    pub(super) async fn run_batch(
        &self,
        parts: &mut [super::engine::BatchPart<'_>],
    ) -> Result<Vec<HeadOutput>> {
        self.head()?;
        self.engine.run_batch(parts).await
    }

    /// [`Scorer::encode`] under the token limit: the encoding of the steps
    /// that fit (see [`Scorer::fit`]) and how many were dropped. Steps that
    /// cannot fit by their text's length alone are never tokenized
    /// ([`Scorer::fit_by_length`]): a 15 MiB step is refused at once, not
    /// after gigabytes of tokenizer state.
    pub(super) fn encode_fitted(&self, problem: &str, steps: &[&str]) -> Result<(Encoded, usize)> {
        let possible = self.fit_by_length(problem, steps)?;
        let mut enc = self.encode(problem, &steps[..possible])?;
        let dropped = self.fit(&mut enc)?;
        Ok((enc, dropped + (steps.len() - possible)))
    }

    /// How many leading steps can fit under the token limit, judged from
    /// byte lengths before anything is tokenized: the problem and steps
    /// `0..=i` hold `b` bytes and no token stands for more than
    /// [`Tokenizer::max_input_bytes_per_token`] of them, so step `i`'s
    /// marker sits at or after token `b.div_ceil(per) - 1`; when that is
    /// not below the limit, neither step `i` nor any later one fits (the
    /// rule of [`Scorer::fit`]). Without truncation, or when not even step
    /// 0 can fit, that is [`Error::TraceTooLong`] with the bound. All steps
    /// when the tokenizer gives no bound (the text is then tokenized whole,
    /// as before).
    fn fit_by_length(&self, problem: &str, steps: &[&str]) -> Result<usize> {
        let Some(per) = self.tokenizer.max_input_bytes_per_token() else {
            return Ok(steps.len());
        };
        let limit = self.max_tokens;
        let mut bytes = problem.len();
        for (i, s) in steps.iter().enumerate() {
            bytes = bytes.saturating_add(s.len());
            let at_least = bytes.div_ceil(per);
            if at_least <= limit {
                continue;
            }
            let truncating = self.truncation != Truncation::Error;
            if !truncating || i == 0 {
                return Err(Error::TraceTooLong {
                    tokens: at_least,
                    limit,
                    truncating,
                    by_length: Some(crate::LengthBound {
                        step: i,
                        bytes,
                        bytes_per_token: per,
                    }),
                });
            }
            return Ok(i);
        }
        Ok(steps.len())
    }

    /// Applies the token limit: an error, or the leading steps whose tokens
    /// all fit. Returns how many steps were dropped.
    fn fit(&self, enc: &mut Encoded) -> Result<usize> {
        let limit = self.max_tokens;
        if enc.tokens.len() <= limit {
            return Ok(0);
        }
        if self.truncation == Truncation::Error {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit,
                truncating: false,
                by_length: None,
            });
        }
        let keep = enc
            .markers
            .iter()
            .zip(&enc.step_tokens)
            .take_while(|(&m, r)| m < limit && r.end <= limit)
            .count();
        if keep == 0 {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit,
                truncating: true,
                by_length: None,
            });
        }
        let dropped = enc.markers.len() - keep;
        enc.markers.truncate(keep);
        enc.step_tokens.truncate(keep);
        enc.step_spans.truncate(keep);
        let end = enc.markers.iter().copied().max().unwrap_or(0).max(
            enc.step_tokens
                .last()
                .map_or(0, |r| r.end.saturating_sub(1)),
        );
        enc.tokens.truncate(end + 1);
        Ok(dropped)
    }
}
