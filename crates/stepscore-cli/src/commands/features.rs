//! `stepscore features`: per-step hidden-state features for training a head,
//! from the same encode + forward path that scoring runs.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use stepscore::prm::{DigitConfidence, FeatureOptions, StepConfidence};

use crate::input::{finish, for_each_record, report_error, InputArgs};
use crate::model_args::ModelArgs;
use crate::output::jsonl;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output: one JSON line per trace, {id, label, split, generator, group, \
    features: [[f32; hidden] per scored step], confidence: [{tokens, mean_logprob, min_logprob, \
    mean_entropy}] and digit_confidence: [{tokens, min_logprob, mean_logprob}] of the step's digit \
    tokens (with --confidence), tokens, truncated_steps}. `label` is the ProcessBench \
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

    /// The backbone and its engine (`--model` is required; `--head` does
    /// not apply; `--family` sets the prompt protocol whose marker positions
    /// are read).
    #[command(flatten)]
    pub model: ModelArgs,

    /// Also write the confidence statistics of each step's tokens (needs the
    /// model's LM head).
    #[arg(long)]
    pub confidence: bool,

    /// Read the hidden state of layer L (0..=n_layers: the residual stream
    /// after L blocks, through the final RMSNorm) instead of the final one.
    #[arg(long, value_name = "L")]
    pub layer: Option<usize>,

    /// Write to FILE instead of stdout, resuming it when it exists: traces
    /// whose key (`id`, else the input position `index`) it already holds are
    /// skipped and an unfinished last line is dropped, so an interrupted
    /// extraction (an hour on a 1.5B backbone) continues where it stopped.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Serialize)]
struct Record<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    /// The trace's 0-based position in the input (the resume key without an id).
    index: usize,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    digit_confidence: Option<&'a [DigitConfidence]>,
    tokens: usize,
    truncated_steps: usize,
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.model.model.is_none() {
        return Err(Failure::Usage(
            "--model is required: the backbone whose features are extracted".into(),
        ));
    }
    let scorer = args.model.open_backbone()?;
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
    let (mut out, done): (Box<dyn Write>, HashSet<String>) = match &args.out {
        Some(path) => {
            let done = resume(path)?;
            if !done.is_empty() {
                eprintln!(
                    "features: resuming {}: {} traces already there",
                    path.display(),
                    done.len()
                );
            }
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| Failure::Io(format!("{}: {e}", path.display())))?;
            (Box::new(file), done)
        }
        None => (Box::new(std::io::stdout().lock()), HashSet::new()),
    };
    // Typed, so a closed pipe or a full disk gets the I/O exit code.
    let sink_name = args
        .out
        .as_ref()
        .map_or("<stdout>".to_string(), |p| p.display().to_string());
    let write_error = |e: std::io::Error| Failure::from(stepscore::Error::io(&sink_name, e));
    let start = Instant::now();
    let (mut traces, mut steps, mut tokens, mut failed) = (0usize, 0usize, 0usize, 0usize);
    let mut skipped = 0usize;
    let mut index = 0usize;
    let bad = for_each_record(&args.input, |record| {
        let trace = &record.trace;
        let this = index;
        index += 1;
        if done.contains(&key(trace.id.as_deref(), this)) {
            skipped += 1;
            return Ok(());
        }
        let texts: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        let result = scorer.step_features_with(&trace.problem, &texts, &features);
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                // A trace the model cannot take (too long, a step without
                // tokens) is reported and skipped like a bad record.
                report_error(&stepscore::Error::input_at(
                    record.at.clone(),
                    e.to_string(),
                ));
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
                index: this,
                label: trace.first_error_label(),
                split: trace.meta_str("split"),
                generator: trace.meta_str("generator"),
                group: trace.meta_str("group"),
                features: &f.hidden,
                confidence: f.confidence.as_deref(),
                digit_confidence: f.digit_confidence.as_deref(),
                tokens: f.tokens,
                truncated_steps: f.truncated_steps,
            },
        )?;
        // Each record reaches the file whole before the next is computed.
        out.flush().map_err(write_error)
    })?;
    if skipped > 0 {
        eprintln!("features: {skipped} traces skipped (already in the output)");
    }
    out.flush().map_err(write_error)?;
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

fn key(id: Option<&str>, index: usize) -> String {
    match id {
        Some(id) => format!("id:{id}"),
        None => format!("index:{index}"),
    }
}

/// The keys of the complete records in an existing output file, after
/// cutting off an unfinished last line (a killed run's partial write).
fn resume(path: &Path) -> Result<HashSet<String>, Failure> {
    let io = |e: std::io::Error| Failure::Io(format!("{}: {e}", path.display()));
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(io(e)),
    };
    let mut done = HashSet::new();
    let mut complete = 0u64;
    let mut reader = BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)?;
        if n == 0 || line.last() != Some(&b'\n') {
            break;
        }
        #[derive(serde::Deserialize)]
        struct Key {
            id: Option<String>,
            index: Option<usize>,
        }
        let k: Key = serde_json::from_slice(&line).map_err(|e| {
            Failure::Usage(format!(
                "{}: cannot resume: a line is not a features record: {e}",
                path.display()
            ))
        })?;
        let index = k.index.unwrap_or(usize::MAX);
        done.insert(key(k.id.as_deref(), index));
        complete += n as u64;
    }
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > complete {
        eprintln!(
            "features: dropping an unfinished last line of {} ({} bytes)",
            path.display(),
            len - complete
        );
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(complete))
            .map_err(io)?;
    }
    Ok(done)
}
