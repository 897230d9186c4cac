//! `stepscore score`: run a PRM over traces and write per-step scores.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use stepscore::aggregate::{aggregate, first_error, Aggregation};
use stepscore::ggml::GgmlType;
use stepscore::prm::{Backend, Family, Scorer, ScorerOptions, TraceScore, Truncation};
use stepscore::Trace;

use crate::commands::fetch;
use crate::input::{finish, for_each_record, report_error, InputArgs};
use crate::output::{clip, jsonl, num, OutputMode};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output (JSONL) is each input trace in stepscore's format with `score` set on \
    every step, and `metadata.stepscore` holding the family, token count, truncation and (for the \
    confidence family) per-step log-probability statistics; pipe it into `stepscore aggregate`, \
    `select` or `eval`.\n\
    Without --model, the default PRM is used: SmolLM2-135M-Instruct (GGUF Q4_1, fetched into \
    the cache on first use) with stepscore's trained value head (built in; see docs/TRAINING.md). \
    `--family confidence` without --model scores with the backbone's own token confidence.\n\
    Example:\n  stepscore score examples/traces.jsonl --output table"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// A GGUF file, a Hugging Face checkpoint directory, or a catalog name
    /// (`stepscore fetch --list`); default: the default PRM.
    #[arg(long, short)]
    pub model: Option<PathBuf>,

    /// A PRM head in its own safetensors file (e.g. from `stepscore train`),
    /// applied to the --model backbone (default backbone: SmolLM2-135M-Instruct).
    #[arg(long)]
    pub head: Option<PathBuf>,

    /// PRM family: score-head, value-head, math-shepherd, rlhflow, confidence
    /// (detected from the checkpoint when omitted).
    #[arg(long)]
    pub family: Option<Family>,

    /// Engine: auto (a hardware GPU if there is one, else the CPU; a
    /// software rasterizer such as llvmpipe counts as no GPU), gpu (the WGSL
    /// engine on the chosen adapter, software ones included; STEPSCORE_ADAPTER
    /// picks by name), cpu.
    #[arg(long, default_value = "auto")]
    pub backend: Backend,

    /// CPU threads (0: all cores; more than the cores are capped, with a note).
    #[arg(long, default_value_t = 0, value_parser = crate::options::threads)]
    pub threads: usize,

    /// Token limit per trace, from 1 to the model's context length.
    #[arg(long, value_parser = crate::options::positive)]
    pub max_tokens: Option<usize>,

    /// Score only the leading steps that fit the token limit instead of
    /// rejecting longer traces (dropped steps are reported).
    #[arg(long)]
    pub truncate: bool,

    /// Quantize a Hugging Face checkpoint's weights at load: q8_0 or q4_0
    /// (refused for GGUF files, which keep the types they were written with).
    #[arg(long, value_parser = parse_quant)]
    pub quantize: Option<GgmlType>,

    /// Aggregation shown in the table.
    #[arg(long, short, default_value = "min")]
    pub aggregation: Aggregation,

    /// A step scoring below this is marked as the first error in the table, in [0, 1]
    /// (default: the threshold the model's head was shipped with, else 0.5).
    #[arg(long, value_parser = crate::options::threshold)]
    pub threshold: Option<f64>,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
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
        quantize: args.quantize,
        backend: args.backend,
    };
    let scorer = open_scorer(args.model.as_deref(), args.head.as_deref(), &options)?;
    let threshold = args
        .threshold
        .or(scorer.threshold())
        .unwrap_or(DEFAULT_THRESHOLD);

    let progress = progress_bar(&args.input);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let as_table = args.output.table();
    let mut failed = 0usize;
    let mut index = 0usize;
    let (mut tokens, started) = (0usize, Instant::now());
    let bad = for_each_record(&args.input, |record| {
        let (at, mut trace) = (record.at, record.trace);
        index += 1;
        progress.inc(1);
        let name = crate::input::record_name(&at);
        match scorer.score(&trace) {
            Ok(result) => {
                tokens += result.tokens;
                attach(&mut trace, &result, scorer.family());
                if as_table {
                    progress
                        .suspend(|| write_table(&mut out, &name, &trace, &result, &args, threshold))
                } else {
                    jsonl(&mut out, &trace)
                }
            }
            // What is wrong with this trace (too long, a blank step, a
            // step holding the family's marker, text the tokenizer refuses)
            // or a GPU failure the engine recovers from: report it, go on.
            Err(
                e @ (stepscore::Error::TraceTooLong { .. }
                | stepscore::Error::InvalidArgument(_)
                | stepscore::Error::Input { .. }
                | stepscore::Error::Tokenizer(_)
                | stepscore::Error::Gpu(_)),
            ) => {
                failed += 1;
                let e = stepscore::Error::input_at(at.clone(), e.to_string());
                progress.suspend(|| report_error(&e));
                Ok(())
            }
            // A broken model, an I/O error or a bug ends the run.
            Err(e) => Err(Failure::during(format!("scoring {}", at), e)),
        }
    })?;
    progress.finish_and_clear();
    out.flush().map_err(crate::output::stdout_error)?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "stepscore: scored {} traces, {tokens} tokens in {secs:.2}s ({:.0} tokens/s)",
        index - failed,
        tokens as f64 / secs.max(1e-9)
    );
    finish(bad + failed)
}

