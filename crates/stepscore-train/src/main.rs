//! `stepscore-train`: fit a value head on `stepscore features` output and export it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stepscore::prm::StepStat;
use stepscore_train::{read_examples, train_and_save, Neutral, ReadOptions, TrainFlags};

#[derive(Parser)]
#[command(
    name = "stepscore-train",
    about = "Train a step head (value head) on hidden-state features from `stepscore features`",
    after_help = "Inputs are JSONL (optionally .gz) from `stepscore features --family value-head`. \
    Labels are each row's `labels` when written (PRM800K rows: the rated step), else they \
    follow ProcessBench (steps after the first error are dropped). The output is a \
    safetensors file with `v_head.summary.weight` [1, h] and `v_head.summary.bias` [1] (linear \
    head) taking raw hidden states; the per-epoch log goes to stderr as JSON lines."
)]
struct Args {
    /// Training features (JSONL or JSONL.gz); several files are read in order.
    #[arg(long, num_args = 1.., required = true)]
    train: Vec<PathBuf>,
    /// Validation features, for early stopping on step AUROC, then Platt calibration and the
    /// first-error threshold (written as `stepscore.threshold`); several files are read in order.
    #[arg(long, num_args = 1..)]
    val: Vec<PathBuf>,
    /// Whole traces the first-error threshold is chosen on, instead of `--val`'s traces that
    /// start at step 0 (e.g. PRM800K trajectories rebuilt from their rows by
    /// scripts/data/assemble_trajectories.py); needs `--val`.
    #[arg(long, num_args = 1.., requires = "val")]
    threshold_on: Vec<PathBuf>,
    /// Where to write the head (safetensors).
    #[arg(long)]
    out: PathBuf,
    /// Append the four confidence statistics (log1p_tokens, mean_logprob, min_logprob,
    /// mean_entropy) to every step's features (needs `--confidence` at extraction); the same
    /// as `--stats` with those four.
    #[arg(long, conflicts_with = "stats")]
    confidence: bool,
    /// The layers the head reads, ascending, comma-separated (extracted with
    /// `stepscore features --layers`), recorded as `stepscore.layer` so the engine reads the
    /// same ones (absent: the final layer).
    #[arg(
        long = "layers",
        alias = "layer",
        value_name = "L,...",
        value_delimiter = ','
    )]
    layers: Vec<usize>,
    /// The layers the feature rows hold, when the files do not say (features written before
    /// records named them); the head's `--layers` are taken from them.
    #[arg(long, value_name = "L,...", value_delimiter = ',')]
    feature_layers: Vec<usize>,
    /// PRM800K's neutral steps (rating 0): `good` (as read: no error), `bad`, or `drop`.
    #[arg(long, default_value = "good", value_parser = str::parse::<Neutral>)]
    neutral: Neutral,
    // The head, the step statistics it reads and the optimiser (shared with `stepscore train`).
    #[command(flatten)]
    flags: TrainFlags,
}

fn run(args: Args) -> stepscore_train::Result<()> {
    let mut layout = args.flags.layout(args.layers.clone());
    if args.confidence {
        layout.stats = StepStat::CONFIDENCE.to_vec();
    }
    let read = ReadOptions {
        file_layers: (!args.feature_layers.is_empty()).then(|| args.feature_layers.clone()),
        neutral: args.neutral,
    };
    let (train_ex, stats) = read_examples(&args.train, &layout, &read)?;
    eprintln!(
        "{} file(s): {} steps ({} correct) from {} traces; {} unlabelled traces, {} unlabelled steps dropped",
        args.train.len(),
        train_ex.len(),
        train_ex.positives(),
        stats.traces,
        stats.unlabelled,
        stats.dropped_steps
    );
    let val_ex = if args.val.is_empty() {
        None
    } else {
        let (ex, _) = read_examples(&args.val, &layout, &read)?;
        eprintln!(
            "validation, {} file(s): {} steps ({} correct)",
            args.val.len(),
            ex.len(),
            ex.positives()
        );
        Some(ex)
    };
    let cfg = args.flags.config();
    let whole = if args.threshold_on.is_empty() {
        None
    } else {
        let (ex, _) = read_examples(&args.threshold_on, &layout, &read)?;
        eprintln!(
            "threshold on {} file(s): {} whole traces",
            args.threshold_on.len(),
            ex.traces.len()
        );
        Some(ex)
    };
    train_and_save(
        &train_ex,
        val_ex.as_ref(),
        whole.as_ref(),
        &cfg,
        &args.out,
        &layout,
    )?;
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stepscore-train: {e}");
            ExitCode::FAILURE
        }
    }
}
