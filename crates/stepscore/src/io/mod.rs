//! Reading traces from JSON / JSONL and writing JSONL.
//!
//! Input layout, decided from the first non-whitespace byte (after an
//! optional UTF-8 BOM):
//! - `[`: one JSON array of rows, read whole but bounded by
//!   [`ReadOptions::max_document_bytes`]. It is validated without building a
//!   value tree and its items are then parsed one at a time, so memory is the
//!   document's bytes plus one row; each item obeys the record limit
//!   ([`ReadOptions::max_line_bytes`]) like a JSONL line, and is located by
//!   the physical line it starts on and its 1-based item number. A syntax
//!   error anywhere in the array ends the read (the array cannot be
//!   resynchronised), reported at its physical line. Input after the
//!   array's closing `]` (JSONL lines, another array) is read on by these
//!   same rules, its rows located by their own lines.
//! - anything else: JSONL, streamed one line at a time with at most
//!   [`ReadOptions::max_line_bytes`] of a line in memory; blank lines are
//!   skipped, line numbers are physical lines. An over-long line is skipped
//!   to its end; when no line break comes within
//!   [`ReadOptions::max_document_bytes`], the input is not JSON Lines and the
//!   read ends with an error.
//! - pretty-printed JSON objects: when the first record line starts with `{`
//!   and ends mid-value (an EOF-type JSON error), the document is read whole
//!   (bounded) and parsed as a sequence of JSON values; each row's "line" is
//!   the line its object starts on. If that parse fails, or the document is
//!   over the limit, the first line's error is reported and reading goes on
//!   line by line from line 2, so no later record is lost.
//!
//! A bad row yields an [`Error::Input`] naming source, line (array item), id
//! and field, and the reader moves on to the next row. Only an I/O error, a
//! broken array or a line without end ends the iteration. Duplicate keys in
//! an object are an error (serde_json would keep the last one silently), and
//! step scores are checked as they are read ([`crate::validate`]).
//! [`TraceReader::records`] yields each trace with its [`Location`], for
//! errors found later (a trace that cannot be scored, an unlabelled row).
//!
//! Row formats (see [`InputFormat`]) are detected per row in `Auto` mode:
//! `messages` -> chat, `completions` -> TRL, `steps` of objects -> native,
//! `steps` of strings -> ProcessBench, `response` -> raw text. Every format
//! also takes `id`, `final_answer`/`finalAnswer`/`answer`,
//! `reference_answer`/`referenceAnswer`/`gold`/`ground_truth` and `scores`
//! (one number or null per step); any other field is kept in
//! `Trace::metadata`.
//!
//! This is the one trace reader of every front end: the CLI reads files
//! with it, Python and the reward server hand it JSONL, and the wasm
//! bindings hand it a file's text ([`read_text`], the npm package's
//! `readTraces`) or a JS object ([`read_value`]). [`ReadResult`], [`Record`]
//! and [`BadRow`] serialize to what `stepscore read` prints and
//! `readTraces` returns. Problem rows for generation and search
//! ([`TraceReader::problems`], `problems.rs`) come through the same layouts,
//! limits and strict parser; only the row conversion differs.

mod chat;
mod fields;
mod lines;
mod problems;
mod rows;
mod strict;

use problems::read_problem;
pub use problems::ProblemRow;

pub use fields::type_name as json_type_name;

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Chain, Cursor, Read, Write};
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;
use serde_json::Value;

use crate::segment::Segmenter;
use crate::trace::Trace;
use crate::{Error, Location, Result};
use lines::{read_bounded_line, LineRead};

/// The shape of the input rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InputFormat {
    /// Decide per row from its fields.
    #[default]
    Auto,
    /// The serde form of [`Trace`] (steps are objects).
    Native,
    /// `{problem, steps: [string], label: int}` (label = first wrong step or -1).
    ProcessBench,
    /// TRL stepwise supervision: `{prompt, completions: [string], labels: [bool]}`.
    Trl,
    /// `{problem | question | prompt, response}`, segmented by the reader's segmenter.
    Raw,
    /// OpenAI-style `{messages: [...]}`.
    Chat,
    /// PRM800K's step rows: `{problem, prefix: [string], step, rating}`, one
    /// rated step after the solution's earlier steps (see `rows.rs`).
    Prm800k,
}

