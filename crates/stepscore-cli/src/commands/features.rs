//! `stepscore features`: per-step hidden-state features for training a head,
//! from the same encode + forward path that scoring runs.

use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use base64::Engine as _;
use serde::Serialize;

use stepscore::prm::{
    DigitConfidence, FeatureCache, FeatureJob, FeatureOptions, Scorer, StepConfidence, StepFeatures,
};
use stepscore::{Location, Trace};

use crate::input::{finish, for_each_record, report_error, InputArgs};
use crate::model_args::ModelArgs;
use crate::output::jsonl;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output: one JSON line per trace, {id, index, label, split, generator, group, \
    metadata, layers, first_step, labels, features: [[f32] per scored step] (or features_b64), \
    confidence: [{tokens, mean_logprob, min_logprob, mean_entropy}] and digit_confidence: \
    [{tokens, min_logprob, mean_logprob, ...}] of the step's digit tokens (with --confidence), \
    tokens, truncated_steps}. `label` is the ProcessBench first-error index (-1: all correct; \
    absent when the row has no labels), `labels` each row's own step label, `first_step` the \
    step of the first row (see --from-first-label). Features are the final-normed hidden states \
    at the positions the family's head reads (value-head: each step's \"\\n\"); the head's own \
    tensors are not needed. With --layers L they are layer L's: the residual stream after the \
    first L blocks (0: the embeddings) through the model's final RMSNorm; a head trained on them \
    records `stepscore.layer` = L. With several layers a row is their states joined in the \
    order given (`layers` names them).\n\
    Speed: up to 8 problems share each forward pass, and a problem's records reuse the KV cache \
    of the tokens they share with the one before, so a tree of alternatives (PRM800K's rows, \
    in the order scripts/data/real_steps.py writes them) pays for each prefix once. Records \
    are written as their pass ends, in input order within a problem; `id` (else `index`) keys \
    the resume of --out. Timing goes to stderr.\n\
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

    /// Read the hidden states of these layers (0..=n_layers: the residual
    /// stream after L blocks, through the final RMSNorm; strictly
    /// ascending, comma-separated) instead of the final one.
    #[arg(
        long = "layers",
        alias = "layer",
        value_name = "L,...",
        value_delimiter = ','
    )]
    pub layers: Vec<usize>,

    /// Write rows only from each record's first labelled step on: earlier
    /// steps are context (a PRM800K row's prefix, whose own ratings are
    /// other rows).
    #[arg(long)]
    pub from_first_label: bool,

    /// `json`: each row a JSON array of numbers; `base64`: each row the
    /// base64 of its little-endian f32 values, in `features_b64` (a third
    /// of the size, exact).
    #[arg(long, value_name = "ENCODING", default_value = "json", value_parser = ["json", "base64"])]
    pub encoding: String,

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
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    metadata: &'a serde_json::Map<String, serde_json::Value>,
    /// The layers each row holds, joined in this order.
    layers: &'a [usize],
    first_step: usize,
    labels: Vec<Option<bool>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    features: Option<&'a [Vec<f32>]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    features_b64: Option<Vec<String>>,
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
    if let Some(l) = args.layers.iter().find(|&&l| l > n_layers) {
        return Err(Failure::Usage(format!(
            "--layers {l}: the model has {n_layers} layers (0 is the embeddings)"
        )));
    }
    if args.layers.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Failure::Usage(format!(
            "--layers {:?}: give the layers in strictly ascending order",
            args.layers
        )));
    }
    let features = FeatureOptions {
        layers: args.layers.clone(),
        confidence: args.confidence,
    };
    let base64 = args.encoding == "base64";
    let row_layers = if args.layers.is_empty() {
        vec![n_layers]
    } else {
        args.layers.clone()
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
    let mut totals = Totals::default();
    let mut skipped = 0usize;
    let mut index = 0usize;
    let mut emit = |(at, this, trace): Pending,
                    result: stepscore::Result<StepFeatures>,
                    totals: &mut Totals|
     -> Result<(), Failure> {
        let f = match result {
            Ok(f) => f,
            Err(e) => {
                // A trace the model cannot take (too long, a step without
                // tokens) is reported and skipped like a bad record.
                report_error(&stepscore::Error::input_at(at, e.to_string()));
                totals.failed += 1;
                return Ok(());
            }
        };
        totals.traces += 1;
        totals.steps += f.hidden.len();
        totals.tokens += f.tokens;
        let labels = trace.steps[f.first_step..]
            .iter()
            .take(f.hidden.len())
            .map(|s| s.label)
            .collect();
        let encoded = base64.then(|| {
            f.hidden
                .iter()
                .map(|row| {
                    let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                })
                .collect()
        });
        jsonl(
            &mut out,
            &Record {
                id: trace.id.as_deref(),
                index: this,
                label: trace.first_error_label(),
                split: trace.meta_str("split"),
                generator: trace.meta_str("generator"),
                group: trace.meta_str("group"),
                metadata: &trace.metadata,
                layers: &row_layers,
                first_step: f.first_step,
                labels,
                features: (!base64).then_some(f.hidden.as_slice()),
                features_b64: encoded,
                confidence: f.confidence.as_deref(),
                digit_confidence: f.digit_confidence.as_deref(),
                tokens: f.tokens,
                truncated_steps: f.truncated_steps,
            },
        )?;
        // Each record reaches the file whole before the next is computed.
        out.flush().map_err(write_error)
    };
    let mut lanes = Lanes::new(&scorer, &features, args.from_first_label);
    // Whole problems, in input order; the last one read may still grow.
    let mut problems: VecDeque<Vec<Pending>> = VecDeque::new();
    let bad = for_each_record(&args.input, |record| {
        let this = index;
        index += 1;
        if done.contains(&key(record.trace.id.as_deref(), this)) {
            skipped += 1;
            return Ok(());
        }
        if args.from_first_label && record.trace.steps.iter().all(|s| s.label.is_none()) {
            // Nothing to write: the trace has no labelled step.
            totals.unlabelled += 1;
            return Ok(());
        }
        match problems.back_mut() {
            Some(p) if p[0].2.problem == record.trace.problem => {
                p.push((record.at, this, record.trace))
            }
            _ => problems.push_back(vec![(record.at, this, record.trace)]),
        }
        if problems.len() > READ_AHEAD {
            let ready: VecDeque<_> = problems.drain(..problems.len() - 1).collect();
            lanes.run(ready, &mut |p, r| emit(p, r, &mut totals))?;
        }
        Ok(())
    })?;
    lanes.run(problems, &mut |p, r| emit(p, r, &mut totals))?;
    let Totals {
        traces,
        steps,
        tokens,
        failed,
        unlabelled,
    } = totals;
    if unlabelled > 0 {
        eprintln!(
            "features: {unlabelled} traces without a labelled step skipped (--from-first-label)"
        );
    }
    if skipped > 0 {
        eprintln!("features: {skipped} traces skipped (already in the output)");
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "features: {traces} traces, {steps} steps, {tokens} tokens run in {secs:.1} s ({:.0} tokens/s, {} family, width {}, layers {:?})",
        tokens as f64 / secs.max(1e-9),
        scorer.family(),
        scorer.model().config().hidden_size,
        if args.layers.is_empty() { vec![n_layers] } else { args.layers.clone() }
    );
    finish(bad + failed)
}

