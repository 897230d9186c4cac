//! What JS receives: camelCase objects (serialized by serde-wasm-bindgen in
//! JSON-compatible mode, so `None` arrives as `null`), and step spans in
//! UTF-16 code units so `text.slice(start, end)` works on JS strings.

use serde::Serialize;
use serde_json::Value;
use stepscore::prm::{least_likely, StepConfidence, TokenLogprob, TraceScore};
use stepscore::select::{Selection, Vote};
use stepscore::Step;

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Confidence {
    pub tokens: usize,
    pub mean_logprob: f64,
    pub min_logprob: f64,
    pub mean_entropy: f64,
}

impl From<&StepConfidence> for Confidence {
    fn from(c: &StepConfidence) -> Self {
        Confidence {
            tokens: c.tokens,
            mean_logprob: c.mean_logprob,
            min_logprob: c.min_logprob,
            mean_entropy: c.mean_entropy,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// One per step; `null` for steps dropped by truncation, and for every
    /// step but the last under the outcome family.
    pub step_scores: Vec<Option<f64>>,
    pub tokens: usize,
    pub truncated_steps: usize,
    /// An outcome reward model's logit for the whole solution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome_logit: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Vec<Confidence>>,
    /// Asked for with `tokenLogprobs`, from heads that read the LM's token
    /// statistics: per scored step, its tokens with UTF-16 spans in the step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_logprobs: Option<Vec<Vec<TokenSpan>>>,
    /// With `token_logprobs`: per scored step, the core's least likely
    /// number ([`stepscore::prm::least_likely`]), `null` when none shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub least_likely: Option<Vec<Option<TokenSpan>>>,
    /// What a generative verifier wrote (its verdicts gave the scores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critique: Option<CritiqueOut>,
}

/// A generative verifier's critique, in the npm package's spelling.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CritiqueOut {
    pub text: String,
    /// Per step, "correct", "incorrect", or `null` after the last verdict.
    pub verdicts: Vec<Option<stepscore::prm::StepVerdict>>,
    /// Why writing stopped (absent for a given critique).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<&'static str>,
}

/// What a scoring call returns besides the scores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScoreOptions {
    pub token_logprobs: bool,
}

impl ScoreOptions {
    /// `undefined` / `null`, or `{ tokenLogprobs?: boolean }`.
    pub fn parse(v: &Value) -> Result<ScoreOptions> {
        let obj = match v {
            Value::Null => return Ok(ScoreOptions::default()),
            Value::Object(obj) => obj,
            _ => return Err(Error::invalid_argument("score options must be an object")),
        };
        if let Some(key) = obj.keys().find(|k| k.as_str() != "tokenLogprobs") {
            return Err(Error::invalid_argument(format!(
                "unknown score option `{key}` (known: tokenLogprobs)"
            )));
        }
        let token_logprobs = match obj.get("tokenLogprobs") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(Error::invalid_argument(format!(
                    "score option `tokenLogprobs` must be a boolean, got {other}"
                )))
            }
        };
        Ok(ScoreOptions { token_logprobs })
    }
}

/// A stretch of a step's text with a log-prob: `step.slice(start, end)`;
/// a token also has the entropy (nats) of the distribution that predicted it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TokenSpan {
    pub start: usize,
    pub end: usize,
    pub logprob: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entropy: Option<f64>,
}

impl Score {
    /// `steps` are the texts the trace was scored with (their byte spans are
    /// converted to UTF-16 here).
    pub fn new(s: TraceScore, steps: &[&str], options: ScoreOptions) -> Score {
        let tokens = s.token_logprobs.filter(|_| options.token_logprobs);
        let (token_logprobs, least_likely) = match tokens {
            None => (None, None),
            Some(per_step) => {
                let (spans, least) = per_step
                    .iter()
                    .zip(steps)
                    .map(|(tokens, text)| step_token_spans(tokens, text))
                    .unzip();
                (Some(spans), Some(least))
            }
        };
        Score {
            step_scores: s.step_scores,
            tokens: s.tokens,
            truncated_steps: s.truncated_steps,
            outcome_logit: s.outcome_logit,
            confidence: s
                .confidence
                .map(|c| c.iter().map(Confidence::from).collect()),
            token_logprobs,
            least_likely,
            critique: s.critique.map(|c| CritiqueOut {
                text: c.text,
                verdicts: c.verdicts,
                stop_reason: c.stop_reason.as_ref().map(|r| r.name()),
            }),
        }
    }
}