impl InputFormat {
    pub const ALL: [InputFormat; 7] = [
        InputFormat::Auto,
        InputFormat::Native,
        InputFormat::ProcessBench,
        InputFormat::Trl,
        InputFormat::Raw,
        InputFormat::Chat,
        InputFormat::Prm800k,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            InputFormat::Auto => "auto",
            InputFormat::Native => "native",
            InputFormat::ProcessBench => "processbench",
            InputFormat::Trl => "trl",
            InputFormat::Raw => "raw",
            InputFormat::Chat => "chat",
            InputFormat::Prm800k => "prm800k",
        }
    }
}

impl Serialize for InputFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for InputFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "auto" => Ok(InputFormat::Auto),
            "native" | "stepscore" => Ok(InputFormat::Native),
            "processbench" => Ok(InputFormat::ProcessBench),
            "trl" => Ok(InputFormat::Trl),
            "raw" | "text" => Ok(InputFormat::Raw),
            "chat" | "messages" => Ok(InputFormat::Chat),
            "prm800k" => Ok(InputFormat::Prm800k),
            _ => Err(Error::InvalidArgument(format!(
                "unknown input format `{s}` (expected one of auto, native, processbench, trl, raw, chat, prm800k)"
            ))),
        }
    }
}

/// How [`TraceReader`] reads its input.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub format: InputFormat,
    /// Cuts `response` text into steps for raw rows.
    pub segmenter: Segmenter,
    /// The record limit: the longest JSONL line kept in memory, and the
    /// largest item of a JSON array; longer records are skipped with an
    /// error. Default 16 MiB.
    pub max_line_bytes: usize,
    /// The largest whole JSON document (array, pretty-printed objects) read
    /// into memory, and how far an over-long line is skipped looking for its
    /// end. Default 256 MiB.
    pub max_document_bytes: usize,
    /// Names the input in errors: a file path, or `<stdin>`.
    pub source_name: String,
}

const DEFAULT_SOURCE: &str = "<input>";

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            format: InputFormat::Auto,
            segmenter: Segmenter::Auto,
            max_line_bytes: 16 << 20,
            max_document_bytes: 256 << 20,
            source_name: DEFAULT_SOURCE.to_string(),
        }
    }
}

enum State {
    /// Nothing read yet: the layout is still to be detected.
    Start,
    /// Streaming JSONL.
    Lines,
    /// A validated JSON array held as bytes, with its items' byte ranges.
    Array {
        doc: Vec<u8>,
        items: std::vec::IntoIter<(usize, usize)>,
        item_no: usize,
        /// The line (absolute) of byte `offset` of `doc`, advanced item by
        /// item so numbering all items costs one pass over the document.
        line: usize,
        offset: usize,
    },
    /// Pretty-printed rows read whole, each with the line it starts on and
    /// its byte range in the document.
    Items {
        doc: Vec<u8>,
        items: std::vec::IntoIter<(usize, usize, usize)>,
    },
    Done,
}

/// One good trace, where it was read and the row format it was read as.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    pub at: Location,
    /// Never `Auto`: the format detected for this row.
    pub format: InputFormat,
    pub trace: Trace,
}

/// A bad row's error as data: its place (source, line, item, id, field),
/// the message, and `text`, the whole error as the CLI prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadRow {
    pub at: Location,
    pub message: String,
    pub text: String,
}

impl BadRow {
    /// The row error in `e`; any other error (I/O, ...) is given back.
    pub fn from_error(e: Error) -> std::result::Result<BadRow, Error> {
        let text = e.to_string();
        match e {
            Error::Input { location, message } => Ok(BadRow {
                at: location,
                message,
                text,
            }),
            other => Err(other),
        }
    }
}

/// Every row of an input: the good ones and the bad ones' errors, each in
/// input order.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct ReadResult {
    pub records: Vec<Record>,
    pub errors: Vec<BadRow>,
}

/// Reads a whole in-memory input (a file's text) with [`TraceReader`]:
/// bad rows land in `errors` and the rest is read on. Fails only on an
/// error that is not about a row (which in-memory input never has).
pub fn read_text(text: &[u8], opts: ReadOptions) -> Result<ReadResult> {
    let mut out = ReadResult::default();
    for item in TraceReader::new(Cursor::new(text), opts).records() {
        match item {
            Ok(record) => out.records.push(record),
            Err(e) => out.errors.push(BadRow::from_error(e)?),
        }
    }
    Ok(out)
}