#[derive(Default)]
struct Totals {
    traces: usize,
    steps: usize,
    tokens: usize,
    failed: usize,
    unlabelled: usize,
}

/// A record read: where it came from, its input position, the trace.
type Pending = (Location, usize, Trace);

/// Problems read before their features are extracted (each lane works
/// through one problem's records at a time).
const READ_AHEAD: usize = 64;
/// Problems whose records share one forward pass at a time.
const LANES: usize = 8;
/// At most this many alternatives of one step join a pass (each holds a
/// copy of the prefix's cache).
const GROUP: usize = 16;

/// Feature extraction over several problems at once. Each lane works
/// through one problem's records in order, keeping the KV cache of the
/// last trace it ran; a round runs every lane's next records in one
/// forward pass, so the weights are unpacked once for all of them. A
/// lane's next records are the alternatives rated after one prefix (the
/// traces that differ from each other only in their last step), each on
/// its own copy of the lane's cache, when the cache holds that prefix
/// (PRM800K's order: the alternative the next prefix continues comes
/// last); otherwise the first of them alone, which builds it.
struct Lanes<'a> {
    scorer: &'a Scorer,
    options: &'a FeatureOptions,
    from_first_label: bool,
    lanes: Vec<Lane>,
}

struct Lane {
    cache: FeatureCache,
    /// The problem and steps of the trace the cache holds.
    holds: Option<(String, Vec<String>)>,
    queue: VecDeque<Pending>,
}

