//! The checks every reader applies to what a trace carries: step scores,
//! labels, step texts. Written once so the CLI, the crate's readers, the wasm
//! bindings and the Python bindings accept and refuse the same things.
//!
//! Scores. A step score is a probability that the step is right: a finite
//! number in [0, 1]. Anything else (a logit, -5, 7.5, 1e308) is refused where
//! it is read, because aggregation and selection would otherwise rank it as
//! if it were a probability (a product of two negative scores is a large
//! positive one).
//!
//! Unscored steps. A step without a score (`score` absent or `null`) is
//! unscored. The one documented shape of a partly scored trace is a scored
//! prefix followed by unscored steps: what `stepscore score --truncation drop-steps`
//! writes when a trace runs past the token limit (it also records the count
//! in `metadata.stepscore.truncated_steps`). [`Unscored`] says what a
//! consumer does with such a trace; an unscored step *before* a scored one is
//! refused under every policy, since no aggregate of it means anything.
//!
//! Blank steps. A step whose text is empty, whitespace or invisible
//! characters only (zero-width, bidi controls, variation selectors, ...) is
//! blank ([`is_blank`]): segmenters drop such pieces, and
//! the scorer refuses them, the same way for all three kinds.

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;

use crate::trace::Trace;
use crate::Error;

/// A problem with one field of a record: the field (`scores[2]`,
/// `steps[1].score`, `label`) when one is at fault, and what is wrong. The
/// readers add where the record sits (source, line, array item, id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: Option<String>,
    pub message: String,
}

impl FieldError {
    pub fn at(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    pub fn whole(message: impl Into<String>) -> Self {
        FieldError {
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "field `{field}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Why `score` is not a usable step score, or `None` when it is one.
pub(crate) fn score_problem(score: f64) -> Option<String> {
    if !score.is_finite() {
        Some(format!(
            "score {score} is not a finite number (a step score is a probability in [0, 1])"
        ))
    } else if !(0.0..=1.0).contains(&score) {
        Some(format!(
            "score {score} is outside [0, 1] (a step score is a probability; \
             convert logits with a sigmoid first)"
        ))
    } else {
        None
    }
}

/// `score` when it is a usable step score, else the problem at `field`.
pub fn check_score(score: f64, field: &str) -> Result<f64, FieldError> {
    match score_problem(score) {
        None => Ok(score),
        Some(m) => Err(FieldError::at(field, m)),
    }
}

/// Every step score of `trace` in [0, 1] (unscored steps pass); the first
/// bad one named `steps[i].score`. For traces built in code: the readers
/// check scores as they parse them.
pub(crate) fn check_trace_scores(trace: &Trace) -> Result<(), FieldError> {
    for (i, step) in trace.steps.iter().enumerate() {
        if let Some(s) = step.score {
            check_score(s, &format!("steps[{i}].score"))?;
        }
    }
    Ok(())
}

/// Whitespace and the characters Unicode says render as nothing unless a
/// font has a reason to show them (`Default_Ignorable_Code_Point`: zero-width
/// spaces and joiners, LRM/RLM and the other bidi controls, invisible
/// operators such as U+2061, variation selectors, tag characters, the Hangul
/// fillers U+3164/U+FFA0, soft hyphen), plus the braille blank U+2800, which
/// is a visible-width blank. A step made of these says nothing, exactly like
/// an empty one. Unicode's own property rather than a list of our own: a list
/// always misses the next invisible character.
static INVISIBLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[\p{White_Space}\p{Default_Ignorable_Code_Point}\x{2800}]*$")
        .expect("valid regex")
});

/// Whether a step text is empty, or whitespace / invisible characters only.
pub fn is_blank(text: &str) -> bool {
    INVISIBLE.is_match(text)
}

/// The index of the first blank step text, if any.
pub(crate) fn first_blank<'a>(steps: impl IntoIterator<Item = &'a str>) -> Option<usize> {
    steps.into_iter().position(is_blank)
}

/// What a consumer of scores does with a trace whose last steps are unscored
/// (the truncation shape, see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unscored {
    /// Use the scored prefix and report how many steps were left out.
    #[default]
    Prefix,
    /// Refuse the trace: every step must be scored.
    Reject,
}

