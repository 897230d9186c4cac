//! Steps out of an OpenAI-compatible streaming completion, as they complete,
//! with no transport: the caller pushes the response body's bytes in pieces
//! of any size ([`StepStream::push`]), says when the body ended
//! ([`StepStream::close`]), and pulls items ([`StepStream::next_item`]):
//! each piece of text as it arrives, each step the moment the blank-line
//! rule ([`crate::segment::first_step_end`]) finishes it, and at the end the
//! last step and how the stream finished. The CLI (over HTTP or stdin), the
//! Python package and the wasm bindings all drive this one state machine;
//! [`crate::prm::verify`] scores its steps.
//!
//! The first error (a malformed event, the server's error event, a stream
//! cut off before its end) ends the stream: the steps before it were
//! already given out, the text after it cannot be trusted to line up.

mod chunk;
mod sse;

use std::collections::VecDeque;

use serde::Serialize;
use serde_json::Value;

use crate::segment::{first_step_end, Segmenter};
use crate::{Error, Result};
use chunk::Chunk;
use sse::SseDecoder;

/// Longest unfinished step kept in memory, in bytes: far past any PRM's
/// context, so a stream that never writes a blank line ends with an error
/// instead of growing without bound.
pub const MAX_STEP_BYTES: usize = 4 << 20;

/// What the stream gave.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum StreamItem {
    /// Text as it arrived (a chunk's `content`).
    Text { text: String },
    /// A complete step: its 0-based index, text (trimmed, as the blank-line
    /// segmenter gives it) and byte span in the whole generated text.
    Step {
        step: usize,
        text: String,
        start: usize,
        end: usize,
    },
    /// The end of the stream (after the last step).
    Finished(Finish),
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finish {
    /// The server's last `finish_reason` (`stop`, `length`, ...), if it sent one.
    pub finish_reason: Option<String>,
    /// Whether the end was announced (`[DONE]`, or [`StepStream::end`])
    /// rather than inferred from a body that ended after a `finish_reason`.
    pub done: bool,
    /// The server's `usage` object, if it sent one.
    pub usage: Option<Value>,
    /// Steps given out.
    pub steps: usize,
    /// Bytes of generated text (`content`).
    pub text_bytes: usize,
    /// Bytes of a reasoning channel (`reasoning_content`), which are not
    /// steps: a PRM scores the answer's text.
    pub reasoning_bytes: usize,
}

/// The state of one stream.
#[derive(Debug)]
pub struct StepStream {
    source: String,
    sse: SseDecoder,
    /// The unfinished step's text, which starts at byte `offset` of the whole text.
    pending: String,
    offset: usize,
    items: VecDeque<StreamItem>,
    steps: usize,
    finish_reason: Option<String>,
    usage: Option<Value>,
    reasoning_bytes: usize,
    /// Chunks given through [`StepStream::push_chunk`].
    chunks: usize,
    closed: bool,
    /// Finished or failed: nothing more is read.
    ended: bool,
}

impl StepStream {
    /// A stream whose errors name it `source` (a URL, a file, `<stdin>`).
    pub fn new(source: &str) -> Self {
        StepStream {
            source: source.to_string(),
            sse: SseDecoder::default(),
            pending: String::new(),
            offset: 0,
            items: VecDeque::new(),
            steps: 0,
            finish_reason: None,
            usage: None,
            reasoning_bytes: 0,
            chunks: 0,
            closed: false,
            ended: false,
        }
    }