/// One row handed in as a JSON value (a binding's argument rather than a
/// line of text): the same conversion and errors as a row of a file,
/// located at `at` with the row's id added (`line` 0 for "not from text").
/// Only `format` and `segmenter` of `opts` apply.
pub fn read_value(value: Value, opts: &ReadOptions, mut at: Location) -> Result<Record> {
    at.id = row_id(&value);
    match rows::row_to_trace(value, opts.format, &opts.segmenter) {
        Ok((format, trace)) => Ok(Record { at, format, trace }),
        Err(p) => Err(Error::input_at(at.with_field(p.field), p.message)),
    }
}

/// One row handed in as JSON text (an item of a request body): parsed by
/// the same strict parser as a line of a file (duplicate keys refused, the
/// number text kept as the parser keeps it), then [`read_value`]. A row
/// that is not an object (an array, a string) is this row's error.
pub fn read_row(json: &[u8], opts: &ReadOptions, at: Location) -> Result<Record> {
    read_value(parse_row(json, &at)?, opts, at)
}

/// JSON text that is not a row (a streamed completion's chunk): duplicate
/// keys refused at any depth, numbers as serde_json reads them. The error
/// is serde_json's, with the path of a duplicated key.
pub(crate) fn parse_unique_keys(
    json: &[u8],
) -> std::result::Result<Value, (Option<String>, serde_json::Error)> {
    strict::unique_keys(json).map_err(|e| (e.field, e.json))
}

/// One row's JSON text as a value, by the strict parser (duplicate keys
/// refused, numbers kept or refused, never rounded); its error is located
/// at `at`.
fn parse_row(json: &[u8], at: &Location) -> Result<Value> {
    strict::from_slice(json).map_err(|e| parse_error(at.clone(), e))
}

/// Streams traces out of JSON or JSONL; see the module docs for the layout
/// rules. Yields one `Result` per row; bad rows do not stop the iteration.
pub struct TraceReader<R: BufRead> {
    // The cursor holds bytes already read while probing for a whole
    // document, replayed before the rest of `R`. `None` only transiently.
    src: Option<Chain<Cursor<Vec<u8>>, R>>,
    opts: ReadOptions,
    state: State,
    /// Lines consumed so far; the line being read is `line_no + 1`.
    line_no: usize,
    buf: Vec<u8>,
    /// No record line has been seen yet (the pretty-document fallback applies).
    first_record: bool,
    starts_with_brace: bool,
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(reader: R, opts: ReadOptions) -> Self {
        TraceReader {
            src: Some(Cursor::new(Vec::new()).chain(reader)),
            opts,
            state: State::Start,
            line_no: 0,
            buf: Vec::new(),
            first_record: true,
            starts_with_brace: false,
        }
    }

    /// The options this reader was built with.
    pub fn options(&self) -> &ReadOptions {
        &self.opts
    }

    /// The same rows, each good one with its [`Location`].
    pub fn records(self) -> Records<R> {
        Records(self)
    }

    fn source(&self) -> &str {
        &self.opts.source_name
    }

    fn at(&self, line: usize, item: Option<usize>) -> Location {
        Location {
            source: self.source().to_string(),
            line,
            item,
            ..Default::default()
        }
    }

    /// The error for a record over the record limit.
    fn too_long(&self, at: Location, what: &str, len: u64) -> Error {
        Error::input_at(
            at,
            format!(
                "{what} of {len} bytes is longer than the {}-byte limit on a record \
                 (--max-line-bytes); skipped",
                self.opts.max_line_bytes
            ),
        )
    }

    fn io_error(&mut self, e: std::io::Error) -> Error {
        self.state = State::Done;
        Error::io(self.source(), e)
    }