/// A session's steps' tokens and least likely numbers, as [`Score`] has
/// them (empty when the head reads no token statistics).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTokens {
    pub token_logprobs: Vec<Vec<TokenSpan>>,
    pub least_likely: Vec<Option<TokenSpan>>,
}

impl SessionTokens {
    pub fn new<'a>(
        tokens: &[Vec<TokenLogprob>],
        steps: impl IntoIterator<Item = &'a str>,
    ) -> SessionTokens {
        let (token_logprobs, least_likely) = tokens
            .iter()
            .zip(steps)
            .map(|(t, text)| step_token_spans(t, text))
            .unzip();
        SessionTokens {
            token_logprobs,
            least_likely,
        }
    }
}

/// One step's tokens and least likely number, with UTF-16 spans.
pub fn step_token_spans(
    tokens: &[TokenLogprob],
    text: &str,
) -> (Vec<TokenSpan>, Option<TokenSpan>) {
    let units = Utf16Index::new(text);
    let span = |start: usize, end: usize, logprob: f64, entropy| TokenSpan {
        start: units.floor(start),
        end: units.ceil(end),
        logprob,
        entropy,
    };
    let spans = tokens
        .iter()
        .map(|t| span(t.start, t.end, t.logprob, Some(t.entropy)))
        .collect();
    let least = least_likely(tokens, text).map(|l| span(l.start, l.end, l.logprob, None));
    (spans, least)
}

/// One equation `checkArithmetic` read, with UTF-16 offsets.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EquationOut {
    pub start: usize,
    pub end: usize,
    pub left: String,
    pub right: String,
    pub left_value: Option<String>,
    pub right_value: Option<String>,
    pub approx: bool,
    pub holds: bool,
    /// What a person reads (`Equation::explain`).
    pub explanation: String,
}

/// The core's equations of `text` with UTF-16 spans.
pub fn equations(text: &str) -> Vec<EquationOut> {
    let units = Utf16Index::new(text);
    stepscore::recompute::recompute(text)
        .equations
        .into_iter()
        .map(|e| EquationOut {
            start: units.floor(e.start),
            end: units.ceil(e.end),
            explanation: e.explain(),
            left: e.left,
            right: e.right,
            left_value: e.left_value,
            right_value: e.right_value,
            approx: e.approx,
            holds: e.holds,
        })
        .collect()
}

/// UTF-16 offsets of a text's byte offsets. A byte inside a character
/// (a byte-level token can end mid-character) rounds down for a start and
/// up for an end, so a span never shows half a character.
struct Utf16Index {
    /// Per byte offset (and the end), the UTF-16 offset of the character
    /// starting there, or of the one containing it; `None` for ASCII.
    units: Option<Vec<usize>>,
    len: usize,
}

impl Utf16Index {
    fn new(text: &str) -> Utf16Index {
        if text.is_ascii() {
            return Utf16Index {
                units: None,
                len: text.len(),
            };
        }
        let mut units = Vec::with_capacity(text.len() + 1);
        let mut unit = 0;
        for c in text.chars() {
            units.extend(std::iter::repeat_n(unit, c.len_utf8()));
            unit += c.len_utf16();
        }
        units.push(unit);
        Utf16Index {
            units: Some(units),
            len: text.len(),
        }
    }

    fn floor(&self, byte: usize) -> usize {
        let b = byte.min(self.len);
        self.units.as_ref().map_or(b, |u| u[b])
    }

