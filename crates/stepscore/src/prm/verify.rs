//! Verifying an external generator while it writes: the steps of an
//! OpenAI-compatible stream ([`crate::stream::StepStream`]) are scored the
//! moment each completes, on one [`Session`] (each step costs its own
//! tokens, the prefix stays in the KV cache), and the verifier says stop
//! when a step's score falls below the threshold — the scorer's shipped
//! one unless the caller sets another. Transport-free like the stream: the
//! caller pushes bytes and pulls events, and drops the connection on
//! [`VerifyEvent::Stopped`].

use std::ops::Deref;

use serde::Serialize;

use super::blocking::block_on;
use super::scorer::Scorer;
use super::session::Session;
use crate::stream::{Finish, StepStream, StreamItem};
use crate::{Error, Result};

/// What the verifier saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum VerifyEvent {
    /// Text as it arrived.
    Text { text: String },
    /// A complete step and its score; `start..end` is its byte span in the
    /// whole generated text.
    Step {
        step: usize,
        text: String,
        start: usize,
        end: usize,
        score: f64,
    },
    /// `step` scored below `threshold` (a NaN score counts as below): the
    /// caller should drop the connection; nothing more comes.
    Stopped {
        step: usize,
        score: f64,
        threshold: f64,
    },
    /// The stream ended with every step scored.
    Finished(Finish),
}

/// A stream being verified, holding its scorer through `S`.
#[derive(Debug)]
pub struct StreamVerifier<S> {
    stream: StepStream,
    session: Session<S>,
    threshold: Option<f64>,
    /// A `Stopped` event is waiting behind the step that caused it.
    stop_next: Option<VerifyEvent>,
    stopped: bool,
    /// A step could not be scored: the session cannot go past it.
    failed: bool,
}

impl Scorer {
    /// Starts verifying a stream that answers `problem` (see
    /// [`StreamVerifier`]); `source` names the stream in errors.
    pub fn verify_stream(&self, problem: &str, source: &str) -> StreamVerifier<&Scorer> {
        StreamVerifier::new(self, problem, source)
    }
}

impl<S: Deref<Target = Scorer>> StreamVerifier<S> {
    /// A verifier stopping below the scorer's shipped threshold (none: it
    /// never stops; see [`Self::stop_below`]).
    pub fn new(scorer: S, problem: &str, source: &str) -> Self {
        let threshold = scorer.threshold();
        StreamVerifier {
            stream: StepStream::new(source),
            session: Session::new(scorer, problem),
            threshold,
            stop_next: None,
            stopped: false,
            failed: false,
        }
    }

    /// Stops when a step scores below `threshold` (a probability in
    /// [0, 1]); `None` scores every step and never stops.
    pub fn stop_below(mut self, threshold: Option<f64>) -> Result<Self> {
        if let Some(t) = threshold {
            if !(0.0..=1.0).contains(&t) {
                return Err(Error::InvalidArgument(format!(
                    "stop threshold {t}: a step score is a probability, so the threshold \
                     must be in [0, 1]"
                )));
            }
        }
        self.threshold = threshold;
        Ok(self)
    }

    /// Where the verifier stops, the one rule of every front end: never
    /// when `stop` is false; else below `given` when given; else below the
    /// PRM's shipped threshold (none shipped: never).
    pub fn stopping(self, stop: bool, given: Option<f64>) -> Result<Self> {
        match (stop, given) {
            (false, _) => self.stop_below(None),
            (true, Some(t)) => self.stop_below(Some(t)),
            (true, None) => Ok(self),
        }
    }

    /// The threshold in force (`None`: never stops).
    pub fn threshold(&self) -> Option<f64> {
        self.threshold
    }

