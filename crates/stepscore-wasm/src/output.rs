//! What JS receives: camelCase objects (serialized by serde-wasm-bindgen in
//! JSON-compatible mode, so `None` arrives as `null`), and step spans in
//! UTF-16 code units so `text.slice(start, end)` works on JS strings.

use serde::Serialize;
use stepscore::prm::{StepConfidence, TraceScore};
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
    /// One per step; `null` for steps dropped by truncation.
    pub step_scores: Vec<Option<f64>>,
    pub tokens: usize,
    pub truncated_steps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Vec<Confidence>>,
}

impl From<TraceScore> for Score {
    fn from(s: TraceScore) -> Self {
        Score {
            step_scores: s.step_scores,
            tokens: s.tokens,
            truncated_steps: s.truncated_steps,
            confidence: s
                .confidence
                .map(|c| c.iter().map(Confidence::from).collect()),
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

impl From<stepscore::gpu::PoolStats> for GpuBuffers {
    fn from(s: stepscore::gpu::PoolStats) -> Self {
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
