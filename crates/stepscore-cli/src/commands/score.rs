//! `stepscore score`: run a PRM over traces and write per-step scores.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use stepscore::aggregate::{aggregate, first_error, Aggregation};
use stepscore::ggml::GgmlType;
use stepscore::prm::{Backend, Family, Scorer, ScorerOptions, TraceScore, Truncation};
use stepscore::Trace;

use crate::commands::fetch;
use crate::input::{finish, for_each_trace, InputArgs};
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

    /// CPU threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,

    /// Token limit per trace (the model's context length at most).
    #[arg(long)]
    pub max_tokens: Option<usize>,

    /// Score only the leading steps that fit the token limit instead of
    /// rejecting longer traces (dropped steps are reported).
    #[arg(long)]
    pub truncate: bool,

    /// Quantize a Hugging Face checkpoint's weights at load: q8_0 or q4_0.
    #[arg(long, value_parser = parse_quant)]
    pub quantize: Option<GgmlType>,

    /// Aggregation shown in the table.
    #[arg(long, short, default_value = "min")]
    pub aggregation: Aggregation,

    /// A step scoring below this is marked as the first error in the table.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let choice = fetch::resolve_model(args.model.as_deref())?;
    let path = choice.path.clone();
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
    let started = Instant::now();
    // A catalog PRM's built-in head applies unless another head or a family
    // that reads no value head (e.g. `--family confidence`) is asked for.
    let builtin_head = choice
        .head
        .as_ref()
        .filter(|_| args.head.is_none() && matches!(args.family, None | Some(Family::ValueHead)));
    let scorer = match (&args.head, builtin_head) {
        (Some(head), _) => Scorer::open_with_head(&path, head, &options),
        (None, Some(head)) => Scorer::open_with_head_file(&path, head, &options),
        (None, None) => Scorer::open(&path, &options),
    }
    .map_err(|e| Failure::Usage(format!("cannot load model: {e}")))?;
    let head_note = match (&args.head, builtin_head) {
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

    let progress = progress_bar(&args.input);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let as_table = args.output.table();
    let mut failed = 0usize;
    let mut index = 0usize;
    let (mut tokens, started) = (0usize, Instant::now());
    let bad = for_each_trace(&args.input, |mut trace| {
        let i = index;
        index += 1;
        progress.inc(1);
        let name = trace.id.clone().unwrap_or_else(|| format!("#{i}"));
        match scorer.score(&trace) {
            Ok(result) => {
                tokens += result.tokens;
                attach(&mut trace, &result, scorer.family());
                if as_table {
                    progress.suspend(|| write_table(&mut out, &name, &trace, &result, &args))
                } else {
                    jsonl(&mut out, &trace)
                }
            }
            Err(e) => {
                failed += 1;
                progress.suspend(|| eprintln!("error: trace {name} (record {}): {e}", i + 1));
                Ok(())
            }
        }
    })?;
    progress.finish_and_clear();
    out.flush().map_err(|e| Failure::Io(e.to_string()))?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "stepscore: scored {} traces, {tokens} tokens in {secs:.2}s ({:.0} tokens/s)",
        index - failed,
        tokens as f64 / secs.max(1e-9)
    );
    finish(bad + failed)
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
) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure::Io(e.to_string());
    writeln!(out, "{name}: {}", clip(&trace.problem, 72)).map_err(io)?;
    let scores: Vec<f64> = result
        .step_scores
        .iter()
        .map(|s| s.unwrap_or(f64::NAN))
        .collect();
    let scored = &scores[..scores.len() - result.truncated_steps];
    let first = first_error(scored, args.threshold);
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

fn parse_quant(s: &str) -> Result<GgmlType, String> {
    match s.to_ascii_lowercase().as_str() {
        "q8_0" | "q8" => Ok(GgmlType::Q8_0),
        "q4_0" | "q4" => Ok(GgmlType::Q4_0),
        _ => Err(format!(
            "`{s}`: load-time quantization supports q8_0 and q4_0"
        )),
    }
}