    /// Adds received bytes of the response body.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.stopped && !self.failed {
            self.stream.push(bytes);
        }
    }

    /// One chunk from a library that hands chunks over without SSE framing
    /// ([`StepStream::push_chunk`]).
    pub fn push_chunk(&mut self, data: &str) -> Result<()> {
        if self.stopped || self.failed {
            return Ok(());
        }
        self.stream.push_chunk(data)
    }

    /// Plain text from a generator ([`StepStream::push_text`]).
    pub fn push_text(&mut self, text: &str) -> Result<()> {
        if self.stopped || self.failed {
            return Ok(());
        }
        self.stream.push_text(text)
    }

    /// The generator is done ([`StepStream::end`]).
    pub fn end(&mut self, finish_reason: Option<&str>) {
        self.stream.end(finish_reason);
    }

    /// Says the response body has ended.
    pub fn close(&mut self) {
        self.stream.close();
    }

    /// Whether a step fell below the threshold.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Whether nothing more will come: stopped, finished or failed.
    pub fn ended(&self) -> bool {
        self.stop_next.is_none() && (self.stopped || self.failed || self.stream.ended())
    }

    /// The session holding the steps scored so far.
    pub fn session(&self) -> &Session<S> {
        &self.session
    }

    /// The next event, `None` when more bytes are needed or nothing more
    /// will come ([`Self::ended`]). A step is scored here, before it is returned.
    pub fn next_event(&mut self) -> Option<Result<VerifyEvent>> {
        if let Err(e) = self.session.scorer().blocking_allowed() {
            return Some(Err(e));
        }
        block_on(async { Ok(self.next_event_async().await) }).unwrap_or_else(|e| Some(Err(e)))
    }

    /// [`Self::next_event`], awaited (the WebGPU engine in a browser).
    pub async fn next_event_async(&mut self) -> Option<Result<VerifyEvent>> {
        if let Some(stop) = self.stop_next.take() {
            return Some(Ok(stop));
        }
        if self.stopped || self.failed {
            return None;
        }
        let item = match self.stream.next_item()? {
            Ok(item) => item,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(match item {
            StreamItem::Text { text } => VerifyEvent::Text { text },
            StreamItem::Finished(f) => VerifyEvent::Finished(f),
            StreamItem::Step {
                step,
                text,
                start,
                end,
            } => {
                let score = match self.session.append_async(&text).await {
                    Ok(s) => s,
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                };
                if let Some(threshold) = self.threshold {
                    // A NaN score fails too (it is not at or above the threshold).
                    if score.partial_cmp(&threshold).is_none_or(|o| o.is_lt()) {
                        self.stopped = true;
                        self.stop_next = Some(VerifyEvent::Stopped {
                            step,
                            score,
                            threshold,
                        });
                    }
                }
                VerifyEvent::Step {
                    step,
                    text,
                    start,
                    end,
                    score,
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::prm::ScorerOptions;

    /// A reference case: problem, steps, step scores.
    type Case = (String, Vec<String>, Vec<f64>);

    /// The tiny PRM fixture and its reference cases.
    fn fixture() -> (Scorer, Vec<Case>) {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/prm/skywork-prm-tiny");
        let reference: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("reference.json")).unwrap()).unwrap();
        let strings = |v: &serde_json::Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        let cases = reference["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let scores = c["step_scores"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_f64().unwrap());
                (
                    c["problem"].as_str().unwrap().to_string(),
                    strings(&c["steps"]),
                    scores.collect(),
                )
            })
            .collect();
        (
            Scorer::open(&dir, &ScorerOptions::default()).unwrap(),
            cases,
        )
    }

    /// A chat stream writing `text` a few bytes per chunk (split inside
    /// characters' words, never inside a `char`: the JSON carries text).
    fn sse_body(text: &str) -> String {
        let mut body = String::new();
        let mut piece = String::new();
        for c in text.chars() {
            piece.push(c);
            if piece.len() >= 5 {
                let chunk =
                    serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}}]});
                body.push_str(&format!("data: {chunk}\n\n"));
                piece.clear();
            }
        }
        let last = serde_json::json!({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": "stop"}]});
        body.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
        body
    }

    /// Every event for `body` fed 3 bytes at a time.
    fn events(v: &mut StreamVerifier<&Scorer>, body: &str) -> Vec<VerifyEvent> {
        let mut out = Vec::new();
        for piece in body.as_bytes().chunks(3) {
            v.push(piece);
            while let Some(ev) = v.next_event() {
                out.push(ev.unwrap());
            }
        }
        v.close();
        while let Some(ev) = v.next_event() {
            out.push(ev.unwrap());
        }
        out
    }

    #[test]
    fn streamed_steps_get_the_reference_scores() {
        let (scorer, cases) = fixture();
        for (problem, steps, want) in &cases {
            let text = steps.join("\n\n");
            let mut v = scorer.verify_stream(problem, "s").stop_below(None).unwrap();
            let evs = events(&mut v, &sse_body(&text));
            let got: Vec<(String, f64)> = evs
                .iter()
                .filter_map(|e| match e {
                    VerifyEvent::Step { text, score, .. } => Some((text.clone(), *score)),
                    _ => None,
                })
                .collect();
            assert_eq!(got.len(), steps.len(), "{problem}");
            for ((t, s), (step, w)) in got.iter().zip(steps.iter().zip(want)) {
                assert_eq!(t, step);
                assert!((s - w).abs() <= 1e-4, "{step}: {s} vs reference {w}");
            }
            assert!(
                matches!(evs.last(), Some(VerifyEvent::Finished(f)) if f.done && f.steps == steps.len())
            );
            assert!(v.ended() && !v.stopped());
        }
    }

    #[test]
    fn a_step_below_the_threshold_stops_the_stream() {
        let (scorer, cases) = fixture();
        // Case 0 scores 0.859, 0.911, 0.760: a threshold of 0.8 stops at step 2.
        let (problem, steps, _) = &cases[0];
        let mut v = scorer
            .verify_stream(problem, "s")
            .stop_below(Some(0.8))
            .unwrap();
        let evs = events(&mut v, &sse_body(&steps.join("\n\n")));
        let tail: Vec<&VerifyEvent> = evs
            .iter()
            .filter(|e| !matches!(e, VerifyEvent::Text { .. }))
            .collect();
        assert_eq!(tail.len(), 4, "{tail:?}");
        assert!(matches!(tail[2], VerifyEvent::Step { step: 2, .. }));
        assert!(matches!(
            tail[3],
            VerifyEvent::Stopped { step: 2, threshold, score } if *threshold == 0.8 && *score < 0.8
        ));
        assert!(v.stopped() && v.ended());
        // Nothing is read after the stop.
        v.push(sse_body("More.\n\n").as_bytes());
        assert!(v.next_event().is_none());
        assert_eq!(v.session().steps().len(), 3);
    }

    #[test]
    fn thresholds_outside_zero_to_one_are_refused() {
        let (scorer, _) = fixture();
        for t in [-0.1, 1.5, f64::NAN] {
            let e = scorer
                .verify_stream("p", "s")
                .stop_below(Some(t))
                .unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }
}