    fn ceil(&self, byte: usize) -> usize {
        let b = byte.min(self.len);
        match &self.units {
            None => b,
            // Inside a character when the byte before maps to the same unit
            // and is not the character's start: the next character's offset.
            Some(u) => {
                let at = u[b];
                if b > 0 && b < self.len && u[b - 1] == at {
                    u[b..]
                        .iter()
                        .copied()
                        .find(|&x| x > at)
                        .unwrap_or(u[self.len])
                } else {
                    at
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentStep {
    pub text: String,
    /// UTF-16 offsets into the segmented text: `text === input.slice(start, end)`.
    pub start: usize,
    pub end: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

/// Converts the core's UTF-8 byte spans (ordered, on char boundaries) to
/// UTF-16 offsets in one pass over the text.
pub fn segment_steps(text: &str, steps: Vec<Step>) -> Result<Vec<SegmentStep>> {
    let (mut byte, mut unit) = (0usize, 0usize);
    let mut advance = |to: usize| -> Result<usize> {
        let piece = text.get(byte..to).ok_or_else(|| {
            Error::invalid_argument(format!(
                "internal: step span {byte}..{to} is not on char boundaries"
            ))
        })?;
        unit += piece.encode_utf16().count();
        byte = to;
        Ok(unit)
    };
    steps
        .into_iter()
        .map(|s| {
            let span = s
                .span
                .ok_or_else(|| Error::invalid_argument("internal: a segmented step has no span"))?;
            let start = advance(span.start)?;
            let end = advance(span.end)?;
            Ok(SegmentStep {
                text: s.text,
                start,
                end,
                role: s.role.map(|r| r.as_str()),
                tool: s.tool,
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VoteOut {
    pub answer: String,
    pub display: String,
    pub count: usize,
    pub weight: f64,
    pub members: Vec<usize>,
}

impl From<Vote> for VoteOut {
    fn from(v: Vote) -> Self {
        VoteOut {
            answer: v.answer,
            display: v.display,
            count: v.count,
            weight: v.weight,
            members: v.members,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CandidateOut {
    pub index: usize,
    pub id: Option<String>,
    pub answer: Option<String>,
    pub raw_answer: Option<String>,
    pub score: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionOut {
    pub aggregation: &'static str,
    pub best: Option<usize>,
    pub candidates: Vec<CandidateOut>,
    pub majority: Option<VoteOut>,
    pub weighted: Option<VoteOut>,
}

impl From<Selection> for SelectionOut {
    fn from(s: Selection) -> Self {
        SelectionOut {
            aggregation: s.aggregation.name(),
            best: s.best,
            candidates: s
                .candidates
                .into_iter()
                .map(|c| CandidateOut {
                    index: c.index,
                    id: c.id,
                    answer: c.answer,
                    raw_answer: c.raw_answer,
                    score: c.score,
                })
                .collect(),
            majority: s.majority.map(VoteOut::from),
            weighted: s.weighted.map(VoteOut::from),
        }
    }
}

/// The model part of `scorer.info()`; the JS layer adds backend and download facts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub family: &'static str,
    pub format: &'static str,
    pub architectures: Vec<String>,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab_size: usize,
    pub context_length: usize,
    pub max_tokens: usize,
    /// Bytes of model files handed to the loader.
    pub model_bytes: usize,
    pub threads: usize,
    /// The engine the scorer runs on: `cpu` or `gpu` (WebGPU in a browser).
    pub engine: &'static str,
    /// The GPU adapter's name as the device reports it, when on the GPU.
    pub adapter: Option<String>,
    /// Why this engine (the core's backend report).
    pub engine_reason: String,
    /// The first-error threshold the head ships with; `None` when it has none.
    pub threshold: Option<f64>,
    /// The threshold a first error is flagged below when none is given
    /// (the core's rule: the shipped one, else the default).
    pub threshold_in_force: f64,
    /// Which tokens the head's score reads through the LM's statistics:
    /// `all`, `arithmetic` (numbers and operation signs) or `none`.
    pub tokens_read: &'static str,
}

/// Device buffers of the WebGPU engine: the leak tests' counter.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuBuffers {
    /// Buffers alive on the device (weights, in-use and free pooled ones).
    pub live_buffers: u64,
    pub live_bytes: u64,
    /// Of those, pooled buffers waiting for reuse.
    pub free_buffers: u64,
    pub free_bytes: u64,
}

impl From<stepscore::engine::PoolStats> for GpuBuffers {
    fn from(s: stepscore::engine::PoolStats) -> Self {
        GpuBuffers {
            live_buffers: s.live_buffers,
            live_bytes: s.live_bytes,
            free_buffers: s.free_buffers,
            free_bytes: s.free_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stepscore::segment::Segmenter;

    #[test]
    fn spans_count_utf16_units() {
        // "é" is 2 UTF-8 bytes and 1 UTF-16 unit; "𝑥" is 4 bytes and 2 units.
        let text = "é = 1\n\n𝑥 + 1 = 2\n\nso ✓";
        let steps = Segmenter::BlankLine.segment(text);
        let out = segment_steps(text, steps).unwrap();
        let units: Vec<u16> = text.encode_utf16().collect();
        assert_eq!(out.len(), 3);
        assert_eq!((out[0].start, out[0].end), (0, 5));
        // 5 units of step 0, "\n\n" = 2: step 1 starts at unit 7 and "𝑥 + 1 = 2" is 10 units.
        assert_eq!((out[1].start, out[1].end), (7, 17));
        for s in &out {
            assert_eq!(String::from_utf16(&units[s.start..s.end]).unwrap(), s.text);
        }
    }

    #[test]
    fn token_spans_count_utf16_units_and_never_split_a_character() {
        // "×" 2 bytes / 1 unit, "é" 2 / 1, "😀" 4 / 2 units.
        let text = "7×8=5é😀4";
        let t = |start, end, logprob| TokenLogprob {
            start,
            end,
            logprob,
            entropy: 1.0,
        };
        // Bytes: 7 0..1, × 1..3, 8 3..4, = 4..5, 5 5..6, é 6..8, 😀 8..12, 4 12..13.
        // The emoji split across two byte-level tokens (8..10 and 10..12).
        let tokens = [
            t(0, 1, -0.1),
            t(1, 3, -0.2),
            t(3, 4, -0.3),
            t(4, 5, -0.4),
            t(5, 6, -9.0),
            t(6, 8, -0.5),
            t(8, 10, -0.6),
            t(10, 12, -0.7),
            t(12, 13, -0.8),
        ];
        let (spans, least) = step_token_spans(&tokens, text);
        let units: Vec<u16> = text.encode_utf16().collect();
        let js = |a: usize, b: usize| String::from_utf16(&units[a..b]).unwrap();
        let got: Vec<(usize, usize)> = spans.iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(
            got,
            [
                (0, 1),
                (1, 2),
                (2, 3),
                (3, 4),
                (4, 5),
                (5, 6),
                (6, 8),
                (6, 8),
                (8, 9)
            ]
        );
        assert_eq!(js(spans[1].start, spans[1].end), "×");
        assert_eq!(js(spans[6].start, spans[6].end), "😀");
        // The least likely digit is "5", a number on its own here.
        let least = least.unwrap();
        assert_eq!(
            (js(least.start, least.end).as_str(), least.logprob),
            ("5", -9.0)
        );
        // Plain ASCII maps one to one.
        let (spans, least) = step_token_spans(&[t(0, 3, -1.0), t(3, 6, -2.0)], "16+240");
        assert_eq!((spans[1].start, spans[1].end), (3, 6));
        assert_eq!(least.map(|l| (l.start, l.end)), Some((3, 6)));
    }

    #[test]
    fn score_options_name_what_is_wrong() {
        assert_eq!(
            ScoreOptions::parse(&Value::Null).unwrap(),
            ScoreOptions::default()
        );
        let on = ScoreOptions::parse(&serde_json::json!({"tokenLogprobs": true})).unwrap();
        assert!(on.token_logprobs);
        let bad = ScoreOptions::parse(&serde_json::json!({"tokenLogprobs": 1})).unwrap_err();
        assert!(bad.message.contains("tokenLogprobs"), "{}", bad.message);
        let unknown = ScoreOptions::parse(&serde_json::json!({"tokenLogProbs": true})).unwrap_err();
        assert!(
            unknown.message.contains("tokenLogProbs"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn chat_roles_are_strings() {
        let text = "User: hi\nTool result (calc): 4";
        let out = segment_steps(text, Segmenter::ChatTurns.segment(text)).unwrap();
        assert_eq!(out[0].role, Some("user"));
        assert_eq!(
            (out[1].role, out[1].tool.as_deref()),
            (Some("tool_result"), Some("calc"))
        );
    }
}