fn prefix_of(t: &Trace) -> (String, Vec<String>) {
    let n = t.steps.len().saturating_sub(1);
    (
        t.problem.clone(),
        t.steps[..n].iter().map(|s| s.text.clone()).collect(),
    )
}

impl<'a> Lanes<'a> {
    fn new(scorer: &'a Scorer, options: &'a FeatureOptions, from_first_label: bool) -> Self {
        Lanes {
            scorer,
            options,
            from_first_label,
            lanes: (0..LANES)
                .map(|_| Lane {
                    cache: scorer.feature_cache(),
                    holds: None,
                    queue: VecDeque::new(),
                })
                .collect(),
        }
    }

    /// Runs every record of `problems`, handing each with its features
    /// (or its own error) to `emit`; the outer error is a forward pass's.
    fn run(
        &mut self,
        mut problems: VecDeque<Vec<Pending>>,
        emit: &mut dyn FnMut(Pending, stepscore::Result<StepFeatures>) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        loop {
            for lane in &mut self.lanes {
                if lane.queue.is_empty() {
                    if let Some(p) = problems.pop_front() {
                        lane.queue = p.into();
                        lane.cache = self.scorer.feature_cache();
                        lane.holds = None;
                    }
                }
            }
            if self.lanes.iter().all(|l| l.queue.is_empty()) {
                return Ok(());
            }
            // Each lane's records for this round.
            let mut taken: Vec<Vec<Pending>> = Vec::with_capacity(LANES);
            for lane in &mut self.lanes {
                let Some((_, _, first)) = lane.queue.front() else {
                    taken.push(Vec::new());
                    continue;
                };
                let prefix = prefix_of(first);
                let n = if lane.holds.as_ref() == Some(&prefix) {
                    lane.queue
                        .iter()
                        .take(GROUP)
                        .take_while(|(_, _, t)| prefix_of(t) == prefix)
                        .count()
                } else {
                    1
                };
                taken.push(lane.queue.drain(..n).collect());
            }
            let texts: Vec<Vec<Vec<&str>>> = taken
                .iter()
                .map(|recs| {
                    recs.iter()
                        .map(|(_, _, t)| t.steps.iter().map(|s| s.text.as_str()).collect())
                        .collect()
                })
                .collect();
            // Copies of each lane's cache for all but its last record, which
            // takes the cache itself (and leaves it for the lane's next round).
            let mut caches: Vec<Vec<FeatureCache>> = self
                .lanes
                .iter_mut()
                .zip(&taken)
                .map(|(lane, recs)| {
                    let mut c: Vec<FeatureCache> =
                        (1..recs.len()).map(|_| lane.cache.clone()).collect();
                    if !recs.is_empty() {
                        c.push(std::mem::replace(
                            &mut lane.cache,
                            self.scorer.feature_cache(),
                        ));
                    }
                    c
                })
                .collect();
            let from_first_label = self.from_first_label;
            let from = |t: &Trace| {
                if from_first_label {
                    t.steps.iter().position(|s| s.label.is_some()).unwrap_or(0)
                } else {
                    0
                }
            };
            let mut jobs: Vec<FeatureJob<'_>> = Vec::new();
            for ((cs, recs), steps) in caches.iter_mut().zip(&taken).zip(&texts) {
                for ((cache, (_, _, t)), steps) in cs.iter_mut().zip(recs).zip(steps) {
                    jobs.push(FeatureJob {
                        cache,
                        problem: &t.problem,
                        steps,
                        from: from(t),
                    });
                }
            }
            let results = self
                .scorer
                .step_features_batch(&mut jobs, self.options)
                .map_err(|e| Failure::during("feature extraction", e))?;
            drop(jobs);
            let mut results = results.into_iter();
            for ((lane, recs), mut cs) in self.lanes.iter_mut().zip(taken).zip(caches) {
                if let (Some(last), Some((_, _, t))) = (cs.pop(), recs.last()) {
                    lane.cache = last;
                    lane.holds = Some((
                        t.problem.clone(),
                        t.steps.iter().map(|s| s.text.clone()).collect(),
                    ));
                }
                for rec in recs {
                    let r = results.next().ok_or_else(|| {
                        Failure::during(
                            "feature extraction",
                            stepscore::Error::Internal("a feature batch lost a record".into()),
                        )
                    })?;
                    emit(rec, r)?;
                }
            }
        }
    }
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