    /// Adds received bytes (any split: mid-line, mid-character).
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.ended {
            self.sse.push(bytes);
        }
    }

    /// One chunk from a generator library that hands chunks over without
    /// the SSE framing (WebLLM's `chat.completions.create({stream: true})`
    /// objects, as JSON text): a chunk, or `[DONE]`. Errors name the chunk
    /// by its 1-based number and end the stream. Use one kind of input per
    /// stream: bytes, chunks, or text.
    pub fn push_chunk(&mut self, data: &str) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.chunks += 1;
        let ev = sse::SseEvent {
            event: None,
            data: data.to_string(),
            line: 0,
        };
        let source = format!("{} chunk {}", self.source, self.chunks);
        let applied = chunk::parse(&source, &ev).and_then(|c| self.apply(c, 0));
        if applied.is_err() {
            self.ended = true;
        }
        applied
    }

    /// Text from a generator that hands over plain pieces (wllama's tokens).
    /// Refused past [`MAX_STEP_BYTES`] without a step end, which ends the stream.
    pub fn push_text(&mut self, text: &str) -> Result<()> {
        if self.ended || text.is_empty() {
            return Ok(());
        }
        let added = self.add_text(text.to_string(), 0);
        if added.is_err() {
            self.ended = true;
        }
        added
    }

    /// The generator says it is done (chunks or text given, no `[DONE]` to
    /// come): the last step and [`StreamItem::Finished`] come out.
    pub fn end(&mut self, finish_reason: Option<&str>) {
        if self.ended {
            return;
        }
        if let Some(r) = finish_reason {
            self.finish_reason = Some(r.to_string());
        }
        self.finish(true);
    }

    /// Says the body has ended: the items still due come out, then
    /// [`StreamItem::Finished`] or the error of a stream cut short.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Whether the stream has finished or failed.
    pub fn ended(&self) -> bool {
        self.ended && self.items.is_empty()
    }

    /// The next item, `None` when more bytes are needed (or the stream ended).
    pub fn next_item(&mut self) -> Option<Result<StreamItem>> {
        loop {
            if let Some(item) = self.items.pop_front() {
                return Some(Ok(item));
            }
            if self.ended {
                return None;
            }
            match self.advance() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.ended = true;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Reads one event (or the end); false when more bytes are needed.
    fn advance(&mut self) -> Result<bool> {
        let ev = match self.sse.next_event(&self.source)? {
            Some(ev) => ev,
            None if self.closed => match self.sse.finish(&self.source)? {
                Some(ev) => ev,
                None => {
                    self.end_of_body()?;
                    return Ok(true);
                }
            },
            None => return Ok(false),
        };
        let chunk = chunk::parse(&self.source, &ev)?;
        self.apply(chunk, ev.line)?;
        Ok(true)
    }

    /// Applies one chunk read at `line`.
    fn apply(&mut self, chunk: Chunk, line: usize) -> Result<()> {
        match chunk {
            Chunk::Done => self.finish(true),
            Chunk::Delta {
                content,
                reasoning,
                finish_reason,
                usage,
            } => {
                self.reasoning_bytes += reasoning.len();
                if finish_reason.is_some() {
                    self.finish_reason = finish_reason;
                }
                if usage.is_some() {
                    self.usage = usage;
                }
                if !content.is_empty() {
                    self.add_text(content, line)?;
                }
            }
        }
        Ok(())
    }

    /// Appends text and gives out every step it completes.
    fn add_text(&mut self, text: String, line: usize) -> Result<()> {
        self.pending.push_str(&text);
        self.items.push_back(StreamItem::Text { text });
        while let Some(end) = first_step_end(&self.pending) {
            self.cut(end);
        }
        if self.pending.len() > MAX_STEP_BYTES {
            return Err(Error::input(
                &self.source,
                line,
                None,
                format!(
                    "a step of more than {MAX_STEP_BYTES} bytes without a blank line: \
                     stopped reading"
                ),
            ));
        }
        Ok(())
    }

    /// Gives out the steps of `pending[..end]` (the blank-line segmenter's)
    /// and drops those bytes.
    fn cut(&mut self, end: usize) {
        for s in Segmenter::BlankLine.segment(&self.pending[..end]) {
            // Every segmenter step has its span (segment.rs's contract).
            let (start, end) = s.span.map_or((0, 0), |sp| (sp.start, sp.end));
            self.items.push_back(StreamItem::Step {
                step: self.steps,
                text: s.text,
                start: self.offset + start,
                end: self.offset + end,
            });
            self.steps += 1;
        }
        self.pending.drain(..end);
        self.offset += end;
    }

    /// The body ended without `[DONE]`: complete after a `finish_reason`, else cut off.
    fn end_of_body(&mut self) -> Result<()> {
        if self.finish_reason.is_some() {
            self.finish(false);
            return Ok(());
        }
        Err(Error::input(
            &self.source,
            self.sse.line(),
            None,
            format!(
                "the stream ended before its end (no `[DONE]` and no `finish_reason`): \
                 the connection was closed early; the last {} byte(s) of text are not a \
                 step and were not scored",
                self.pending.len()
            ),
        ))
    }

    fn finish(&mut self, done: bool) {
        let end = self.pending.len();
        self.cut(end);
        self.items.push_back(StreamItem::Finished(Finish {
            finish_reason: self.finish_reason.take(),
            done,
            usage: self.usage.take(),
            steps: self.steps,
            text_bytes: self.offset,
            reasoning_bytes: self.reasoning_bytes,
        }));
        self.ended = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]})
        )
    }

    /// Every item of `pieces`, then the error if one ended the stream.
    fn run(pieces: &[&[u8]]) -> (Vec<StreamItem>, Option<String>) {
        let mut s = StepStream::new("s");
        let mut items = Vec::new();
        let drain = |s: &mut StepStream, items: &mut Vec<StreamItem>| {
            while let Some(item) = s.next_item() {
                match item {
                    Ok(i) => items.push(i),
                    Err(e) => return Some(e.to_string()),
                }
            }
            None
        };
        for p in pieces {
            s.push(p);
            if let Some(e) = drain(&mut s, &mut items) {
                return (items, Some(e));
            }
        }
        s.close();
        let e = drain(&mut s, &mut items);
        (items, e)
    }

    fn steps(items: &[StreamItem]) -> Vec<(String, usize, usize)> {
        items
            .iter()
            .filter_map(|i| match i {
                StreamItem::Step {
                    text, start, end, ..
                } => Some((text.clone(), *start, *end)),
                _ => None,
            })
            .collect()
    }

    fn body(contents: &[&str]) -> String {
        let mut b: String = contents.iter().map(|c| chunk(c)).collect();
        b.push_str(
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        );
        b
    }

    #[test]
    fn steps_come_out_as_they_complete_and_match_the_segmenter() {
        let contents = [
            "First, 2 +",
            " 2 = 4.\n",
            "\nThen ×2",
            " é.\n\n\n",
            "So 8.",
            "\n \nDone",
        ];
        let text: String = contents.concat();
        let b = body(&contents);
        let (items, err) = run(&[b.as_bytes()]);
        assert_eq!(err, None);
        let want: Vec<(String, usize, usize)> = Segmenter::BlankLine
            .segment(&text)
            .into_iter()
            .map(|s| (s.text, s.span.unwrap().start, s.span.unwrap().end))
            .collect();
        assert_eq!(steps(&items), want);
        for (t, s, e) in &want {
            assert_eq!(&text[*s..*e], t);
        }
        // The first step is out before the chunk that starts the second one.
        let first_step = items
            .iter()
            .position(|i| matches!(i, StreamItem::Step { .. }))
            .unwrap();
        let texts_before: String = items[..first_step]
            .iter()
            .filter_map(|i| match i {
                StreamItem::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts_before, "First, 2 + 2 = 4.\n\nThen ×2");
        let Some(StreamItem::Finished(f)) = items.last() else {
            panic!("{items:?}")
        };
        assert_eq!(
            (f.finish_reason.as_deref(), f.done, f.steps, f.text_bytes),
            (Some("stop"), true, 4, text.len())
        );
    }

    #[test]
    fn any_split_of_the_bytes_gives_the_same_items() {
        // CRLF framing and keep-alive comments, as sse-starlette writes them.
        let b = body(&["Naïve step.\n\n", "Ünïcödé ✓ step.\n\nLast"])
            .replace("\n\n", "\r\n\r\n")
            .replacen("data:", ": ping - 2026-01-01\r\n\r\ndata:", 2);
        let bytes = b.as_bytes();
        let (want, err) = run(&[bytes]);
        assert_eq!(err, None);
        assert_eq!(steps(&want).len(), 3);
        let squash = |items: Vec<StreamItem>| -> Vec<StreamItem> {
            // Text pieces depend on the split; their concatenation does not.
            let mut out: Vec<StreamItem> = Vec::new();
            for i in items {
                match (out.last_mut(), i) {
                    (Some(StreamItem::Text { text: a }), StreamItem::Text { text: b }) => {
                        a.push_str(&b)
                    }
                    (_, i) => out.push(i),
                }
            }
            out
        };
        let want = squash(want);
        for cut in 1..bytes.len() {
            for cut2 in [cut + 1, cut + 7, bytes.len()] {
                let cut2 = cut2.min(bytes.len());
                let (got, err) = run(&[&bytes[..cut], &bytes[cut..cut2], &bytes[cut2..]]);
                assert_eq!(err, None, "split at {cut}/{cut2}");
                assert_eq!(squash(got), want, "split at {cut}/{cut2}");
            }
        }
    }

    #[test]
    fn errors_end_the_stream_after_the_steps_before_them() {
        let mut b = chunk("One.\n\nTwo");
        b.push_str(
            "data: {\"error\":{\"code\":500,\"message\":\"boom\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n",
        );
        let (items, err) = run(&[b.as_bytes()]);
        assert_eq!(steps(&items), vec![("One.".to_string(), 0, 4)]);
        assert_eq!(
            err.as_deref(),
            Some("s line 3, field `error`: the server sent an error: boom (type `server_error`, code 500)")
        );
        // Cut off: no [DONE], no finish_reason.
        let (items, err) = run(&[chunk("One.\n\nTwo").as_bytes()]);
        assert_eq!(steps(&items).len(), 1);
        assert!(err
            .unwrap()
            .starts_with("s line 2: the stream ended before its end"));
        // A finish_reason without [DONE] is a complete stream.
        let b = format!(
            "{}data: {{\"choices\":[{{\"delta\":{{}},\"finish_reason\":\"length\"}}]}}\n\n",
            chunk("One.\n\nTwo")
        );
        let (items, err) = run(&[b.as_bytes()]);
        assert_eq!(err, None);
        assert_eq!(steps(&items).len(), 2);
        assert!(matches!(
            items.last(),
            Some(StreamItem::Finished(Finish { done: false, .. }))
        ));
        // Malformed JSON mid-stream names its line.
        let b = format!("{}data: {{\"choices\": [\n\n", chunk("One.\n\n"));
        let (_, err) = run(&[b.as_bytes()]);
        assert!(err.unwrap().starts_with("s line 3: not JSON"));
    }

    #[test]
    fn chunks_and_text_without_framing_give_the_same_steps() {
        let contents = ["One ", "step.\n", "\nTwo.", "\n\nThree"];
        let (from_bytes, _) = run(&[body(&contents).as_bytes()]);
        let mut by_chunk = StepStream::new("s");
        let mut by_text = StepStream::new("s");
        for c in contents {
            let chunk = serde_json::json!({"choices": [{"delta": {"content": c}}]});
            by_chunk.push_chunk(&chunk.to_string()).unwrap();
            by_text.push_text(c).unwrap();
        }
        by_chunk
            .push_chunk(r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#)
            .unwrap();
        by_chunk.push_chunk("[DONE]").unwrap();
        by_text.end(Some("stop"));
        for s in [&mut by_chunk, &mut by_text] {
            let items: Vec<StreamItem> = std::iter::from_fn(|| s.next_item())
                .map(Result::unwrap)
                .collect();
            assert_eq!(items, from_bytes);
            assert!(s.ended());
        }
        let mut bad = StepStream::new("s");
        bad.push_chunk(r#"{"choices":[]}"#).unwrap();
        let e = bad
            .push_chunk(r#"{"choices":[{"delta":{"content":1}}]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "s chunk 2, field `choices[0].delta.content`: must be a string or null"
        );
        assert!(bad.next_item().is_none() && bad.ended());
    }

    #[test]
    fn an_endless_step_is_refused() {
        let big = "x".repeat(MAX_STEP_BYTES / 2 + 1);
        let b = format!("{}{}", chunk(&big), chunk(&big));
        let (items, err) = run(&[b.as_bytes()]);
        assert!(steps(&items).is_empty());
        assert!(err.unwrap().starts_with("s line 3: a step of more than"));
    }
}
