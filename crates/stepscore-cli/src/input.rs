//! Reading traces for every command: the shared input flags, and a loop that
//! reports bad records on stderr and keeps the good ones.

use std::path::PathBuf;

use stepscore::io::{open_traces, InputFormat, ReadOptions};
use stepscore::segment::Segmenter;
use stepscore::{Error, Trace};

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
    /// chat, or regex:<pattern> (matches are the delimiters).
    #[arg(long, default_value = "auto")]
    pub segmenter: Segmenter,

    /// Longest accepted JSONL line, in bytes; longer lines are rejected unread.
    #[arg(long, default_value_t = 16 << 20)]
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

/// Calls `each` on every good trace in input order; bad records are printed
/// to stderr as they come. Returns how many were bad.
pub fn for_each_trace(
    args: &InputArgs,
    mut each: impl FnMut(Trace) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let reader = open_traces(&args.input, args.options()).map_err(|e| match e {
        Error::Io { .. } => Failure::Io(e.to_string()),
        other => Failure::Usage(other.to_string()),
    })?;
    let mut bad = 0;
    for item in reader {
        match item {
            Ok(trace) => each(trace)?,
            Err(e @ Error::Io { .. }) => return Err(Failure::Io(e.to_string())),
            Err(e) => {
                bad += 1;
                eprintln!("error: {e}");
            }
        }
    }
    Ok(bad)
}

/// Reads every good trace into memory (for commands that need them all).
pub fn read_all(args: &InputArgs) -> Result<(Vec<Trace>, usize), Failure> {
    let mut traces = Vec::new();
    let bad = for_each_trace(args, |t| {
        traces.push(t);
        Ok(())
    })?;
    Ok((traces, bad))
}

/// The exit status after a command that read input with `bad` bad records.
pub fn finish(bad: usize) -> Result<(), Failure> {
    if bad == 0 {
        Ok(())
    } else {
        Err(Failure::BadRecords(bad))
    }
}