    /// Skips a BOM and leading whitespace (counting lines), then picks the layout.
    fn start(&mut self) -> Result<()> {
        let Some(src) = self.src.as_mut() else {
            self.state = State::Done;
            return Ok(());
        };
        let mut first: Option<u8> = None;
        let (mut at_start, mut gzip) = (true, false);
        while first.is_none() {
            let chunk = match src.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(e)),
            };
            if chunk.is_empty() {
                break;
            }
            let mut skip = 0;
            if at_start && chunk.starts_with(b"\xEF\xBB\xBF") {
                skip = 3;
            }
            // gzip's magic bytes: compressed input (stdin, or a file without
            // `.gz`) is one error here, not an "invalid UTF-8" per line.
            if at_start && chunk.starts_with(&[0x1f, 0x8b]) {
                gzip = true;
                break;
            }
            at_start = false;
            while let Some(&b) = chunk.get(skip) {
                if !b.is_ascii_whitespace() {
                    first = Some(b);
                    break;
                }
                if b == b'\n' {
                    self.line_no += 1;
                }
                skip += 1;
            }
            src.consume(skip);
        }
        if gzip {
            self.state = State::Done;
            return Err(Error::input(
                self.source(),
                self.line_no + 1,
                None,
                "the input is gzip-compressed; decompress it first (`zcat FILE | stepscore ...`) \
                 or give the file a `.gz` name, which is decompressed as it is read",
            ));
        }
        match first {
            None => self.state = State::Done,
            Some(b'[') => self.read_array()?,
            Some(b) => {
                self.starts_with_brace = b == b'{';
                self.state = State::Lines;
            }
        }
        Ok(())
    }

    /// Reads the rest of the input, at most `max_document_bytes`, into `doc`.
    /// `Ok(false)` when the input is longer than that.
    fn read_rest(&mut self, doc: &mut Vec<u8>) -> Result<bool> {
        let limit = self.opts.max_document_bytes;
        let Some(src) = self.src.as_mut() else {
            return Ok(true);
        };
        let room = (limit.saturating_sub(doc.len()) as u64).saturating_add(1);
        match src.by_ref().take(room).read_to_end(doc) {
            Ok(_) => Ok(doc.len() <= limit),
            Err(e) => Err(self.io_error(e)),
        }
    }

    fn read_array(&mut self) -> Result<()> {
        let base = self.line_no;
        let mut doc = Vec::new();
        self.state = State::Done;
        if !self.read_rest(&mut doc)? {
            return Err(Error::input(
                self.source(),
                base + 1,
                None,
                format!(
                    "the JSON array is larger than the {}-byte document limit; use JSONL for large inputs",
                    self.opts.max_document_bytes
                ),
            ));
        }
        if let Err(e) = std::str::from_utf8(&doc) {
            let (line, col) = line_col(&doc, e.valid_up_to());
            return Err(Error::input(
                self.source(),
                base + line,
                None,
                format!("invalid UTF-8 at byte offset {col} of the line (in the JSON array)"),
            ));
        }
        // Validate without building a tree, then hand out one item at a time:
        // memory stays at the document's bytes plus one row. Only the first
        // value is the array: what follows it (JSONL lines, another array)
        // is read on from `Start`, so its good rows count and its bad ones
        // are reported with their own lines.
        let mut stream =
            serde_json::Deserializer::from_slice(&doc).into_iter::<serde::de::IgnoredAny>();
        let first = stream.next().unwrap_or_else(|| serde_json::from_slice(b""));
        let end = stream.byte_offset();
        match first {
            Ok(_) => {
                let rest = doc.split_off(end);
                self.line_no = base + doc.iter().filter(|&&b| b == b'\n').count();
                if let Some(src) = self.src.take() {
                    let (_, r) = src.into_inner();
                    self.src = Some(Cursor::new(rest).chain(r));
                }
                let items = array_items(&doc);
                self.state = State::Array {
                    doc,
                    items: items.into_iter(),
                    item_no: 0,
                    line: base + 1,
                    offset: 0,
                };
                Ok(())
            }
            Err(e) => Err(Error::input(
                self.source(),
                base + e.line(),
                None,
                format!(
                    "invalid JSON array, column {}: {}",
                    e.column(),
                    json_message(&e)
                ),
            )),
        }
    }

    /// The next JSONL row, parsed, or `None` at the end of the input.
    fn next_line(&mut self) -> Option<Result<(Location, Value)>> {
        loop {
            let src = self.src.as_mut()?;
            let outcome = match read_bounded_line(
                src,
                &mut self.buf,
                self.opts.max_line_bytes,
                self.opts.max_document_bytes as u64,
            ) {
                Ok(o) => o,
                Err(e) => return Some(Err(self.io_error(e))),
            };
            let line = self.line_no + 1;
            match outcome {
                LineRead::Eof => {
                    self.state = State::Done;
                    return None;
                }
                LineRead::TooLong { len } => {
                    self.line_no = line;
                    self.first_record = false;
                    return Some(Err(self.too_long(self.at(line, None), "line", len)));
                }
                LineRead::Unterminated { len } => {
                    self.state = State::Done;
                    return Some(Err(Error::input(
                        self.source(),
                        line,
                        None,
                        format!(
                            "no line break in {len} bytes (the record limit is {} bytes, \
                             --max-line-bytes): this is not JSON Lines; stopped reading",
                            self.opts.max_line_bytes
                        ),
                    )));
                }
                LineRead::Line => self.line_no = line,
            }
            let text = match std::str::from_utf8(&self.buf) {
                Ok(t) => t,
                Err(e) => {
                    self.first_record = false;
                    return Some(Err(Error::input(
                        self.source(),
                        line,
                        None,
                        format!(
                            "invalid UTF-8 at byte offset {} of the line",
                            e.valid_up_to()
                        ),
                    )));
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            let first = std::mem::replace(&mut self.first_record, false);
            return Some(match strict::from_slice(text.as_bytes()) {
                Ok(v) => Ok((self.at(line, None), v)),
                Err(e) => {
                    let eof =
                        e.field.is_none() && e.json.classify() == serde_json::error::Category::Eof;
                    let err = parse_error(self.at(line, None), e);
                    if first && self.starts_with_brace && eof {
                        match self.try_document(line) {
                            Ok(true) => return self.next_value(),
                            Ok(false) => Err(err),
                            Err(io) => Err(io),
                        }
                    } else {
                        Err(err)
                    }
                }
            });
        }
    }

    /// The first line (in `buf`, numbered `line`) opened a JSON value it did
    /// not close: tries the whole input as pretty-printed JSON values.
    /// `Ok(true)` when that worked (state is now `Items`); `Ok(false)` when it
    /// did not and line-by-line reading resumes after the first line.
    fn try_document(&mut self, line: usize) -> Result<bool> {
        let first_len = self.buf.len();
        let mut doc = std::mem::take(&mut self.buf);
        doc.push(b'\n');
        let complete = self.read_rest(&mut doc)?;
        if complete {
            if let Some(items) = value_ranges(&doc, line) {
                self.state = State::Items {
                    doc,
                    items: items.into_iter(),
                };
                return Ok(true);
            }
        }
        // Replay everything after the first line, then the rest of the input.
        let rest = doc.split_off(first_len + 1);
        if let Some(src) = self.src.take() {
            let (_, r) = src.into_inner();
            self.src = Some(Cursor::new(rest).chain(r));
        }
        Ok(false)
    }

    /// One item of a whole document (array element or pretty-printed
    /// value): the record limit, then the strict parse.
    fn item(&self, at: Location, bytes: &[u8]) -> Result<(Location, Value)> {
        if bytes.len() > self.opts.max_line_bytes {
            let what = if at.item.is_some() {
                "array item"
            } else {
                "record"
            };
            return Err(self.too_long(at, what, bytes.len() as u64));
        }
        let value = parse_row(bytes, &at)?;
        Ok((at, value))
    }

    /// The next row: a good trace with its location, or a bad row's error.
    fn next_record(&mut self) -> Option<Result<Record>> {
        let row = self.next_value()?;
        Some(row.and_then(|(at, v)| read_value(v, &self.opts, at)))
    }

    /// The next row as a problem to write a solution to (generation,
    /// search): a good one with its location, or a bad row's error.
    fn next_problem(&mut self) -> Option<Result<ProblemRow>> {
        let row = self.next_value()?;
        Some(row.and_then(|(at, v)| read_problem(v, at)))
    }

    /// The same rows read as problems ([`read_problem`]): the layouts,
    /// limits and strict parsing of traces, and their errors.
    pub fn problems(self) -> Problems<R> {
        Problems(self)
    }

    /// The next row parsed by the strict parser, with where it was read:
    /// what every kind of row is converted from.
    fn next_value(&mut self) -> Option<Result<(Location, Value)>> {
        loop {
            match &mut self.state {
                State::Start => {
                    if let Err(e) = self.start() {
                        return Some(Err(e));
                    }
                }
                State::Lines => return self.next_line(),
                State::Array {
                    doc,
                    items,
                    item_no,
                    line,
                    offset,
                } => match items.next() {
                    Some((a, b)) => {
                        *item_no += 1;
                        let passed = doc.get(*offset..a).unwrap_or_default();
                        *line += passed.iter().filter(|&&c| c == b'\n').count();
                        *offset = a;
                        let at = Location {
                            source: self.opts.source_name.clone(),
                            line: *line,
                            item: Some(*item_no),
                            ..Default::default()
                        };
                        let bytes = std::mem::take(doc);
                        let result = self.item(at, bytes.get(a..b).unwrap_or_default());
                        if let State::Array { doc, .. } = &mut self.state {
                            *doc = bytes;
                        }
                        return Some(result);
                    }
                    // Whatever followed the array (usually nothing).
                    None => self.state = State::Start,
                },
                State::Items { doc, items } => match items.next() {
                    Some((line, a, b)) => {
                        let bytes = std::mem::take(doc);
                        let result =
                            self.item(self.at(line, None), bytes.get(a..b).unwrap_or_default());
                        if let State::Items { doc, .. } = &mut self.state {
                            *doc = bytes;
                        }
                        return Some(result);
                    }
                    None => self.state = State::Done,
                },
                State::Done => return None,
            }
        }
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Trace>;

    fn next(&mut self) -> Option<Result<Trace>> {
        self.next_record().map(|r| r.map(|rec| rec.trace))
    }
}

/// [`TraceReader::problems`]: problem rows, each good one with its location.
pub struct Problems<R: BufRead>(TraceReader<R>);

impl<R: BufRead> Iterator for Problems<R> {
    type Item = Result<ProblemRow>;

    fn next(&mut self) -> Option<Result<ProblemRow>> {
        self.0.next_problem()
    }
}

/// [`TraceReader::records`]: the good rows with their locations.
pub struct Records<R: BufRead>(TraceReader<R>);

impl<R: BufRead> Records<R> {
    pub fn reader(&self) -> &TraceReader<R> {
        &self.0
    }
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        self.0.next_record()
    }
}

/// A row's `id` (a string or a number), for locating its errors.
fn row_id(row: &Value) -> Option<String> {
    match row.get("id")? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A failed strict parse as an input error at `at`: a duplicate key or a
/// number that cannot be kept names its path as the field.
fn parse_error(at: Location, e: strict::StrictError) -> Error {
    let column = e.json.column();
    let message = match &e.field {
        Some(_) => format!("{}, column {column}", json_message(&e.json)),
        None => format!("invalid JSON, column {column}: {}", json_message(&e.json)),
    };
    Error::input_at(at.with_field(e.field), message)
}

/// The values of `doc`, whitespace-separated JSON values, as (line they
/// start on, byte range); `first_line` is the document's first line. `None`
/// if any part of it is not valid JSON.
fn value_ranges(doc: &[u8], first_line: usize) -> Option<Vec<(usize, usize, usize)>> {
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_slice(doc).into_iter::<serde::de::IgnoredAny>();
    let (mut line, mut counted) = (first_line, 0);
    loop {
        let pos = stream.byte_offset();
        let ws = doc
            .get(pos..)?
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
        match stream.next() {
            None => return Some(out),
            Some(Ok(_)) => {
                let start = pos + ws;
                line += doc
                    .get(counted..start)?
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count();
                counted = start;
                out.push((line, start, stream.byte_offset()));
            }
            Some(Err(_)) => return None,
        }
    }
}

/// Where the string literals of a JSON text are, fed one byte at a time:
/// the one scanner of strings and their escapes behind the readers' byte
/// scans (array items here, number tokens in `strict.rs`).
#[derive(Debug, Default)]
struct JsonStrings {
    in_string: bool,
    escaped: bool,
}

impl JsonStrings {
    /// Whether byte `b`, the next one of the text, is structural: outside
    /// every string literal and not a quote (those are the string's own).
    fn structural(&mut self, b: u8) -> bool {
        if self.in_string {
            match (self.escaped, b) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return false;
        }
        if b == b'"' {
            self.in_string = true;
            return false;
        }
        true
    }
}

/// The byte ranges of the top-level items of `doc`, a syntactically valid
/// JSON array (validated by the caller), found by tracking nesting depth
/// outside strings.
fn array_items(doc: &[u8]) -> Vec<(usize, usize)> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut strings = JsonStrings::default();
    let mut start: Option<usize> = None;
    let push = |a: usize, b: usize, items: &mut Vec<(usize, usize)>| {
        if let Some(slice) = doc.get(a..b) {
            let lead = slice.iter().take_while(|c| c.is_ascii_whitespace()).count();
            let trail = slice
                .iter()
                .rev()
                .take_while(|c| c.is_ascii_whitespace())
                .count();
            if lead < slice.len() {
                items.push((a + lead, b - trail));
            }
        }
    };
    for (i, &b) in doc.iter().enumerate() {
        if !strings.structural(b) {
            continue;
        }
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth == 1 {
                    start = Some(i + 1);
                }
            }
            b']' | b'}' => {
                if depth == 1 {
                    if let Some(s) = start.take() {
                        push(s, i, &mut items);
                    }
                }
                depth = depth.saturating_sub(1);
            }
            b',' if depth == 1 => {
                if let Some(s) = start {
                    push(s, i, &mut items);
                }
                start = Some(i + 1);
            }
            _ => {}
        }
    }
    items
}

