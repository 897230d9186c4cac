//! A generative verifier's critique (the `generative` family): the model
//! writes one about the steps (the family's prompt and stop rule, under a
//! token budget), and a critique, written or given, is read teacher-forced
//! for each verdict's probability ([`super::family::generative`]). The
//! `Scorer` methods that give a [`super::TraceScore`] from it are in `score.rs`.

use serde::{Deserialize, Serialize};

use super::chat::ChatFormat;
use super::family::check_steps;
use super::family::generative::{self, StepVerdict};
use super::generate::{GenerateOptions, Generation, StopReason};
use super::head::HeadOutput;
use super::scorer::Scorer;
use super::template::Encoded;
use crate::engine::Sampling;
use crate::{Error, Result};

/// Most tokens a critique may have by default: ThinkPRM's verification
/// length (the model's context or the scorer's `max_tokens` stop it sooner).
pub const CRITIQUE_TOKENS: usize = 8192;

/// How a generative verifier writes its critique.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CritiqueOptions {
    /// Greedy by default, so a trace's scores do not depend on a seed.
    pub sampling: Sampling,
    /// The budget: most tokens to write (default [`CRITIQUE_TOKENS`]).
    pub max_new_tokens: usize,
}

impl Default for CritiqueOptions {
    fn default() -> Self {
        CritiqueOptions {
            sampling: Sampling::greedy(),
            max_new_tokens: CRITIQUE_TOKENS,
        }
    }
}

/// What a generative verifier wrote about a solution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Critique {
    /// The text after the prompt's "Let's verify step by step:" (a stop
    /// string is cut from it).
    pub text: String,
    /// Per step, the verdict the critique boxed; `None` for the steps after
    /// its last verdict (it stopped before them), which are not scored.
    pub verdicts: Vec<Option<StepVerdict>>,
    /// Why writing stopped; `None` for a critique that was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

/// A critique read for its verdicts: the head's output at them, the
/// sequence it ran on, and how many tokens writing it took (0 when given).
pub(super) struct Reading {
    pub out: HeadOutput,
    pub enc: Encoded,
    pub critique: Critique,
    pub written_tokens: usize,
}

impl Scorer {
    /// Writes a critique of `steps` under `options`, then reads it
    /// ([`Scorer::read_critique`]).
    pub(super) async fn write_critique(
        &self,
        problem: &str,
        steps: &[&str],
        options: &CritiqueOptions,
    ) -> Result<Reading> {
        let prompt = self.critique_prompt(problem, steps)?;
        let generate = GenerateOptions {
            sampling: options.sampling.clone(),
            max_new_tokens: options.max_new_tokens,
            stop: generative::stops(steps.len()),
            stop_at_step: false,
            // The prompt is already the chat turn and the verifier's lead.
            chat: false,
            system: None,
        };
        let mut writing = Generation::new_async(self, &prompt, &generate).await?;
        while let Some(token) = writing.next_async().await {
            token?;
        }
        let stop = writing.stop_reason().cloned();
        let mut reading = self
            .read_critique(problem, steps, writing.text(), stop.as_ref())
            .await?;
        reading.written_tokens = writing.prompt_tokens() + writing.tokens().len();
        reading.critique.stop_reason = stop;
        Ok(reading)
    }

    /// The text a generative verifier writes its critique after, for
    /// `steps` (the chat format's user turn, its assistant header and
    /// "Let's verify step by step:"): to have a critique written elsewhere
    /// (vLLM, a larger model) and read it with [`Scorer::score_critique`].
    pub fn critique_prompt(&self, problem: &str, steps: &[&str]) -> Result<String> {
        let chat = self.critique_chat(steps)?;
        Ok(generative::prompt(chat, problem, steps)?.0)
    }

    /// The chat format a critique's prompt is laid out in, after the checks
    /// every scoring path makes of the steps.
    fn critique_chat(&self, steps: &[&str]) -> Result<&ChatFormat> {
        let family = self.family();
        if !family.writes_critique() {
            return Err(Error::InvalidArgument(format!(
                "critiques are written and read by a generative verifier (family generative); \
                 this scorer's family is {family}"
            )));
        }
        check_steps(steps)?;
        self.protocol()
            .chat
            .as_ref()
            .ok_or_else(|| Error::Internal("a generative scorer without a chat format".into()))
    }

    /// Reads `critique` teacher-forced after the prompt for `steps`: the
    /// head's P(correct) at each verdict. `stop` (why writing stopped) is
    /// named in a parse error.
    pub(super) async fn read_critique(
        &self,
        problem: &str,
        steps: &[&str],
        critique: &str,
        stop: Option<&StopReason>,
    ) -> Result<Reading> {
        self.critique_chat(steps)?;
        let (enc, verdicts) = generative::encode_critique(
            self.protocol(),
            self.tokenizer(),
            problem,
            steps,
            critique,
        )
        .map_err(|e| match (e, stop) {
            (Error::InvalidArgument(m), Some(stop)) => Error::InvalidArgument(format!(
                "{m} (writing stopped: {}, after {} bytes)",
                stop.name(),
                critique.len()
            )),
            (e, _) => e,
        })?;
        self.check_vocabulary(&enc)?;
        if enc.tokens.len() > self.max_tokens() {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit: self.max_tokens(),
                truncating: false,
                by_length: None,
            });
        }
        let out = self
            .run(&enc.tokens, None, Some(&enc))
            .await?
            .ok_or_else(|| Error::Internal("the head returned no output".into()))?;
        Ok(Reading {
            out,
            enc,
            critique: Critique {
                text: critique.to_string(),
                verdicts,
                stop_reason: None,
            },
            written_tokens: 0,
        })
    }
}
