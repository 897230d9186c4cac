//! The PRM families stepscore speaks, one file each, and the registry that
//! reads them: names, detection from a checkpoint, prompt layout and head.
//!
//! Adding a family: a file here with its [`Spec`], a variant of [`Family`],
//! and its line in [`Family::spec`] (docs/ARCHITECTURE.md walks through it).

mod confidence;
pub mod generative;
mod math_shepherd;
mod outcome;
mod rlhflow;
mod score_head;
mod value_head;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::chat::ChatFormat;
use super::head::{plus_minus_rows, Head, HeadInput, Kind, TensorLookup};
use super::template::Encoded;
use crate::engine::Tokenizer;
use crate::engine::{Matrix, Transformer};
use crate::{Error, Result};

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
    /// Outcome reward models (`*ForSequenceClassification`, e.g.
    /// Skywork-Reward-V2): the conversation in the checkpoint's chat format,
    /// `score` Linear(h,1) on the last token, sigmoid: one score for the
    /// whole solution, on its last step.
    Outcome,
    /// Generative verifiers (ThinkPRM): the model writes a critique that
    /// boxes a verdict per step; a step's score is P(correct) over the
    /// `correct`/`incorrect` tokens where its verdict is written.
    Generative,
}

/// What a checkpoint shows of its family: its config's `architectures`,
/// its tensor names and its vocabulary.
pub(crate) struct Clues<'a> {
    pub architectures: &'a [String],
    pub has_tensor: &'a dyn Fn(&str) -> bool,
    pub has_token: &'a dyn Fn(&str) -> bool,
}

impl Clues<'_> {
    pub(crate) fn architecture(&self, needle: &str) -> bool {
        self.architectures.iter().any(|a| a.contains(needle))
    }
}

/// One family, whole: what the registry reads of it.
pub(crate) struct Spec {
    /// The name, then the aliases it is also parsed from.
    pub names: &'static [&'static str],
    /// Whether scoring needs the vocabulary projection.
    pub needs_lm_head: bool,
    /// Whether every step gets a score (else the last step alone: one score
    /// for the whole solution, which incremental scoring cannot give).
    pub scores_each_step: bool,
    /// Whether the model writes a critique first and the steps are scored
    /// from its verdicts (so a prompt alone scores nothing).
    pub writes_critique: bool,
    /// Whether a checkpoint is of this family; `None`: it is only chosen by
    /// name (nothing in its files says so). Tried in [`Family::ALL`] order.
    pub detect: Option<fn(&Clues<'_>) -> bool>,
    /// Tensors that make a separate head file this family's.
    pub head_file_tensors: &'static [&'static str],
    /// Resolves the family's special tokens (and default chat format) into
    /// a new protocol.
    pub prepare: fn(&mut Protocol, &Tokenizer) -> Result<()>,
    /// Lays out and tokenizes a problem and its (non-blank) steps.
    pub encode: fn(&Protocol, &Tokenizer, &str, &[&str]) -> Result<Encoded>,
    /// Builds the head from the checkpoint's or head file's tensors.
    pub head: fn(&HeadLoad<'_>) -> Result<Kind<Matrix>>,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::ScoreHead,
        Family::ValueHead,
        Family::MathShepherd,
        Family::Rlhflow,
        Family::Confidence,
        Family::Outcome,
        Family::Generative,
    ];

    /// The registry: each family's file.
    pub(crate) fn spec(self) -> &'static Spec {
        match self {
            Family::ScoreHead => &score_head::SPEC,
            Family::ValueHead => &value_head::SPEC,
            Family::MathShepherd => &math_shepherd::SPEC,
            Family::Rlhflow => &rlhflow::SPEC,
            Family::Confidence => &confidence::SPEC,
            Family::Outcome => &outcome::SPEC,
            Family::Generative => &generative::SPEC,
        }
    }

    pub fn name(&self) -> &'static str {
        self.spec().names[0]
    }

    /// Whether scoring needs the vocabulary projection (and which part).
    pub(crate) fn needs_lm_head(&self) -> bool {
        self.spec().needs_lm_head
    }

    /// Whether every step gets its own score; `false` for a family that
    /// scores the whole solution once (on its last step).
    pub(crate) fn scores_each_step(&self) -> bool {
        self.spec().scores_each_step
    }

    /// Whether the model writes a critique whose verdicts score the steps
    /// (see [`crate::prm::Scorer::critique`]).
    pub(crate) fn writes_critique(&self) -> bool {
        self.spec().writes_critique
    }

    /// Tells the family from what a checkpoint carries: its config's
    /// `architectures`, its tensor names, and its vocabulary. A checkpoint
    /// no family claims is a plain causal LM: the confidence family.
    pub fn detect(
        architectures: &[String],
        has_tensor: impl Fn(&str) -> bool,
        has_token: impl Fn(&str) -> bool,
    ) -> Family {
        let clues = Clues {
            architectures,
            has_tensor: &has_tensor,
            has_token: &has_token,
        };
        Family::ALL
            .into_iter()
            .find(|f| f.spec().detect.is_some_and(|d| d(&clues)))
            .unwrap_or(Family::Confidence)
    }

    /// The family whose head a separate head file holds, from its tensor
    /// names; `None` when it holds no family's head.
    pub(crate) fn of_head_file(has_tensor: impl Fn(&str) -> bool) -> Option<Family> {
        Family::ALL.into_iter().find(|f| {
            let names = f.spec().head_file_tensors;
            names.iter().any(|&n| has_tensor(n))
        })
    }

    /// What [`Family::of_head_file`] looks for, for an error message.
    pub(crate) fn head_file_expectation() -> String {
        let parts: Vec<String> = Family::ALL
            .into_iter()
            .filter(|f| !f.spec().head_file_tensors.is_empty())
            .map(|f| {
                let names: Vec<String> = f
                    .spec()
                    .head_file_tensors
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect();
                format!("{} ({f})", names.join(" or "))
            })
            .collect();
        parts.join(" or ")
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
        let key = s.to_ascii_lowercase().replace('_', "-");
        if let Some(f) = Family::ALL
            .into_iter()
            .find(|f| f.spec().names.contains(&key.as_str()))
        {
            return Ok(f);
        }
        let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
        let (last, rest) = names.split_last().unwrap_or((&"", &[]));
        Err(Error::InvalidArgument(format!(
            "unknown PRM family `{s}` (expected {} or {last})",
            rest.join(", ")
        )))
    }
}

