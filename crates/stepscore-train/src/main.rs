//! `stepscore-train`: fit a value head on `stepscore features` output and export it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stepscore::prm::StepStat;
use stepscore_train::{
    read_examples, train_and_save, HeadKind, Neutral, ReadOptions, RowLayout, TrainConfig,
};

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
    /// Head: `linear` or `mlp` (Linear(h, hidden) -> ReLU -> Linear(hidden, 1)).
    #[arg(long, default_value = "linear", value_parser = ["linear", "mlp"])]
    head: String,
    /// Hidden units of the MLP head.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Append the four confidence statistics (log1p_tokens, mean_logprob, min_logprob,
    /// mean_entropy) to every step's features (needs `--confidence` at extraction); the same
    /// as `--stats` with those four.
    #[arg(long, conflicts_with = "stats")]
    confidence: bool,
    /// Step statistics to append, in order, comma-separated: log1p_tokens, mean_logprob,
    /// min_logprob, mean_entropy, digit_log1p_tokens, digit_min_logprob, digit_mean_logprob,
    /// plus_minus_min_logprob, result_min_logprob, operand_min_logprob, times_divide_min_logprob,
    /// operation_min_logprob, false_equation (needs `--confidence` at extraction); recorded as
    /// `stepscore.step_stats`.
    #[arg(long, value_delimiter = ',', value_parser = str::parse::<StepStat>)]
    stats: Vec<StepStat>,
    /// Rows are the `--stats` alone, not the hidden state (recorded as
    /// `stepscore.stats_only`): a head of a few weights that needs no layer's states.
    #[arg(long, requires = "stats")]
    stats_only: bool,
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
    #[arg(long, default_value_t = 30)]
    epochs: usize,
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    #[arg(long, default_value_t = 1e-4)]
    weight_decay: f32,
    /// Epochs without a better validation AUROC before stopping.
    #[arg(long, default_value_t = 5)]
    patience: usize,
    #[arg(long, default_value_t = 20250607)]
    seed: u64,
}

fn run(args: Args) -> stepscore_train::Result<()> {
    let layout = RowLayout {
        layers: args.layers.clone(),
        stats: if args.confidence {
            StepStat::CONFIDENCE.to_vec()
        } else {
            args.stats.clone()
        },
        stats_only: args.stats_only,
    };
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
    let cfg = TrainConfig {
        head: if args.head == "mlp" {
            HeadKind::Mlp {
                hidden: args.hidden,
            }
        } else {
            HeadKind::Linear
        },
        epochs: args.epochs,
        batch_size: args.batch_size,
        learning_rate: args.lr,
        weight_decay: args.weight_decay,
        patience: args.patience,
        seed: args.seed,
    };
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
