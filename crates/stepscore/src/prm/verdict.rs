//! The instruct model's own verdict on a whole solution: a second signal
//! beside the step scores (docs/TRAINING.md, "Signals for plan errors":
//! measured, it adds most on solutions cut short, ranks finished ones no
//! better than the step scores, and makes a solution flag whose threshold
//! transfers better than theirs).
//!
//! The model reads the problem and the steps as a student's solution in a
//! fresh user turn and is asked whether the last step is correct; the
//! verdict is P(Yes) / (P(Yes) + P(No)) over its first answer token, "Yes"
//! and "yes" against "No" and "no". Asked after the scoring layout instead
//! (the model's own continuation, which would reuse the scoring pass's KV
//! cache) the same question measured inverted, so this is a pass of its
//! own, over about as many tokens as the trace.

use super::chat::Message;
use super::scorer::Scorer;
use crate::aggregate::first_error;
use crate::{Error, Result};

const SYSTEM: &str =
    "You are a careful math teacher. You check students' solutions one step at a time.";

/// The prompt text of the verdict pass for `steps` (rendered with the
/// model's chat template, ending with the assistant's header), or `None`
/// when the model has no chat template.
pub(crate) fn verdict_prompt(
    scorer: &Scorer,
    problem: &str,
    steps: &[&str],
) -> Result<Option<String>> {
    let Some(chat) = scorer.protocol().chat.as_ref() else {
        return Ok(None);
    };
    let mut user = format!("Problem:\n{problem}\n\nThe student's solution so far:\n");
    for (k, step) in steps.iter().enumerate() {
        user.push_str(&format!("\nStep {}:\n{}\n", k + 1, step.trim()));
    }
    user.push_str(&format!(
        "\nIs Step {} correct, both its reasoning and its arithmetic, given the problem and the \
         steps before it? Answer with Yes or No.",
        steps.len()
    ));
    let messages = [
        Message {
            role: "system",
            content: SYSTEM,
        },
        Message {
            role: "user",
            content: &user,
        },
    ];
    chat.render(&messages, true).map(Some)
}

/// One score per solution from its step scores and the verdict: the sum of
/// the log-odds of its lowest step score and of P(Yes), each probability
/// kept within [1e-9, 1 - 1e-9]. The two signals err on different solutions
/// (docs/TRAINING.md); compare with the head's shipped
/// [`Scorer::solution_threshold`].
pub fn solution_score(lowest_step: f64, p_yes: f64) -> f64 {
    let logit = |p: f64| {
        let p = p.clamp(1e-9, 1.0 - 1e-9);
        (p / (1.0 - p)).ln()
    };
    logit(lowest_step) + logit(p_yes)
}

/// The step to mark as the first error when the verdict is known: the first
/// step scoring below the step `threshold` ([`first_error`]); when no step
/// does but the solution score is below `solution_threshold`, the step the
/// step scores doubt most (the lowest, the earliest of equal ones), since
/// the solution is judged wrong somewhere. On model-written solutions with
/// step labels this is where most of the verdict's gain in ProcessBench F1
/// comes from, and nearly all of it on one-step solutions (docs/TRAINING.md).
pub fn first_error_with_verdict(
    scores: &[f64],
    threshold: f64,
    solution_score: f64,
    solution_threshold: f64,
) -> Option<usize> {
    first_error(scores, threshold).or_else(|| {
        if solution_score < solution_threshold {
            (0..scores.len()).reduce(|low, i| if scores[i] < scores[low] { i } else { low })
        } else {
            None
        }
    })
}

/// The verdict on a solution and what the pass cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// P(Yes) / (P(Yes) + P(No)) for "is the last step correct".
    pub p_yes: f64,
    /// Tokens of the verdict pass.
    pub tokens: usize,
}

impl Scorer {
    /// The model's verdict on the solution `steps` to `problem` (see the
    /// module docs). Needs a chat model opened with its LM head.
    pub fn verdict(&self, problem: &str, steps: &[&str]) -> Result<Verdict> {
        self.blocking_allowed()?;
        super::blocking::block_on(self.verdict_async(problem, steps))
    }

