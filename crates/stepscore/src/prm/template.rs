//! What a family's prompt becomes ([`Encoded`]: token ids, the position that
//! scores each step, each step's tokens) and the helpers the families'
//! layouts share. Each layout, written after its family's reference code, is
//! in that family's file (`family/`).

use std::ops::Range;

use crate::engine::Encoding;
use crate::{Error, Result};

/// A prompt ready for the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub tokens: Vec<u32>,
    /// Per step, the position whose output gives the step's score.
    pub markers: Vec<usize>,
    /// Per step, the positions of the step's own text tokens.
    pub step_tokens: Vec<Range<usize>>,
    /// Per step, for each of its `step_tokens`, the byte range of the
    /// step's text the token covers (clamped to the step: a token that
    /// straddles the step's edge covers only its part inside).
    pub step_spans: Vec<Vec<(usize, usize)>>,
    /// Per step, the text its `step_spans` index (the step as given; for
    /// RLHFlow, trimmed as its template trims it).
    pub step_texts: Vec<String>,
}

impl Encoded {
    /// A prompt tokenized whole (`enc`), with each step's byte range in
    /// the prompt text (`spans`) and the positions that score the steps.
    pub(crate) fn of_prompt(
        enc: Encoding,
        markers: Vec<usize>,
        spans: &[Range<usize>],
        step_texts: Vec<String>,
    ) -> Encoded {
        let step_tokens = token_ranges(&enc.offsets, spans);
        Encoded {
            step_spans: token_spans(&enc.offsets, &step_tokens, spans),
            step_tokens,
            tokens: enc.ids,
            markers,
            step_texts,
        }
    }

    /// The first position whose output the steps from `from` on read (the
    /// token before a step's first token gives its first log-prob; the
    /// marker its score): a cache may hold the positions before it.
    /// `self.tokens.len()` when there is no step `from`.
    pub(crate) fn first_needed(&self, from: usize) -> usize {
        match self.markers.get(from) {
            Some(&m) => self.step_tokens[from].start.saturating_sub(1).min(m),
            None => self.tokens.len(),
        }
    }

    /// The steps from `from` on, with positions counted from `keep` (at
    /// most [`Encoded::first_needed`]): what a head reads of a forward over
    /// `tokens[keep..]` that continues a cache of the first `keep`.
    pub(crate) fn tail(&self, from: usize, keep: usize) -> Encoded {
        Encoded {
            tokens: self.tokens[keep..].to_vec(),
            markers: self.markers[from..].iter().map(|&m| m - keep).collect(),
            step_tokens: self.step_tokens[from..]
                .iter()
                .map(|r| r.start.saturating_sub(keep)..r.end.saturating_sub(keep))
                .collect(),
            step_spans: self.step_spans[from..].to_vec(),
            step_texts: self.step_texts[from.min(self.step_texts.len())..].to_vec(),
        }
    }
}

/// Steps must not contain the text that marks step ends, or markers would
/// not line up with steps.
pub(crate) fn forbid(steps: &[&str], marker: &str) -> Result<()> {
    match steps.iter().position(|s| s.contains(marker)) {
        Some(i) => Err(Error::InvalidArgument(format!(
            "step {i} contains the step marker {marker:?}"
        ))),
        None => Ok(()),
    }
}

/// Positions of `id` in `tokens`, which must be one per step.
pub(crate) fn marker_positions(tokens: &[u32], id: u32, n_steps: usize) -> Result<Vec<usize>> {
    let found: Vec<usize> = tokens
        .iter()
        .enumerate()
        .filter(|(_, &t)| t == id)
        .map(|(i, _)| i)
        .collect();
    if found.len() != n_steps {
        return Err(Error::InvalidArgument(format!(
            "the prompt holds {} step markers for {n_steps} steps (a step or the problem contains the marker token)",
            found.len()
        )));
    }
    Ok(found)
}

/// Token offsets of a step encoded on its own, clamped to its `len` bytes.
pub(crate) fn clamped(offsets: &[(usize, usize)], len: usize) -> Vec<(usize, usize)> {
    offsets
        .iter()
        .map(|&(a, b)| (a.min(len), b.min(len)))
        .collect()
}

/// Per step, the byte ranges of `ranges`' tokens relative to the step's
/// `span` of the prompt text, clamped to it.
fn token_spans(
    offsets: &[(usize, usize)],
    ranges: &[Range<usize>],
    spans: &[Range<usize>],
) -> Vec<Vec<(usize, usize)>> {
    ranges
        .iter()
        .zip(spans)
        .map(|(r, span)| {
            let rel = |x: usize| x.clamp(span.start, span.end) - span.start;
            offsets
                .get(r.clone())
                .unwrap_or(&[])
                .iter()
                .map(|&(a, b)| (rel(a), rel(b)))
                .collect()
        })
        .collect()
}

/// Token ranges of byte ranges of the prompt, from the tokenizer's offsets.
fn token_ranges(offsets: &[(usize, usize)], spans: &[Range<usize>]) -> Vec<Range<usize>> {
    spans
        .iter()
        .map(|span| {
            let start = offsets
                .iter()
                .position(|&(s, e)| e > span.start && s < span.end && e > s);
            match start {
                Some(a) => {
                    let b = offsets[a..]
                        .iter()
                        .position(|&(s, _)| s >= span.end)
                        .map_or(offsets.len(), |k| a + k);
                    a..b
                }
                None => 0..0,
            }
        })
        .collect()
}
