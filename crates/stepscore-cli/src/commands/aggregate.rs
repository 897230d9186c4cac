//! `stepscore aggregate`: trace scores from step scores, and the first error.

use std::io::Write;

use serde::Serialize;
use stepscore::aggregate::{aggregate, first_error_label, Aggregation};

use crate::input::{finish, for_each_trace, InputArgs};
use crate::output::{jsonl, num, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(after_help = "Every input trace must carry a score on each step.\n\
    Example:\n  stepscore aggregate scored.jsonl --aggregation min --threshold 0.5")]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Aggregations to report (repeat or comma-separate); all five by default:
    /// min, prod, last, mean, geo_mean.
    #[arg(long, short, value_delimiter = ',')]
    pub aggregation: Vec<Aggregation>,

    /// A step scoring below this is an error (ProcessBench convention).
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

#[derive(Serialize)]
struct Record<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    steps: usize,
    scores: &'a [f64],
    aggregates: serde_json::Map<String, serde_json::Value>,
    threshold: f64,
    /// Index of the first step below the threshold, -1 if none.
    first_error: i64,
    /// The trace's labelled first error, when it has labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<i64>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if !(0.0..=1.0).contains(&args.threshold) {
        return Err(Failure::Usage(format!(
            "--threshold {} is outside [0, 1]",
            args.threshold
        )));
    }
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
    let mut unscored = 0usize;

    let bad = for_each_trace(&args.input, |trace| {
        let i = index;
        index += 1;
        let name = trace.id.clone().unwrap_or_else(|| format!("#{i}"));
        let Some(scores) = trace.scores() else {
            let missing = trace
                .steps
                .iter()
                .position(|s| s.score.is_none())
                .unwrap_or(0);
            eprintln!(
                "error: trace {name} (record {}): step {missing} has no score",
                i + 1
            );
            unscored += 1;
            return Ok(());
        };
        let first = first_error_label(&scores, args.threshold);
        let label = trace.first_error_label();
        if as_table {
            let mut row = vec![name.clone(), scores.len().to_string()];
            row.extend(hows.iter().map(|&h| num(aggregate(&scores, h), 4)));
            row.push(first.to_string());
            row.push(label.map_or("-".to_string(), |l| l.to_string()));
            table.row(row);
            Ok(())
        } else {
            let aggregates = hows
                .iter()
                .map(|&h| (h.name().to_string(), json_number(aggregate(&scores, h))))
                .collect();
            jsonl(
                &mut out,
                &Record {
                    index: i,
                    id: trace.id.as_deref(),
                    steps: scores.len(),
                    scores: &scores,
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
    out.flush().map_err(|e| Failure::Io(e.to_string()))?;
    finish(bad + unscored)
}

/// JSON has no NaN: an undefined aggregate is written as null.
pub fn json_number(x: Option<f64>) -> serde_json::Value {
    x.and_then(serde_json::Number::from_f64)
        .map_or(serde_json::Value::Null, serde_json::Value::Number)
}
