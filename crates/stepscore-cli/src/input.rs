//! Reading traces for every command: the shared input flags, and a loop that
//! reports bad records on stderr and keeps the good ones. Every report names
//! the record by its place in the input (line, array item, id), never by how
//! many good records came before it.

use std::io::BufRead;
use std::path::PathBuf;

use stepscore::io::{open_traces, InputFormat, ProblemRow, Problems, ReadOptions, Record};
use stepscore::segment::Segmenter;
use stepscore::validate::{FieldError, Unscored};
use stepscore::{Error, Location, Trace};

use crate::Failure;

#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Input file (JSON or JSONL); `-` reads stdin.
    #[arg(default_value = "-")]
    pub input: PathBuf,

    /// Row format: auto, native, processbench, trl, raw, chat.
    #[arg(long, default_value = "auto")]
    pub input_format: InputFormat,

    /// How raw responses are split into steps: auto ("Step k:" / numbered
    /// markers if present, else blank lines, else single lines; the choice is
    /// reported as `metadata.segmenter`), blank-line, newline, step-marker,
    /// chat, or regex:<pattern> (matches are the delimiters; a pattern that
    /// can match the empty string is refused).
    #[arg(long, default_value = "auto")]
    pub segmenter: Segmenter,

    /// The record limit, in bytes: the longest JSONL line, and the largest
    /// element of a JSON array; longer records are skipped with an error.
    #[arg(long, default_value_t = 16 << 20, value_parser = crate::options::positive)]
    pub max_line_bytes: usize,
}

impl InputArgs {
    fn options(&self) -> ReadOptions {
        ReadOptions {
            format: self.input_format,
            segmenter: self.segmenter.clone(),
            max_line_bytes: self.max_line_bytes,
            source_name: if self.input.as_os_str() == "-" {
                "<stdin>".to_string()
            } else {
                self.input.display().to_string()
            },
            ..ReadOptions::default()
        }
    }
}

/// The input of `generate` and `search`: problem rows, read by the core's
/// one reader (`stepscore::io`), as `score` reads traces.
#[derive(clap::Args, Debug, Clone)]
pub struct ProblemArgs {
    /// JSONL or a JSON array of problems (`problem`, `prompt` or `question`;
    /// optional `id` and a reference answer, `reference_answer` or `answer`);
    /// `-` reads stdin.
    #[arg(default_value = "-")]
    pub input: PathBuf,

    /// The record limit, in bytes: the longest JSONL line, and the largest
    /// element of a JSON array; longer records are skipped with an error.
    #[arg(long, default_value_t = 16 << 20, value_parser = crate::options::positive)]
    pub max_line_bytes: usize,
}

impl ProblemArgs {
    /// Opens the input (before a model loads, so a missing file fails
    /// fast); rows are read as they are iterated.
    pub fn open(&self) -> Result<Problems<Box<dyn BufRead>>, Failure> {
        let opts = ReadOptions {
            max_line_bytes: self.max_line_bytes,
            ..ReadOptions::default()
        };
        Ok(open_traces(&self.input, opts)?.problems())
    }
}

/// Calls `each` on every good problem row in input order; bad rows are
/// reported as [`for_each_record`] reports them (and end nothing but an
/// I/O error ends the run). Returns how many were bad.
pub fn for_each_problem<R: BufRead>(
    problems: Problems<R>,
    mut each: impl FnMut(ProblemRow) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let mut bad = 0;
    for item in problems {
        match item {
            Ok(row) => each(row)?,
            Err(e @ Error::Input { .. }) => {
                bad += 1;
                report_error(&e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(bad)
}

/// What `aggregate` and `select` do with a trace whose last steps have no
/// score (what `stepscore score --truncation drop-steps` writes for a trace over the
/// token limit).
#[derive(clap::Args, Debug, Clone)]
pub struct UnscoredArgs {
    /// Traces whose last steps are unscored (truncated): `prefix` uses the
    /// scored steps and reports how many were left out; `reject` reports the
    /// trace as a bad record.
    #[arg(long, default_value = "prefix")]
    pub unscored: Unscored,
}

/// Prints a bad record's error on stderr.
pub fn report_error(e: &Error) {
    eprintln!("error: {e}");
}

/// Prints what is wrong with the record at `at` on stderr.
pub fn report(at: &Location, problem: FieldError) {
    report_error(&Error::input_at(
        at.with_field(problem.field),
        problem.message,
    ));
}

/// How a table row names a record: its id, else its place in the input.
pub fn record_name(at: &Location) -> String {
    match (&at.id, at.item) {
        (Some(id), _) => id.clone(),
        (None, Some(item)) => format!("item {item}"),
        (None, None) => format!("line {}", at.line),
    }
}

/// Calls `each` on every good record in input order; bad records are
/// printed to stderr as they come. Returns how many were bad.
pub fn for_each_record(
    args: &InputArgs,
    each: impl FnMut(Record) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    for_each_row(args, each, |_| Ok(()))
}

/// [`for_each_record`] that also hands each bad record's error, after
/// reporting it, to `bad_row` (`stepscore read` writes it out).
pub fn for_each_row(
    args: &InputArgs,
    mut each: impl FnMut(Record) -> Result<(), Failure>,
    mut bad_row: impl FnMut(Error) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let reader = open_traces(&args.input, args.options())?;
    let mut bad = 0;
    for item in reader.records() {
        match item {
            Ok(record) => each(record)?,
            Err(e @ Error::Input { .. }) => {
                bad += 1;
                report_error(&e);
                bad_row(e)?;
            }
            // I/O and anything that is not about one record ends the run.
            Err(e) => return Err(e.into()),
        }
    }
    Ok(bad)
}

/// [`for_each_record`] for commands that only need the traces.
#[cfg_attr(not(feature = "train"), allow(dead_code))]
pub fn for_each_trace(
    args: &InputArgs,
    mut each: impl FnMut(Trace) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    for_each_record(args, |r| each(r.trace))
}

/// Reads every good record into memory (for commands that need them all).
pub fn read_all(args: &InputArgs) -> Result<(Vec<Record>, usize), Failure> {
    let mut records = Vec::new();
    let bad = for_each_record(args, |r| {
        records.push(r);
        Ok(())
    })?;
    Ok((records, bad))
}

/// The exit status after a command that read input with `bad` bad records.
pub fn finish(bad: usize) -> Result<(), Failure> {
    if bad == 0 {
        Ok(())
    } else {
        Err(Failure::BadRecords(bad))
    }
}
