//! The PRM families stepscore speaks, and how a checkpoint's family is told
//! from its config and tensors.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A PRM protocol: how the prompt is laid out, where each step's score is
/// read, and which head turns a hidden state into that score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Family {
    /// Qwen2.5-Math-PRM (`Qwen2ForProcessRewardModel`): chat prompt, steps
    /// each followed by `<extra_0>`, head `score.0` Linear(h,h) -> ReLU ->
    /// `score.2` Linear(h,2), softmax, probability of class 1.
    ScoreHead,
    /// Skywork-o1-Open-PRM: bos + problem + "\n", then each step + "\n";
    /// `v_head.summary` Linear(h,1) -> sigmoid at each step's "\n".
    ValueHead,
    /// Math-Shepherd: question + " " + steps each ending " ки"; softmax over
    /// the "+"/"-" logits at each `ки`, probability of "+".
    MathShepherd,
    /// RLHFlow PRMs: each step a user turn answered "+" by the assistant;
    /// softmax over the "+"/"-" logits just before each "+".
    Rlhflow,
    /// Training-free: the causal LM's own confidence in each step's tokens
    /// (mean/min log-probability and entropy); the step score is the
    /// geometric-mean token probability, exp(mean log-prob).
    Confidence,
}

impl Family {
    pub const ALL: [Family; 5] = [
        Family::ScoreHead,
        Family::ValueHead,
        Family::MathShepherd,
        Family::Rlhflow,
        Family::Confidence,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Family::ScoreHead => "score-head",
            Family::ValueHead => "value-head",
            Family::MathShepherd => "math-shepherd",
            Family::Rlhflow => "rlhflow",
            Family::Confidence => "confidence",
        }
    }

    /// Whether scoring needs the vocabulary projection (and which part).
    pub fn needs_lm_head(&self) -> bool {
        matches!(
            self,
            Family::MathShepherd | Family::Rlhflow | Family::Confidence
        )
    }

    /// Tells the family from what a checkpoint carries: its config's
    /// `architectures`, its tensor names, and its vocabulary.
    pub fn detect(
        architectures: &[String],
        has_tensor: impl Fn(&str) -> bool,
        has_token: impl Fn(&str) -> bool,
    ) -> Family {
        let arch = |needle: &str| architectures.iter().any(|a| a.contains(needle));
        if arch("ForProcessRewardModel") || has_tensor("score.2.weight") {
            Family::ScoreHead
        } else if has_tensor("v_head.summary.weight")
            || has_tensor("v_head.summary.0.weight")
            || arch("PrmModel")
        {
            Family::ValueHead
        } else if has_token("ки") || has_token("▁ки") {
            Family::MathShepherd
        } else {
            // RLHFlow checkpoints are plain Llama causal LMs: nothing in the
            // files says so, it must be chosen explicitly.
            Family::Confidence
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl TryFrom<String> for Family {
    type Error = String;

    /// serde reads it by name; the message names the bad value, serde the option.
    fn try_from(s: String) -> std::result::Result<Family, String> {
        s.parse().map_err(|e: Error| e.detail())
    }
}

impl FromStr for Family {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "score-head" | "qwen-prm" | "qwen2.5-math-prm" => Ok(Family::ScoreHead),
            "value-head" | "skywork" => Ok(Family::ValueHead),
            "math-shepherd" | "shepherd" => Ok(Family::MathShepherd),
            "rlhflow" => Ok(Family::Rlhflow),
            "confidence" => Ok(Family::Confidence),
            _ => Err(Error::InvalidArgument(format!(
                "unknown PRM family `{s}` (expected score-head, value-head, math-shepherd, rlhflow or confidence)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_follows_the_checkpoint() {
        let none = |_: &str| false;
        let qwen = vec!["Qwen2ForProcessRewardModel".to_string()];
        assert_eq!(Family::detect(&qwen, none, none), Family::ScoreHead);
        let plain = vec!["Qwen2ForCausalLM".to_string()];
        assert_eq!(
            Family::detect(&plain, |t| t == "v_head.summary.weight", none),
            Family::ValueHead
        );
        let mistral = vec!["MistralForCausalLM".to_string()];
        assert_eq!(
            Family::detect(&mistral, none, |t| t == "ки"),
            Family::MathShepherd
        );
        assert_eq!(Family::detect(&mistral, none, none), Family::Confidence);
    }

    #[test]
    fn names_parse_back() {
        for f in Family::ALL {
            assert_eq!(f.name().parse::<Family>().unwrap(), f);
        }
        assert!("orm".parse::<Family>().is_err());
    }
}
