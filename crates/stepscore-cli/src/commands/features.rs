//! `stepscore features`: per-step hidden-state features for training a head,
//! from the same encode + forward path that scoring runs.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use stepscore::prm::{Family, FeatureOptions, Scorer, ScorerOptions, StepConfidence, Truncation};

use crate::commands::fetch;
use crate::input::{finish, for_each_trace, InputArgs};
use crate::output::jsonl;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output: one JSON line per trace, {id, label, split, generator, group, \
    features: [[f32; hidden] per scored step], confidence: [{tokens, mean_logprob, min_logprob, \
    mean_entropy}] (with --confidence), tokens, truncated_steps}. `label` is the ProcessBench \
    first-error index (-1: all correct; absent when the row has no labels). Features are the \
    final-normed hidden states at the positions the family's head reads (value-head: each step's \
    \"\\n\"); the head's own tensors are not needed. With --layer L they are layer L's: the \
    residual stream after the first L blocks (0: the embeddings) through the model's final \
    RMSNorm; a head trained on them records `stepscore.layer` = L. Timing goes to stderr.\n\
    Compressed input is read through a pipe.\n\
    Example:\n  zcat data/gsm_symbolic_test.jsonl.gz | stepscore features --model \
    SmolLM2-135M-Instruct.Q4_1.gguf --family value-head - > features.jsonl"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// A GGUF file, a Hugging Face checkpoint directory or a catalog name (the backbone).
    #[arg(long, short)]
    pub model: PathBuf,

    /// Prompt protocol whose marker positions are read: score-head,
    /// value-head, math-shepherd, rlhflow, confidence (detected when omitted).
    #[arg(long)]
    pub family: Option<Family>,

    /// Also write the confidence statistics of each step's tokens (needs the
    /// model's LM head).
    #[arg(long)]
    pub confidence: bool,

    /// Read the hidden state of layer L (0..=n_layers: the residual stream
    /// after L blocks, through the final RMSNorm) instead of the final one.
    #[arg(long, value_name = "L")]
    pub layer: Option<usize>,

    /// CPU threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,

    /// Token limit per trace (the model's context length at most).
    #[arg(long)]
    pub max_tokens: Option<usize>,

    /// Keep the leading steps that fit the token limit instead of rejecting
    /// longer traces.
    #[arg(long)]
    pub truncate: bool,
}

#[derive(Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    split: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generator: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<&'a str>,
    features: &'a [Vec<f32>],
    #[serde(skip_serializing_if = "Option::is_none")]
    confidence: Option<&'a [StepConfidence]>,
    tokens: usize,
    truncated_steps: usize,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let options = ScorerOptions {
        family: args.family,
        threads: args.threads,
        max_tokens: args.max_tokens,
        truncation: if args.truncate {
            Truncation::DropSteps
        } else {
            Truncation::Error
        },
        ..ScorerOptions::default()
    };
    let scorer = Scorer::open_backbone(&fetch::resolve_model(Some(&args.model))?.path, &options)
        .map_err(|e| Failure::Io(e.to_string()))?;
    let n_layers = scorer.model().config().n_layers;
    if let Some(l) = args.layer.filter(|&l| l > n_layers) {
        return Err(Failure::Usage(format!(
            "--layer {l}: the model has {n_layers} layers (0 is the embeddings)"
        )));
    }
    let features = FeatureOptions {
        layer: args.layer,
        confidence: args.confidence,
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let start = Instant::now();
    let (mut traces, mut steps, mut tokens, mut failed) = (0usize, 0usize, 0usize, 0usize);
    let bad = for_each_trace(&args.input, |trace| {
        let texts: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        let result = scorer.step_features_with(&trace.problem, &texts, &features);
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                // A trace the model cannot take (too long, a step without
                // tokens) is reported and skipped like a bad record.
                eprintln!(
                    "error: trace {}: {e}",
                    trace.id.as_deref().unwrap_or("(no id)")
                );
                failed += 1;
                return Ok(());
            }
        };
        traces += 1;
        steps += f.hidden.len();
        tokens += f.tokens;
        jsonl(
            &mut out,
            &Record {
                id: trace.id.as_deref(),
                label: trace.first_error_label(),
                split: trace.meta_str("split"),
                generator: trace.meta_str("generator"),
                group: trace.meta_str("group"),
                features: &f.hidden,
                confidence: f.confidence.as_deref(),
                tokens: f.tokens,
                truncated_steps: f.truncated_steps,
            },
        )
    })?;
    out.flush().map_err(|e| Failure::Io(e.to_string()))?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "features: {traces} traces, {steps} steps, {tokens} tokens in {secs:.1} s ({:.0} tokens/s, {} family, width {}, layer {})",
        tokens as f64 / secs.max(1e-9),
        scorer.family(),
        scorer.model().config().hidden_size,
        args.layer.unwrap_or(n_layers)
    );
    finish(bad + failed)
}
