//! `stepscore train`: fit a value head on the user's own labelled traces.
//! Features come from the engine's forward (the `stepscore features` path)
//! on a frozen backbone; burn fits the head (crates/stepscore-train). The
//! trainer is behind the `train` cargo feature so that default builds never
//! compile burn.

use std::path::PathBuf;

use crate::input::InputArgs;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Input: labelled traces (ProcessBench rows with `label`, TRL PRM rows with \
    per-step `labels`, or stepscore's format), JSON or JSONL. Steps after the first wrong one \
    are dropped (ProcessBench convention). The head reads the backbone's final hidden state at \
    each step's end (the value-head family's marker), or layer --layer's, joined with --stats; \
    the output holds `v_head.summary.weight` [1, width] and `v_head.summary.bias` [1] (linear) \
    or the MLP's `v_head.summary.{0,2}.*`, and loads with \
    `stepscore score --model <backbone> --head <out>`.\n\
    Without --val, every 10th labelled trace is held out. The held-out traces choose the epoch \
    (step AUROC), fit Platt scaling (folded into the head, so scores are probabilities) and the \
    first-error threshold (`stepscore.threshold`, used by `score` when --threshold is not given).\n\
    Needs a build with the trainer: cargo run --release -p stepscore-cli --features train -- train ..."
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Labelled validation traces, for early stopping on step AUROC.
    #[arg(long)]
    pub val: Option<PathBuf>,

    /// Where to write the head (safetensors).
    #[arg(long)]
    pub out: PathBuf,

    /// The frozen backbone: a GGUF file, a Hugging Face directory or a
    /// catalog name (default: the default PRM's backbone,
    /// Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched into the cache on first
    /// use; `smollm2-135m` is ~6x faster and a weaker verifier).
    #[arg(long, short)]
    pub model: Option<PathBuf>,

    /// CPU threads for feature extraction (0: the default, as `--threads` of score).
    #[arg(long, default_value_t = 0, value_parser = crate::options::threads)]
    pub threads: usize,

    /// Token limit per trace; longer traces keep the steps that fit.
    #[arg(long, value_parser = crate::options::positive)]
    pub max_tokens: Option<usize>,

    /// Read the hidden state of layer L (0..=n_layers) instead of the final one; recorded as
    /// `stepscore.layer`.
    #[arg(long, value_name = "L")]
    pub layer: Option<usize>,

    // The head, the step statistics it reads and the optimiser (shared with `stepscore-train`).
    #[command(flatten)]
    pub flags: stepscore_train::TrainFlags,
}

#[cfg(not(feature = "train"))]
pub fn run(_args: Args) -> Result<(), Failure> {
    Err(Failure::Usage(
        "this stepscore was built without the trainer; run it as \
         `cargo run --release -p stepscore-cli --features train -- train ...`"
            .into(),
    ))
}

#[cfg(feature = "train")]
pub fn run(args: Args) -> Result<(), Failure> {
    with_trainer::run(args)
}

#[cfg(feature = "train")]
mod with_trainer {
    use std::io::IsTerminal;
    use std::time::Instant;

    use indicatif::{ProgressBar, ProgressStyle};
    use stepscore::prm::{
        Family, FeatureOptions, HeadSource, Scorer, ScorerOptions, StepFeatures, Truncation,
    };
    use stepscore_train::{train_and_save, Examples, ExamplesBuilder};

    use super::Args;
    use crate::commands::fetch;
    use crate::input::{for_each_trace, InputArgs};
    use crate::Failure;

    /// Every HOLD_OUT-th labelled trace validates when no --val is given.
    const HOLD_OUT: usize = 10;

