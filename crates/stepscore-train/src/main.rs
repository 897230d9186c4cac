//! `stepscore-train`: fit a value head on `stepscore features` output and export it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use stepscore_train::{read_examples, train_and_save_at, HeadKind, TrainConfig};

#[derive(Parser)]
#[command(
    name = "stepscore-train",
    about = "Train a step head (value head) on hidden-state features from `stepscore features`",
    after_help = "Inputs are JSONL (optionally .gz) from `stepscore features --family value-head`. \
    Labels follow ProcessBench (steps after the first error are dropped). The output is a \
    safetensors file with `v_head.summary.weight` [1, h] and `v_head.summary.bias` [1] (linear \
    head) taking raw hidden states; the per-epoch log goes to stderr as JSON lines."
)]
struct Args {
    /// Training features (JSONL or JSONL.gz).
    #[arg(long)]
    train: PathBuf,
    /// Validation features, for early stopping on step AUROC.
    #[arg(long)]
    val: Option<PathBuf>,
    /// Where to write the head (safetensors).
    #[arg(long)]
    out: PathBuf,
    /// Head: `linear` or `mlp` (Linear(h, hidden) -> ReLU -> Linear(hidden, 1)).
    #[arg(long, default_value = "linear", value_parser = ["linear", "mlp"])]
    head: String,
    /// Hidden units of the MLP head.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Append the confidence statistics to every step's features (needs `--confidence` at
    /// extraction); recorded as `stepscore.confidence_features` for the engine.
    #[arg(long)]
    confidence: bool,
    /// The `--layer` the features were extracted with (`stepscore features --layer L`),
    /// recorded as `stepscore.layer` so the engine reads the same layer.
    #[arg(long, value_name = "L")]
    layer: Option<usize>,
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
    let (train_ex, stats) = read_examples(&args.train, args.confidence)?;
    eprintln!(
        "{}: {} steps ({} correct) from {} traces; {} unlabelled traces, {} steps after an error dropped",
        args.train.display(),
        train_ex.len(),
        train_ex.positives(),
        stats.traces,
        stats.unlabelled,
        stats.dropped_steps
    );
    let val_ex = match &args.val {
        Some(p) => {
            let (ex, _) = read_examples(p, args.confidence)?;
            eprintln!(
                "{}: {} steps ({} correct)",
                p.display(),
                ex.len(),
                ex.positives()
            );
            Some(ex)
        }
        None => None,
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
    train_and_save_at(
        &train_ex,
        val_ex.as_ref(),
        &cfg,
        &args.out,
        args.confidence,
        args.layer,
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