/// 1-based line and 0-based byte column of `offset` in `doc`.
fn line_col(doc: &[u8], offset: usize) -> (usize, usize) {
    let before = doc.get(..offset).unwrap_or(doc);
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let col = before.iter().rev().take_while(|&&b| b != b'\n').count();
    (line, col)
}

/// serde_json's message without its " at line L column C" suffix (the
/// reader reports positions itself).
fn json_message(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Opens `path` (or stdin for `-`) as a [`TraceReader`]. The options' source
/// name, if left at its default, becomes the path or `<stdin>`.
/// Files ending in `.gz` are decompressed on the fly.
pub fn open_traces(path: &Path, mut opts: ReadOptions) -> Result<TraceReader<Box<dyn BufRead>>> {
    let is_stdin = path.as_os_str() == "-";
    if opts.source_name.is_empty() || opts.source_name == DEFAULT_SOURCE {
        opts.source_name = if is_stdin {
            "<stdin>".to_string()
        } else {
            path.display().to_string()
        };
    }
    let reader: Box<dyn BufRead> = if is_stdin {
        Box::new(std::io::stdin().lock())
    } else {
        let file = File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
        // Gzipped JSON/JSONL (the committed datasets) is decompressed as it
        // streams; wasm has no files to open, so no decoder there.
        #[cfg(not(target_arch = "wasm32"))]
        if path.extension().is_some_and(|e| e == "gz") {
            return Ok(TraceReader::new(
                Box::new(BufReader::with_capacity(
                    1 << 16,
                    flate2::read::MultiGzDecoder::new(file),
                )),
                opts,
            ));
        }
        Box::new(BufReader::with_capacity(1 << 16, file))
    };
    Ok(TraceReader::new(reader, opts))
}

/// Writes `value` as one JSON line. Non-finite floats come out as `null`
/// (which the reader takes back as "no score").
pub fn write_jsonl<W: Write>(w: &mut W, value: &impl Serialize) -> Result<()> {
    serde_json::to_writer(&mut *w, value).map_err(|e| {
        if e.is_io() {
            Error::io("<output>", std::io::Error::other(e))
        } else {
            Error::InvalidArgument(format!("cannot write as JSON: {e}"))
        }
    })?;
    w.write_all(b"\n").map_err(|e| Error::io("<output>", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each item range parses to the same value serde_json finds at that index.
    fn check_items(doc: &str) {
        let want: Vec<Value> = serde_json::from_str(doc).unwrap();
        let got: Vec<Value> = array_items(doc.as_bytes())
            .into_iter()
            .map(|(a, b)| serde_json::from_str(&doc[a..b]).unwrap())
            .collect();
        assert_eq!(got, want, "{doc}");
    }

    #[test]
    fn array_items_track_strings_and_nesting() {
        check_items("[]");
        check_items("[ ]");
        check_items("[1]");
        check_items(r#"[ 1 , "a,]}" , [2, [3, {"k": "]"}]], {"x": {"y": [",", "\\"]}}, null ]"#);
        check_items(r#"["\\", "\"", "\\\"],[", {}]"#);
        check_items("[\n {\"é\": \"日本,\"},\n\t[]\n]");
    }

    #[test]
    fn json_message_drops_position() {
        let e = serde_json::from_str::<Value>("{").unwrap_err();
        assert_eq!(json_message(&e), "EOF while parsing an object");
    }
}