    pub fn run(args: Args) -> Result<(), Failure> {
        // A catalog PRM name trains on its backbone (its built-in head is not used).
        let model = fetch::model_path(args.model.as_deref())?;
        let options = ScorerOptions {
            family: Some(Family::ValueHead),
            threads: args.threads,
            max_tokens: args.max_tokens,
            truncation: Truncation::DropSteps,
            ..ScorerOptions::default()
        };
        let backbone = Scorer::open_with(&model, &HeadSource::Backbone, &options)
            .map_err(|e| Failure::during("cannot load backbone", e))?;
        eprintln!("stepscore train: backbone {}", model.display());

        let started = Instant::now();
        let layout = args.flags.layout(args.layer.into_iter().collect());
        let mut train_set = ExamplesBuilder::new(&layout);
        let mut held_out = ExamplesBuilder::new(&layout);
        let features = FeatureOptions {
            layers: args.layer.into_iter().collect(),
            confidence: !args.flags.stats.is_empty(),
        };
        let split = args.val.is_none();
        let (mut labelled, mut bad) = (0usize, 0usize);
        bad += extract(&backbone, &args.input, &features, |label, f| {
            let into_val = split && label.is_some() && labelled % HOLD_OUT == HOLD_OUT - 1;
            labelled += usize::from(label.is_some());
            let target = if into_val {
                &mut held_out
            } else {
                &mut train_set
            };
            push(target, label, f)
        })?;
        if let Some(val) = &args.val {
            let input = InputArgs {
                input: val.clone(),
                ..args.input.clone()
            };
            bad += extract(&backbone, &input, &features, |label, f| {
                push(&mut held_out, label, f)
            })?;
        }
        let secs = started.elapsed().as_secs_f64();
        let (train_ex, stats) = train_set.finish("training traces").map_err(usage)?;
        let val_ex: Option<Examples> = match held_out.finish("validation traces") {
            Ok((ex, _)) => Some(ex),
            Err(_) => None,
        };
        eprintln!(
            "stepscore train: features in {secs:.1}s; {} training steps ({} correct) from {} traces \
             ({} unlabelled skipped, {} steps after an error dropped); {} validation steps",
            train_ex.len(),
            train_ex.positives(),
            stats.traces,
            stats.unlabelled,
            stats.dropped_steps,
            val_ex.as_ref().map_or(0, Examples::len)
        );

        let cfg = args.flags.config();
        train_and_save(&train_ex, val_ex.as_ref(), None, &cfg, &args.out, &layout).map_err(
            |e| match e {
                stepscore_train::Error::Io { .. } => Failure::Io(e.to_string()),
                other => usage(other),
            },
        )?;
        if bad > 0 {
            return Err(Failure::BadRecords(bad));
        }
        Ok(())
    }

    fn push(to: &mut ExamplesBuilder, label: Option<i64>, f: &StepFeatures) -> Result<(), String> {
        to.push_trace(
            label,
            &f.hidden,
            f.confidence.as_deref(),
            f.digit_confidence.as_deref(),
        )
    }

    fn usage(e: stepscore_train::Error) -> Failure {
        Failure::Usage(e.to_string())
    }

    /// Runs the backbone over every trace of `input` and hands its label and
    /// features to `sink`; returns how many records or traces were bad (each
    /// reported on stderr).
    fn extract(
        backbone: &Scorer,
        input: &InputArgs,
        options: &FeatureOptions,
        mut sink: impl FnMut(Option<i64>, &StepFeatures) -> Result<(), String>,
    ) -> Result<usize, Failure> {
        let bar = if std::io::stderr().is_terminal() {
            ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {pos} traces  {per_sec}  {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            )
        } else {
            ProgressBar::hidden()
        };
        let mut failed = 0usize;
        let bad = for_each_trace(input, |trace| {
            bar.inc(1);
            let name = trace.id.clone().unwrap_or_else(|| "(no id)".into());
            let texts: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
            let result = backbone
                .step_features_with(&trace.problem, &texts, options)
                .map_err(|e| e.to_string())
                .and_then(|f| sink(trace.first_error_label(), &f));
            if let Err(e) = result {
                failed += 1;
                bar.suspend(|| eprintln!("error: trace {name}: {e}"));
            }
            Ok(())
        })?;
        bar.finish_and_clear();
        Ok(bad + failed)
    }
}