/// Everything about a checkpoint that the prompt layout depends on.
#[derive(Debug, Clone)]
pub(crate) struct Protocol {
    pub(crate) family: Family,
    /// The chat format, for the families that use one.
    pub(crate) chat: Option<ChatFormat>,
    /// The tokenizer's BOS token text (Skywork writes it into the prompt).
    pub(crate) bos_text: Option<String>,
    /// The token id that marks a step (`<extra_0>`, `ки`).
    pub(crate) marker_id: Option<u32>,
    /// The ids of "+" and "-" (LM-head families).
    pub(crate) plus_minus: Option<(u32, u32)>,
}

impl Protocol {
    /// Resolves the family's special tokens in `tokenizer` (the family's
    /// own file says which); errors name the token the checkpoint lacks.
    pub(crate) fn new(
        family: Family,
        tokenizer: &Tokenizer,
        chat: Option<ChatFormat>,
        bos_text: Option<String>,
    ) -> Result<Self> {
        let mut p = Protocol {
            family,
            chat,
            bos_text,
            marker_id: None,
            plus_minus: None,
        };
        (family.spec().prepare)(&mut p, tokenizer)?;
        Ok(p)
    }

    /// The error for a token (or other vocabulary item) the family needs.
    pub(crate) fn missing(&self, what: &str) -> Error {
        Error::Tokenizer(format!(
            "the {} family needs {what}, which this vocabulary lacks",
            self.family
        ))
    }

    /// The error for a family whose prompt is a chat turn, on a checkpoint
    /// without a chat template; `why` says what the turn is.
    pub(crate) fn missing_chat(&self, why: &str) -> Error {
        Error::Tokenizer(format!(
            "the {} family needs a chat template (chat_template in tokenizer_config.json or \
             the GGUF), and this checkpoint has none; {why}",
            self.family
        ))
    }

    /// The last id `text` encodes to (the references' `encode(text)[-1]`).
    pub(crate) fn last_token(&self, tokenizer: &Tokenizer, text: &str) -> Result<u32> {
        tokenizer
            .encode(text, true)?
            .last()
            .copied()
            .ok_or_else(|| self.missing(&format!("a token for {text:?}")))
    }
}

/// Lays out and tokenizes `problem` and `steps` the way `protocol`'s family does.
pub(crate) fn encode(
    protocol: &Protocol,
    tokenizer: &Tokenizer,
    problem: &str,
    steps: &[&str],
) -> Result<Encoded> {
    check_steps(steps)?;
    (protocol.family.spec().encode)(protocol, tokenizer, problem, steps)
}

/// What every family asks of the steps it scores: at least one, none blank.
pub(crate) fn check_steps(steps: &[&str]) -> Result<()> {
    if steps.is_empty() {
        return Err(Error::InvalidArgument(
            "a trace needs at least one step to score".into(),
        ));
    }
    // Blank steps (whitespace or invisible characters only) are refused like empty
    // ones, in every family: there is nothing in them to score.
    if let Some(i) = crate::validate::first_blank(steps.iter().copied()) {
        return Err(Error::InvalidArgument(format!(
            "step {i} is empty (nothing but whitespace or invisible characters)"
        )));
    }
    Ok(())
}

