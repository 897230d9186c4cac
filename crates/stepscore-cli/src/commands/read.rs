//! `stepscore read`: what the trace reader makes of every row of an input,
//! the good rows and the bad ones alike, in input order. Its JSONL is the
//! core's serde form of [`Record`] and [`BadRow`], which is also what the npm
//! package's `readTraces` returns, so the two can be compared line by line.

use std::cell::RefCell;
use std::io::Write;

use serde::Serialize;
use stepscore::io::{BadRow, Record};

use crate::input::{finish, for_each_row, record_name, InputArgs};
use crate::output::{clip, jsonl, stdout_error, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Each JSONL line is {\"record\": {at, format, trace}} for a good row or \
        {\"error\": {at, message, text}} for a bad one (`at`: source, line, item, id, field). \
        Bad rows are also reported on stderr, and make the exit status 1.\n\n\
        Example:\n  stepscore read examples/traces.jsonl --output jsonl"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

/// One JSONL line of `read`.
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Row {
    Record(Record),
    Error(BadRow),
}

pub fn run(args: Args) -> Result<(), Failure> {
    let table = args.output.table();
    let stdout = std::io::stdout();
    // Both callbacks write, in input order.
    let out = RefCell::new(stdout.lock());
    let mut t = Table::new(&["row", "format", "steps", "problem"]);
    let bad = for_each_row(
        &args.input,
        |record| {
            if table {
                t.row(vec![
                    record_name(&record.at),
                    record.format.to_string(),
                    record.trace.steps.len().to_string(),
                    clip(&record.trace.problem, 60),
                ]);
                Ok(())
            } else {
                jsonl(&mut *out.borrow_mut(), &Row::Record(record))
            }
        },
        |e| match BadRow::from_error(e) {
            // In a table, bad rows are the stderr reports alone.
            Ok(_) if table => Ok(()),
            Ok(bad) => jsonl(&mut *out.borrow_mut(), &Row::Error(bad)),
            Err(other) => Err(other.into()),
        },
    )?;
    let mut out = out.into_inner();
    if table {
        t.write(&mut out)?;
    }
    out.flush().map_err(stdout_error)?;
    finish(bad)
}
