//! Server-sent events (the WHATWG `EventSource` framing) from bytes that
//! arrive in pieces of any size: lines end at CRLF, LF or a lone CR (a CR
//! at the end of a piece waits for the next one, which may start with its
//! LF); a line starting with `:` is a comment (servers' keep-alive pings);
//! `field: value` lines build an event and a blank line dispatches it.
//! Line terminators are ASCII, so a piece that ends inside a UTF-8
//! character never splits a line; each whole line must be UTF-8.
//!
//! Two departures from the browser's reader, both so nothing is dropped or
//! rewritten quietly: invalid UTF-8 is an error (a browser would write
//! U+FFFD), and at the end of the input a last line without its terminator
//! and an event without its blank line are still read (a browser discards
//! them), so a truncated chunk fails loudly as malformed JSON.

use crate::{Error, Result};

/// Longest line and longest event data kept in memory (as the JSONL reader's line limit).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// One dispatched event: its `event:` type, its data lines joined by `\n`,
/// and the 1-based line its first field was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
    pub line: usize,
}

/// The framing state between pieces.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// Bytes received and not yet read as lines, from `start`.
    buf: Vec<u8>,
    start: usize,
    /// The last line ended with a CR that was the last byte received: an
    /// LF arriving next belongs to it.
    after_cr: bool,
    /// Lines read so far (the last one's number).
    line: usize,
    /// The event being built (data, type, first line).
    data: Option<String>,
    event: Option<String>,
    first_line: usize,
    /// Whether the stream's start (where a byte-order mark may sit) was seen.
    started: bool,
}

impl SseDecoder {
    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The last line number read (where an error at the end of the input sits).
    pub fn line(&self) -> usize {
        self.line
    }

    /// The next event whose lines have all arrived, `None` until more bytes
    /// come. `source` names the stream in errors.
    pub fn next_event(&mut self, source: &str) -> Result<Option<SseEvent>> {
        while let Some(line) = self.next_line(source)? {
            if let Some(ev) = self.read_line(source, line)? {
                return Ok(Some(ev));
            }
        }
        Ok(None)
    }

    /// The end of the input: the last unterminated line and the last
    /// undispatched event, if any (see the module docs).
    pub fn finish(&mut self, source: &str) -> Result<Option<SseEvent>> {
        if self.start < self.buf.len() {
            let rest = self.buf.split_off(self.start);
            self.buf.clear();
            self.start = 0;
            if let Some(ev) = self.read_line(source, rest)? {
                return Ok(Some(ev));
            }
        }
        Ok(self.dispatch())
    }