/// What a family's head is built from: the protocol, the model, the head
/// file's input and tensors, and its guard's.
pub(crate) struct HeadLoad<'a> {
    pub protocol: &'a Protocol,
    pub model: &'a Transformer,
    pub tokenizer: &'a Tokenizer,
    pub input: &'a HeadInput,
    pub get: &'a TensorLookup<'a>,
    pub guard: Option<(&'a HeadInput, &'a TensorLookup<'a>)>,
}

impl HeadLoad<'_> {
    /// The model's hidden width.
    pub(crate) fn hidden(&self) -> usize {
        self.model.config().hidden_size
    }
}

impl Head {
    /// Builds the head `protocol`'s family needs for `model` (its final
    /// form: the "+"/"-" rows are cut from its vocabulary projection as
    /// scoring will use it), reading `input`'s layer and statistics; the
    /// tokenizer finds the operator tokens for the operation statistic.
    /// `guard` is the input and tensors of the head `input.min_with` names.
    pub(crate) fn load(
        protocol: &Protocol,
        model: &Transformer,
        tokenizer: &Tokenizer,
        input: &HeadInput,
        get: &TensorLookup<'_>,
        guard: Option<(&HeadInput, &TensorLookup<'_>)>,
    ) -> Result<Head> {
        let n_layers = model.config().n_layers;
        if let Some(&l) = input.layers.iter().find(|&&l| l > n_layers) {
            return Err(Error::model(
                "stepscore.layer",
                format!("the head reads layer {l}, the model has {n_layers} layers (0 is the embeddings)"),
            ));
        }
        if input.layers.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::model(
                "stepscore.layer",
                format!(
                    "the head's layers {:?} are not strictly ascending",
                    input.layers
                ),
            ));
        }
        let load = HeadLoad {
            protocol,
            model,
            tokenizer,
            input,
            get,
            guard,
        };
        let kind = (protocol.family.spec().head)(&load)?;
        // The final layer alone is the forward's own output: nothing to tap.
        let layers = if input.layers == [n_layers] {
            Vec::new()
        } else {
            input.layers.clone()
        };
        Ok(Head {
            kind,
            layers,
            threshold: input.threshold,
            solution_threshold: input.solution_threshold,
        })
    }
}

/// The families whose score is the LM's own outputs have no layer or
/// statistics to choose: a head file that names some is refused.
pub(crate) fn reads_no_features(load: &HeadLoad<'_>) -> Result<()> {
    if !load.input.layers.is_empty() || !load.input.stats.is_empty() {
        return Err(Error::model(
            "stepscore.layer",
            format!(
                "the {} family reads the LM's own outputs: it has no layer or confidence features to choose",
                load.protocol.family
            ),
        ));
    }
    Ok(())
}

/// The "+"/"-" rows for the protocol's ids (Math-Shepherd, RLHFlow).
pub(crate) fn plus_minus(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    let ids = load
        .protocol
        .plus_minus
        .ok_or_else(|| Error::Tokenizer("no \"+\"/\"-\" token ids resolved".into()))?;
    plus_minus_rows(load.model, ids)
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
        // llama.cpp writes Mistral as `llama`; Llama 3 (its own markup) and
        // Gemma have the tag as an ordinary token.
        let gguf = vec!["llama".to_string()];
        assert_eq!(
            Family::detect(&gguf, none, |t| t == "▁ки"),
            Family::MathShepherd
        );
        let llama3 = |t: &str| t == "ки" || t == "<|begin_of_text|>";
        assert_eq!(Family::detect(&gguf, none, llama3), Family::Confidence);
        for gemma in ["gemma3", "Gemma3ForCausalLM"] {
            let arch = vec![gemma.to_string()];
            assert_eq!(
                Family::detect(&arch, none, |t| t == "ки"),
                Family::Confidence
            );
        }
        let rm = vec!["Qwen3ForSequenceClassification".to_string()];
        assert_eq!(
            Family::detect(&rm, |t| t == "score.weight", none),
            Family::Outcome
        );
        assert_eq!(Family::detect(&rm, none, none), Family::Confidence);
    }

    #[test]
    fn names_parse_back() {
        for f in Family::ALL {
            assert_eq!(f.name().parse::<Family>().unwrap(), f);
            for alias in f.spec().names {
                assert_eq!(alias.parse::<Family>().unwrap(), f);
            }
        }
        let err = "prm".parse::<Family>().unwrap_err().to_string();
        assert!(
            err.contains(
                "score-head, value-head, math-shepherd, rlhflow, confidence, outcome or generative"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_head_file_is_told_by_its_tensors() {
        let has = |name: &'static str| move |t: &str| t == name;
        assert_eq!(
            Family::of_head_file(has("v_head.summary.weight")),
            Some(Family::ValueHead)
        );
        assert_eq!(
            Family::of_head_file(has("v_head.summary.0.weight")),
            Some(Family::ValueHead)
        );
        assert_eq!(
            Family::of_head_file(has("score.0.weight")),
            Some(Family::ScoreHead)
        );
        assert_eq!(Family::of_head_file(has("lm_head.weight")), None);
    }
}
