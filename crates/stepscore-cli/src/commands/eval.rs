//! `stepscore eval`: how good are the scores? ProcessBench F1 per split, step
//! AUROC, and calibration, on traces that carry both scores and labels.

use std::io::Write;

use serde::Serialize;
use stepscore::metrics::{
    calibrate_threshold_from_traces, processbench_from_traces, step_auroc_from_traces,
    step_calibration_from_traces, Calibration, ProcessBenchReport,
};

use stepscore::validate::{first_error_label, scored_steps, FieldError, Unscored};
use stepscore::Trace;

use crate::commands::aggregate::json_number;
use crate::input::{finish, read_all, report, InputArgs};
use crate::output::{jsonl, num, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Input rows need per-step scores and labels: ProcessBench rows \
    ({problem, steps, label, scores}), TRL rows ({prompt, completions, labels, scores}) or \
    stepscore traces. Rows are grouped into splits by their `split` field. A row without \
    labels, or with a step unscored or scored outside [0, 1], is reported on stderr and \
    skipped; the metrics cover the other rows, the output says how many were skipped, and the \
    exit code is then 1.\n\
    Example:\n  stepscore eval tests/fixtures/processbench_scored.jsonl"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// A step scoring below this is predicted wrong, in [0, 1].
    #[arg(long, default_value_t = stepscore::aggregate::DEFAULT_THRESHOLD, value_parser = crate::options::threshold)]
    pub threshold: f64,

    /// Choose the threshold that maximizes overall F1 on this input (report it;
    /// use it on held-out data, not as a score on the same data).
    #[arg(long, conflicts_with = "threshold")]
    pub calibrate: bool,

    /// Bins of the reliability table.
    #[arg(long, default_value_t = 10)]
    pub bins: usize,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

#[derive(Serialize)]
struct EvalRecord<'a> {
    /// Rows the metrics cover.
    traces: usize,
    /// Rows left out, each reported on stderr.
    skipped: usize,
    processbench: &'a ProcessBenchReport,
    step_auroc: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    calibration: Option<&'a Calibration>,
}

/// Whether a trace can be evaluated: labelled, and every step scored.
fn evaluable(trace: &Trace) -> Result<(), FieldError> {
    first_error_label(trace)?;
    scored_steps(trace, Unscored::Reject).map_err(|mut p| {
        if trace.steps.iter().any(|s| s.score.is_none()) {
            p.message
                .push_str("; eval needs every step scored (the prediction depends on them all)");
        }
        p
    })?;
    Ok(())
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.bins == 0 || args.bins > 1000 {
        return Err(Failure::Usage(format!(
            "--bins {} must be between 1 and 1000",
            args.bins
        )));
    }
    let (records, bad) = read_all(&args.input)?;
    let mut skipped = bad;
    let mut traces = Vec::with_capacity(records.len());
    for r in records {
        match evaluable(&r.trace) {
            Ok(()) => traces.push(r.trace),
            Err(problem) => {
                report(&r.at, problem);
                skipped += 1;
            }
        }
    }
    if traces.is_empty() {
        eprintln!("error: no usable traces in the input");
        return Err(Failure::BadRecords(skipped.max(1)));
    }
    let data_error = |e: stepscore::Error| {
        eprintln!("error: {e}");
        Failure::BadRecords(skipped + 1)
    };
    let threshold = if args.calibrate {
        calibrate_threshold_from_traces(&traces).map_err(data_error)?
    } else {
        args.threshold
    };
    let report = processbench_from_traces(&traces, threshold).map_err(data_error)?;
    let auroc = step_auroc_from_traces(&traces).map_err(data_error)?;
    let calib = step_calibration_from_traces(&traces, args.bins).map_err(data_error)?;
    let labels = traces
        .iter()
        .flat_map(|t| t.steps.iter())
        .filter(|s| s.label.is_some() && s.score.is_some())
        .count();

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.output.table() {
        write_tables(
            &mut out,
            (traces.len(), skipped),
            &report,
            auroc,
            calib.as_ref(),
            labels,
        )?;
    } else {
        jsonl(
            &mut out,
            &EvalRecord {
                traces: traces.len(),
                skipped,
                processbench: &report,
                step_auroc: json_number(auroc),
                calibration: calib.as_ref(),
            },
        )?;
    }
    out.flush().map_err(crate::output::stdout_error)?;
    finish(skipped)
}

fn write_tables(
    out: &mut impl Write,
    (n_traces, skipped): (usize, usize),
    report: &ProcessBenchReport,
    auroc: Option<f64>,
    calib: Option<&Calibration>,
    n_steps: usize,
) -> Result<(), Failure> {
    let io = crate::output::stdout_error;
    writeln!(
        out,
        "ProcessBench F1 over {n_traces} traces (threshold {}):",
        report.threshold
    )
    .map_err(io)?;
    if skipped > 0 {
        writeln!(out, "({skipped} bad record(s) skipped, reported on stderr)").map_err(io)?;
    }
    let mut t = Table::new(&[
        "split",
        "erroneous",
        "correct",
        "acc erroneous",
        "acc correct",
        "F1",
    ]);
    let mut push = |s: &stepscore::metrics::SplitF1| {
        t.row(vec![
            s.split.clone(),
            s.n_erroneous.to_string(),
            s.n_correct.to_string(),
            num(s.acc_erroneous, 3),
            num(s.acc_correct, 3),
            num(s.f1, 3),
        ])
    };
    for s in &report.splits {
        push(s);
    }
    push(&report.overall);
    t.write(out)?;
    writeln!(out, "mean F1 over splits: {}", num(report.mean_f1, 3)).map_err(io)?;
    writeln!(out).map_err(io)?;
    writeln!(
        out,
        "step AUROC over {n_steps} labelled steps: {}",
        num(auroc, 3)
    )
    .map_err(io)?;
    if let Some(c) = calib {
        writeln!(out, "expected calibration error: {:.3}", c.ece).map_err(io)?;
        let mut t = Table::new(&["bin", "steps", "mean score", "accuracy"]);
        for b in c.bins.iter().filter(|b| b.count > 0) {
            t.row(vec![
                format!(
                    "[{:.2}, {:.2}{}",
                    b.lo,
                    b.hi,
                    if b.hi >= 1.0 { "]" } else { ")" }
                ),
                b.count.to_string(),
                format!("{:.3}", b.mean_confidence),
                format!("{:.3}", b.accuracy),
            ]);
        }
        t.write(out)?;
    }
    Ok(())
}