    /// Splits off the next whole line (without its terminator).
    fn next_line(&mut self, source: &str) -> Result<Option<Vec<u8>>> {
        if !self.started {
            // A byte-order mark may open the stream; wait until it can be told apart.
            let bom = b"\xEF\xBB\xBF";
            let have = &self.buf[self.start..];
            if have.len() < bom.len() && bom.starts_with(have) {
                return Ok(None);
            }
            if have.starts_with(bom) {
                self.start += bom.len();
            }
            self.started = true;
        }
        if self.after_cr && self.start < self.buf.len() {
            if self.buf[self.start] == b'\n' {
                self.start += 1;
            }
            self.after_cr = false;
        }
        let rest = &self.buf[self.start..];
        let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
            if rest.len() > MAX_LINE_BYTES {
                return Err(Error::input(
                    source,
                    self.line + 1,
                    None,
                    format!(
                        "no line break in {} bytes (the limit is {MAX_LINE_BYTES}): \
                         this is not a server-sent event stream",
                        rest.len()
                    ),
                ));
            }
            return Ok(None);
        };
        let line = rest[..i].to_vec();
        let mut used = i + 1;
        if rest[i] == b'\r' {
            match rest.get(i + 1) {
                Some(b'\n') => used += 1,
                Some(_) => {}
                None => self.after_cr = true,
            }
        }
        self.start += used;
        Ok(Some(line))
    }

    /// Applies one line; a blank line dispatches the event being built.
    fn read_line(&mut self, source: &str, bytes: Vec<u8>) -> Result<Option<SseEvent>> {
        self.line += 1;
        let line_no = self.line;
        let line = String::from_utf8(bytes).map_err(|e| {
            Error::input(
                source,
                line_no,
                None,
                format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to() + 1),
            )
        })?;
        if line.len() > MAX_LINE_BYTES {
            return Err(Error::input(
                source,
                line_no,
                None,
                format!(
                    "a line of {} bytes (the limit is {MAX_LINE_BYTES})",
                    line.len()
                ),
            ));
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (name, value) = match line.split_once(':') {
            Some((n, v)) => (n, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match name {
            "data" => {
                if self.first_line == 0 {
                    self.first_line = line_no;
                }
                // Data lines join with `\n`.
                match &mut self.data {
                    Some(data) if data.len() + value.len() + 1 > MAX_LINE_BYTES => {
                        return Err(Error::input(
                            source,
                            line_no,
                            None,
                            format!("an event's data passes {MAX_LINE_BYTES} bytes"),
                        ));
                    }
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => self.data = Some(value.to_string()),
                }
            }
            "event" => {
                self.event = Some(value.to_string());
                if self.first_line == 0 {
                    self.first_line = line_no;
                }
            }
            // Older llama.cpp servers wrote a failure as an `error:` line,
            // a field the standard ignores: read it as an error event.
            "error" => {
                self.event = Some("error".into());
                self.data = Some(value.to_string());
                self.first_line = line_no;
            }
            // Reconnection fields: this reader never reconnects.
            "id" | "retry" => {}
            _ if line.trim_start().starts_with(['{', '[']) => {
                return Err(Error::input(
                    source,
                    line_no,
                    None,
                    format!(
                        "a JSON line where a server-sent event field belongs: the server \
                         answered without streaming (was `stream: true` sent?) or with an \
                         error body: {}",
                        preview(&line)
                    ),
                ));
            }
            // The standard ignores unknown fields.
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        let line = std::mem::take(&mut self.first_line);
        let data = self.data.take()?;
        Some(SseEvent { event, data, line })
    }
}

/// The first 200 characters of `text`, for a message.
pub(crate) fn preview(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(pieces: &[&[u8]]) -> Result<Vec<SseEvent>> {
        let mut d = SseDecoder::default();
        let mut out = Vec::new();
        for p in pieces {
            d.push(p);
            while let Some(ev) = d.next_event("s")? {
                out.push(ev);
            }
        }
        out.extend(d.finish("s")?);
        Ok(out)
    }

    fn ev(data: &str, line: usize) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
            line,
        }
    }

    #[test]
    fn every_line_terminator_and_every_split_give_the_same_events() {
        let text = "data: a\n\n: ping\r\ndata:b\r\ndata:  c\r\rdata: é\n\n";
        let want = vec![ev("a", 1), ev("b\n c", 4), ev("é", 7)];
        let bytes = text.as_bytes();
        assert_eq!(events_of(&[bytes]).unwrap(), want);
        for cut in 1..bytes.len() {
            let got = events_of(&[&bytes[..cut], &bytes[cut..]]).unwrap();
            assert_eq!(got, want, "split at byte {cut}");
        }
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(events_of(&one_by_one).unwrap(), want);
    }

    #[test]
    fn a_byte_order_mark_and_field_forms() {
        let got = events_of(&[
            b"\xEF\xBB",
            b"\xBFevent: x\ndata\nid: 3\nretry: 9\nfoo: 1\n\n",
        ])
        .unwrap();
        assert_eq!(
            got,
            vec![SseEvent {
                event: Some("x".into()),
                data: String::new(),
                line: 1
            }]
        );
        // A blank line without data dispatches nothing.
        assert!(events_of(&[b"event: x\n\n\n"]).unwrap().is_empty());
    }

    #[test]
    fn an_error_line_is_an_error_event() {
        let got = events_of(&[b"error: {\"message\": \"boom\"}\n\n"]).unwrap();
        assert_eq!(got[0].event.as_deref(), Some("error"));
        assert_eq!(got[0].data, "{\"message\": \"boom\"}");
    }

    #[test]
    fn the_end_of_the_input_reads_what_is_left() {
        assert_eq!(
            events_of(&[b"data: [DONE]"]).unwrap(),
            vec![ev("[DONE]", 1)]
        );
        assert_eq!(events_of(&[b"data: x\n"]).unwrap(), vec![ev("x", 1)]);
    }

    #[test]
    fn bad_bytes_are_errors_naming_the_line() {
        let e = events_of(&[b"data: a\n\ndata: \xff\n\n"]).unwrap_err();
        assert_eq!(e.to_string(), "s line 3: not UTF-8 (byte 7)");
        let e = events_of(&[b": hi\n{\"error\": {\"message\": \"no\"}}\n"]).unwrap_err();
        assert!(
            e.to_string().starts_with("s line 2: a JSON line where"),
            "{e}"
        );
        let mut d = SseDecoder::default();
        d.push(&vec![b'x'; MAX_LINE_BYTES + 1]);
        let e = d.next_event("s").unwrap_err();
        assert!(e.to_string().contains("no line break"), "{e}");
    }
}