impl Unscored {
    pub fn name(self) -> &'static str {
        match self {
            Unscored::Prefix => "prefix",
            Unscored::Reject => "reject",
        }
    }
}

impl fmt::Display for Unscored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Unscored {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "prefix" => Ok(Unscored::Prefix),
            "reject" => Ok(Unscored::Reject),
            _ => Err(Error::InvalidArgument(format!(
                "unknown unscored-step policy `{s}` (expected prefix or reject)"
            ))),
        }
    }
}

/// A trace's usable scores: the scored prefix, and how many steps after it
/// are unscored; or a solution's one score on its last step (an outcome
/// reward model's), with `first` the index of that step.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub scores: Vec<f64>,
    /// The step `scores[0]` belongs to: 0 for a scored prefix, the last
    /// step for a solution score.
    pub first: usize,
    pub unscored: usize,
}

impl Scored {
    /// Whether every step was scored (a solution score counts as complete).
    pub fn complete(&self) -> bool {
        self.unscored == 0
    }
}

/// The scores of `trace` laid out the documented way, under `policy`: a
/// scored prefix, or the last step's score alone (a whole solution's, as
/// the `outcome` family gives it). Refused: a trace without steps, a step
/// score outside [0, 1], no scored step at all, any other unscored step
/// followed by a scored one, and (under [`Unscored::Reject`]) any unscored
/// step after the scored ones.
pub fn scored_steps(trace: &Trace, policy: Unscored) -> Result<Scored, FieldError> {
    check_trace_scores(trace)?;
    if trace.steps.is_empty() {
        return Err(FieldError::at("steps", "the trace has no steps"));
    }
    let n = trace.steps.len();
    if let [earlier @ .., last] = trace.steps.as_slice() {
        if let (Some(s), false) = (last.score, earlier.is_empty()) {
            if earlier.iter().all(|st| st.score.is_none()) {
                return Ok(Scored {
                    scores: vec![s],
                    first: n - 1,
                    unscored: 0,
                });
            }
        }
    }
    let prefix = trace.steps.iter().take_while(|s| s.score.is_some()).count();
    if let Some(later) = trace.steps[prefix..].iter().position(|s| s.score.is_some()) {
        return Err(FieldError::at(
            format!("steps[{prefix}].score"),
            format!(
                "step {prefix} has no score but step {} has one; only the last steps may be \
                 unscored (as `score --truncation drop-steps` leaves them), or all but the last \
                 (a whole solution's score, as the outcome family gives it)",
                prefix + later
            ),
        ));
    }
    if prefix == 0 {
        return Err(FieldError::at(
            "steps[0].score",
            "no step has a score (score the traces first: `stepscore score`)",
        ));
    }
    let unscored = trace.steps.len() - prefix;
    if unscored > 0 && policy == Unscored::Reject {
        return Err(FieldError::at(
            format!("steps[{prefix}].score"),
            if unscored == 1 {
                format!(
                    "step {prefix} of {} has no score (left unscored by `score --truncation drop-steps`?)",
                    trace.steps.len()
                )
            } else {
                format!(
                    "steps {prefix}..{} of {} have no score (left unscored by `score --truncation drop-steps`?)",
                    trace.steps.len() - 1,
                    trace.steps.len()
                )
            },
        ));
    }
    Ok(Scored {
        scores: trace.steps[..prefix]
            .iter()
            .filter_map(|s| s.score)
            .collect(),
        first: 0,
        unscored,
    })
}