    /// [`Scorer::verdict`], awaited.
    pub async fn verdict_async(&self, problem: &str, steps: &[&str]) -> Result<Verdict> {
        if steps.is_empty() {
            return Err(Error::InvalidArgument(
                "a verdict needs at least one step".into(),
            ));
        }
        self.can_generate()?;
        let prompt = verdict_prompt(self, problem, steps)?.ok_or_else(|| {
            Error::InvalidArgument(
                "the verdict needs a chat model: this checkpoint has no chat template".into(),
            )
        })?;
        let tokens = self.tokenizer().encode(&prompt, true)?;
        if tokens.len() > self.max_tokens() {
            return Err(Error::TraceTooLong {
                tokens: tokens.len(),
                limit: self.max_tokens(),
                truncating: false,
                by_length: None,
            });
        }
        let yes = self.answer_tokens(&["Yes", "yes"])?;
        let no = self.answer_tokens(&["No", "no"])?;
        let mut cache = self.new_cache();
        self.cache_ready(&mut cache).await?;
        let logits = self.last_logits(&tokens, &mut cache).await?;
        Ok(Verdict {
            p_yes: yes_share(&logits, &yes, &no)?,
            tokens: tokens.len(),
        })
    }

    /// The one token each of `words` is; an error naming a word that is not
    /// a single token of this vocabulary.
    fn answer_tokens(&self, words: &[&str]) -> Result<Vec<u32>> {
        words
            .iter()
            .map(|w| match self.tokenizer().encode(w, false)?.as_slice() {
                [id] => Ok(*id),
                ids => Err(Error::InvalidArgument(format!(
                    "the verdict reads {w:?} as one token; this vocabulary writes it as {} tokens",
                    ids.len()
                ))),
            })
            .collect()
    }
}

/// P(any of `yes`) / (P(any of `yes`) + P(any of `no`)) under the softmax
/// of `logits`, in f64 (the normaliser cancels).
fn yes_share(logits: &[f32], yes: &[u32], no: &[u32]) -> Result<f64> {
    let at = |id: u32| {
        logits
            .get(id as usize)
            .map(|&z| f64::from(z))
            .ok_or_else(|| Error::Internal(format!("token {id} is outside the logits")))
    };
    let mut z = Vec::with_capacity(yes.len() + no.len());
    for &id in yes.iter().chain(no) {
        z.push(at(id)?);
    }
    let top = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = z.iter().map(|v| (v - top).exp()).collect();
    let p_yes: f64 = e[..yes.len()].iter().sum();
    let p_no: f64 = e[yes.len()..].iter().sum();
    Ok(p_yes / (p_yes + p_no))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_share_is_the_renormalised_softmax() {
        let mut logits = vec![0.0f32; 8];
        logits[1] = 2.0; // Yes
        logits[2] = 0.5; // yes
        logits[3] = 1.0; // No
        logits[4] = -1.0; // no
        logits[7] = 9.0; // another token: cancels out
        let got = yes_share(&logits, &[1, 2], &[3, 4]).unwrap();
        let (y, n) = (2f64.exp() + 0.5f64.exp(), 1f64.exp() + (-1f64).exp());
        assert!((got - y / (y + n)).abs() < 1e-12, "{got}");
        assert!(yes_share(&logits, &[9], &[3]).is_err());
    }

    #[test]
    fn the_verdict_marks_the_lowest_step_only_when_no_step_is_below_the_threshold() {
        let s = [0.94, 0.91, 0.93, 0.91];
        // No step below 0.6: a flagged solution gets its lowest step, the earlier of two.
        assert_eq!(first_error_with_verdict(&s, 0.6, 2.0, 4.2), Some(1));
        assert_eq!(first_error_with_verdict(&s, 0.6, 4.2, 4.2), None);
        // A step below the threshold is the first error whatever the verdict says.
        assert_eq!(
            first_error_with_verdict(&[0.9, 0.5, 0.1], 0.6, 9.0, 4.2),
            Some(1)
        );
        assert_eq!(
            first_error_with_verdict(&[0.9, 0.5, 0.1], 0.6, 0.0, 4.2),
            Some(1)
        );
        assert_eq!(first_error_with_verdict(&[], 0.6, 0.0, 4.2), None);
    }
}