/// Loads the PRM a command names: `model` (a path, a catalog name, or by
/// default the default PRM; fetched when not cached) with `head` (default:
/// a catalog PRM's built-in head). Reports what was loaded and on which
/// engine on stderr.
pub fn open_scorer(
    model: Option<&Path>,
    head: Option<&Path>,
    options: &ScorerOptions,
) -> Result<Scorer, Failure> {
    // GGUF files (the default model included) are already quantized: the
    // flag would be ignored, so it is refused before anything is loaded.
    if let Some(q) = options.quantize {
        if !model.is_some_and(Path::is_dir) {
            let which = model.map_or("the default model".to_string(), |m| m.display().to_string());
            // Every catalog model is one GGUF file too.
            return Err(Failure::Usage(format!(
                "--quantize {}: load-time quantization applies to Hugging Face checkpoint \
                 directories; {which} is a GGUF file, which keeps the tensor types it was \
                 written with",
                q.name()
            )));
        }
    }
    let choice = fetch::resolve_model(model)?;
    let path = choice.path.clone();
    let started = Instant::now();
    // A catalog PRM's built-in head applies unless another head or a family
    // that reads no value head (e.g. `--family confidence`) is asked for.
    let builtin_head = choice
        .head
        .as_ref()
        .filter(|_| head.is_none() && matches!(options.family, None | Some(Family::ValueHead)));
    let scorer = match (head, builtin_head) {
        (Some(head), _) => Scorer::open_with_head(&path, head, options),
        (None, Some(head)) => Scorer::open_with_head_file(&path, head, options),
        (None, None) => Scorer::open(&path, options),
    }
    .map_err(|e| Failure::during("cannot load model", e))?;
    crate::options::max_tokens_fit(options.max_tokens, &scorer)?;
    let head_note = match (head, builtin_head) {
        (Some(h), _) => format!(" + head {}", h.display()),
        (None, Some(h)) => format!(" + built-in head {}", h.name()),
        (None, None) => String::new(),
    };
    eprintln!(
        "stepscore: {}{head_note} ({} family, {} layers, hidden {}) loaded in {:.2}s",
        choice.label,
        scorer.family(),
        scorer.model().config().n_layers,
        scorer.model().config().hidden_size,
        started.elapsed().as_secs_f64()
    );
    eprintln!("stepscore: engine {}", scorer.backend_report());
    Ok(scorer)
}

/// Writes the scores into the trace, and what produced them into its metadata.
fn attach(trace: &mut Trace, result: &TraceScore, family: Family) {
    for (step, score) in trace.steps.iter_mut().zip(&result.step_scores) {
        step.score = *score;
    }
    let mut info = serde_json::json!({
        "family": family.name(),
        "tokens": result.tokens,
        "truncated_steps": result.truncated_steps,
    });
    if let Some(conf) = &result.confidence {
        info["confidence"] = serde_json::to_value(conf).unwrap_or_default();
    }
    trace.metadata.insert("stepscore".to_string(), info);
}

fn progress_bar(input: &InputArgs) -> ProgressBar {
    if !std::io::stderr().is_terminal() || input.input.as_os_str() == "-" {
        return ProgressBar::hidden();
    }
    // A quick pass counting lines gives the bar its length.
    let total = std::fs::read(&input.input)
        .map(|b| b.split(|&c| c == b'\n').filter(|l| !l.is_empty()).count())
        .unwrap_or(0);
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} traces  {per_sec}  eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// The first-error threshold for a head shipped without one.
const DEFAULT_THRESHOLD: f64 = 0.5;

/// Eighths of a block, for bars with sub-character resolution.
const BAR_WIDTH: usize = 20;

fn bar(score: f64) -> String {
    if !score.is_finite() {
        return " ".repeat(BAR_WIDTH);
    }
    let eighths = (score.clamp(0.0, 1.0) * (BAR_WIDTH * 8) as f64).round() as usize;
    let mut s = "█".repeat(eighths / 8);
    const PARTS: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    s.push_str(PARTS[eighths % 8]);
    let used = eighths / 8 + usize::from(eighths % 8 > 0);
    s.push_str(&" ".repeat(BAR_WIDTH.saturating_sub(used)));
    s
}

fn write_table(
    out: &mut impl Write,
    name: &str,
    trace: &Trace,
    result: &TraceScore,
    args: &Args,
    threshold: f64,
) -> Result<(), Failure> {
    let io = crate::output::stdout_error;
    writeln!(out, "{name}: {}", clip(&trace.problem, 72)).map_err(io)?;
    let scores: Vec<f64> = result
        .step_scores
        .iter()
        .map(|s| s.unwrap_or(f64::NAN))
        .collect();
    let scored = &scores[..scores.len() - result.truncated_steps];
    let first = first_error(scored, threshold);
    for (i, step) in trace.steps.iter().enumerate() {
        let s = result.step_scores.get(i).copied().flatten();
        let mark = if first == Some(i) {
            "  <- first error"
        } else {
            ""
        };
        writeln!(
            out,
            "  {i:>3}  {}  {:>6}  {}{mark}",
            bar(s.unwrap_or(f64::NAN)),
            num(s, 3),
            clip(&step.text, 60)
        )
        .map_err(io)?;
    }
    let agg = aggregate(scored, args.aggregation);
    let truncated = if result.truncated_steps > 0 {
        format!(
            ", {} steps past the token limit unscored",
            result.truncated_steps
        )
    } else {
        String::new()
    };
    writeln!(
        out,
        "  {} = {}, {} tokens{truncated}\n",
        args.aggregation,
        num(agg, 3),
        result.tokens
    )
    .map_err(io)?;
    Ok(())
}

pub fn parse_quant(s: &str) -> Result<GgmlType, String> {
    match s.to_ascii_lowercase().as_str() {
        "q8_0" | "q8" => Ok(GgmlType::Q8_0),
        "q4_0" | "q4" => Ok(GgmlType::Q4_0),
        _ => Err(format!(
            "`{s}`: load-time quantization supports q8_0 and q4_0"
        )),
    }
}