/// The trace's ProcessBench label (first wrong step, or -1), or the problem
/// when no step carries one.
pub fn first_error_label(trace: &Trace) -> Result<i64, FieldError> {
    trace.first_error_label().ok_or_else(|| {
        FieldError::at(
            "label",
            "no step carries a label (ProcessBench rows need `label`, TRL rows `labels`, \
             native steps `label`)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Step;

    fn trace(scores: &[Option<f64>]) -> Trace {
        Trace {
            problem: "p".into(),
            steps: scores
                .iter()
                .map(|&score| Step {
                    text: "s".into(),
                    score,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn scores_are_probabilities() {
        for ok in [0.0, 0.5, 1.0] {
            assert_eq!(check_score(ok, "s"), Ok(ok));
        }
        for bad in [-0.1, 1.0000001, -5.0, 7.5, 1e308, f64::NAN, f64::INFINITY] {
            let e = check_score(bad, "scores[1]").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("scores[1]"), "{bad}");
        }
    }

    #[test]
    fn blank_means_nothing_visible() {
        for blank in [
            "",
            " ",
            "\t\n ",
            "\u{200B}",
            "\u{FEFF}\u{200D} \u{2060}",
            "\u{3000}",
        ] {
            assert!(is_blank(blank), "{blank:?}");
        }
        // Invisible but not zero-width in the old list (issue 23, item 12).
        for blank in [
            "\u{200E}\u{200F}",                 // LRM, RLM
            "\u{202A}\u{202E}\u{2066}\u{2069}", // bidi embeddings and isolates
            "\u{2061}\u{2062}\u{2063}",         // invisible operators
            "\u{FE0F}\u{E0100}",                // variation selectors
            "\u{E0001}\u{E0041}\u{E007F}",      // tag characters
            "\u{3164}",                         // Hangul filler
            "\u{FFA0}\u{115F}\u{1160}",         // halfwidth and choseong/jungseong fillers
            "\u{034F}\u{061C}\u{2800}",         // grapheme joiner, ALM, braille blank
        ] {
            assert!(is_blank(blank), "{blank:?}");
        }
        for text in [
            "a",
            " x ",
            "\u{200B}1",
            "·",
            "\u{200E}x",
            "\u{FE0F}\u{2764}",
            "\u{0600}",
        ] {
            assert!(!is_blank(text), "{text:?}");
        }
        assert_eq!(first_blank(["a", "b", " \u{200B}"]), Some(2));
    }

    #[test]
    fn a_scored_prefix_or_a_solution_score_are_the_partial_shapes() {
        let full = trace(&[Some(0.9), Some(0.2)]);
        assert_eq!(
            scored_steps(&full, Unscored::Reject).unwrap(),
            Scored {
                scores: vec![0.9, 0.2],
                first: 0,
                unscored: 0
            }
        );
        // An outcome reward model's one score, on the last step.
        let solution = trace(&[None, None, Some(0.3)]);
        for policy in [Unscored::Prefix, Unscored::Reject] {
            let s = scored_steps(&solution, policy).unwrap();
            assert_eq!((s.scores.clone(), s.first, s.unscored), (vec![0.3], 2, 0));
            assert_eq!(s.first_error(0.5), Some(2));
            assert_eq!(s.first_error_label(0.2), -1);
        }
        let truncated = trace(&[Some(0.9), None, None]);
        let s = scored_steps(&truncated, Unscored::Prefix).unwrap();
        assert_eq!((s.scores, s.unscored), (vec![0.9], 2));
        let e = scored_steps(&truncated, Unscored::Reject).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("steps[1].score"));
        let hole = trace(&[Some(0.9), None, Some(0.5)]);
        for policy in [Unscored::Prefix, Unscored::Reject] {
            let e = scored_steps(&hole, policy).unwrap_err();
            assert!(e.message.contains("step 2 has one"), "{e}");
        }
        let none = trace(&[None, None]);
        assert_eq!(
            scored_steps(&none, Unscored::Prefix)
                .unwrap_err()
                .field
                .as_deref(),
            Some("steps[0].score")
        );
        let bad = trace(&[Some(0.5), Some(-5.0)]);
        assert_eq!(
            scored_steps(&bad, Unscored::Prefix)
                .unwrap_err()
                .field
                .as_deref(),
            Some("steps[1].score")
        );
        assert!(scored_steps(&trace(&[]), Unscored::Prefix).is_err());
    }

    #[test]
    fn policy_names_parse_back() {
        for p in [Unscored::Prefix, Unscored::Reject] {
            assert_eq!(p.name().parse::<Unscored>().unwrap(), p);
        }
        assert!("skip".parse::<Unscored>().is_err());
    }
}
