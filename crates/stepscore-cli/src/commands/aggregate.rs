//! `stepscore aggregate`: trace scores from step scores, and the first error.

use std::io::Write;

use serde::Serialize;
use stepscore::aggregate::{aggregate, Aggregation};
use stepscore::validate::scored_steps;

use crate::input::{finish, for_each_record, record_name, report, InputArgs, UnscoredArgs};
use crate::output::{jsonl, num, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Every input trace must carry a score (a probability in [0, 1]) on \
    each step, or on each of its first steps when the last ones were left unscored by \
    `score --truncation drop-steps` (see --unscored). Unscored steps are reported in `unscored_steps` \
    (JSONL) or as `scored/total` in the steps column (table); `first_error` is over the \
    scored steps.\n\
    Example:\n  stepscore aggregate scored.jsonl --aggregation min --threshold 0.5"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub scores: UnscoredArgs,

    /// Aggregations to report (repeat or comma-separate); all five by default:
    /// min, prod, last, mean, geo_mean.
    #[arg(long, short, value_delimiter = ',')]
    pub aggregation: Vec<Aggregation>,

    /// A step scoring below this is an error (ProcessBench convention), in [0, 1].
    #[arg(long, default_value_t = stepscore::aggregate::DEFAULT_THRESHOLD, value_parser = crate::options::threshold)]
    pub threshold: f64,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

#[derive(Serialize)]
struct Record<'a> {
    /// The output row's number (0-based, good records only).
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    /// Where the record is in the input: its line, and item in a JSON array.
    line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    item: Option<usize>,
    steps: usize,
    /// The scores aggregated: every step's, or the scored prefix's.
    scores: &'a [f64],
    /// Last steps without a score, left out of the aggregates.
    unscored_steps: usize,
    aggregates: serde_json::Map<String, serde_json::Value>,
    threshold: f64,
    /// Index of the first step below the threshold, -1 if none.
    first_error: i64,
    /// The trace's labelled first error, when it has labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<i64>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let policy = args.scores.unscored;
    let hows: Vec<Aggregation> = if args.aggregation.is_empty() {
        Aggregation::ALL.to_vec()
    } else {
        args.aggregation.clone()
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let as_table = args.output.table();
    let mut header = vec!["trace", "steps"];
    header.extend(hows.iter().map(|h| h.name()));
    header.extend(["first error", "label"]);
    let mut table = Table::new(&header);
    let mut index = 0usize;
    let (mut refused, mut partial) = (0usize, 0usize);

    let bad = for_each_record(&args.input, |record| {
        let (at, trace) = (&record.at, &record.trace);
        let scored = match scored_steps(trace, policy) {
            Ok(s) => s,
            Err(problem) => {
                report(at, problem);
                refused += 1;
                return Ok(());
            }
        };
        let i = index;
        index += 1;
        partial += usize::from(!scored.complete());
        let scores = &scored.scores;
        let first = scored.first_error_label(args.threshold);
        let label = trace.first_error_label();
        if as_table {
            let steps = if scored.complete() {
                trace.steps.len().to_string()
            } else {
                format!("{}/{}", scores.len(), trace.steps.len())
            };
            let mut row = vec![record_name(at), steps];
            row.extend(hows.iter().map(|&h| num(aggregate(scores, h), 4)));
            row.push(first.to_string());
            row.push(label.map_or("-".to_string(), |l| l.to_string()));
            table.row(row);
            Ok(())
        } else {
            let aggregates = hows
                .iter()
                .map(|&h| (h.name().to_string(), json_number(aggregate(scores, h))))
                .collect();
            jsonl(
                &mut out,
                &Record {
                    index: i,
                    id: trace.id.as_deref(),
                    line: at.line,
                    item: at.item,
                    steps: trace.steps.len(),
                    scores,
                    unscored_steps: scored.unscored,
                    aggregates,
                    threshold: args.threshold,
                    first_error: first,
                    label,
                },
            )
        }
    })?;
    if as_table {
        table.write(&mut out)?;
    }
    out.flush().map_err(crate::output::stdout_error)?;
    if partial > 0 {
        eprintln!(
            "stepscore: {partial} trace(s) had unscored last steps (truncated); aggregated over \
             their scored steps (--unscored reject refuses them)"
        );
    }
    finish(bad + refused)
}

/// JSON has no NaN: an undefined aggregate is written as null.
pub fn json_number(x: Option<f64>) -> serde_json::Value {
    x.and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}
