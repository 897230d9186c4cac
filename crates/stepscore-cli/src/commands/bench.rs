//! `stepscore bench`: prefill and scoring throughput of the CPU engine on a
//! synthetic trace of an exact token length.
//!
//! Three timings, so each can be set beside the matching llama.cpp figure
//! (scripts/bench/bench-vs-llama-cpp.sh):
//! - `prefill`: `Scorer::forward` only (the engine's final-normed hidden
//!   states, no vocabulary projection), like llama.cpp's prompt eval with
//!   logits for the last token only;
//! - `logits_all`: `forward` plus full-vocabulary logits for every position,
//!   like llama.cpp with `logits_all=True`;
//! - `score`: `Scorer::score_steps` end to end (tokenization, forward, the
//!   family's head; for `confidence`, full-vocabulary logits of every step
//!   token plus log-softmax and entropy).
//!
//! With a hardware GPU (`--backend auto`, the default), or any adapter,
//! software rasterizers included (`--backend gpu`), `prefill` and `score`
//! are also timed on the WGSL engine in the same run (auto skips llvmpipe
//! and its kind by the core's policy, saying why: there the kernels run on
//! the same CPU for minutes; `--backend cpu` skips it): a second scorer
//! opened with `Backend::Gpu`,
//! so what is timed is the core's engine, the one `score` runs. The append benchmark times a step of
//! `--append-step` tokens run after a cached prefix of `--append-prefix`
//! tokens against the same tokens run without a prefix, on each engine:
//! the cost of scoring a step of a trace being generated.
//!
//! `--decode N` times generation instead (`bench/decode.rs`): N
//! single-token steps on the KV cache after a `--decode-prompt`-token
//! prompt, with each step's full-vocabulary logits, and every weight shape
//! on one row.
//!
//! `--synthetic SHAPE` times a random-weight model of a real architecture
//! built in memory (`stepscore::engine::synthetic`: the real dimensions,
//! vocabulary and per-tensor weight formats, a byte-level vocabulary), so a
//! machine without the model file can measure; the memory it takes is said
//! (and checked against what the machine has free) before anything is
//! allocated, the big buffers are reserved fallibly (an error, not an
//! abort, when the memory is not there), and the 7B is built only when
//! named. Each phase is announced on stderr as it starts.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use stepscore::engine::synthetic::{self, Shape, Weights};
use stepscore::engine::{GgufModel, Simd};
use stepscore::prm::{Backend, Family, HeadSource, Scorer, ScorerOptions, Truncation};

use crate::commands::fetch;
use crate::output::Table;
use crate::Failure;

mod candidates;
mod decode;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Without --model, the default PRM's backbone is used: stepscore-prm-qwen1.5b, \
    Qwen2.5-Coder-1.5B-Instruct Q4_K_M (fetched into the cache on first use). Peak RSS is the process high-water mark (VmHWM), \
    load included.\n\
    Example:\n  stepscore bench --tokens 512 --threads 2 --repeats 5 --json"
)]
pub struct Args {
    /// A GGUF file, a Hugging Face checkpoint directory or a catalog name.
    #[arg(long, short, conflicts_with = "synthetic")]
    pub model: Option<PathBuf>,

    /// Time a random-weight model of a real architecture instead, built in
    /// memory: smollm2-135m (92 MiB, Q4_1), qwen2.5-0.5b (463 MiB, Q5_0 +
    /// Q8_0/Q6_K/Q4_K), qwen2.5-1.5b (1.04 GiB, Q4_K_M), 7b (Qwen2.5-7B,
    /// 4.4 GiB, Q4_K_M). Add the GPU engine's copy when it runs.
    #[arg(long, value_parser = parse_shape, value_name = "SHAPE")]
    pub synthetic: Option<Shape>,

    /// Seed of the synthetic weights.
    #[arg(long, default_value_t = 1, requires = "synthetic")]
    pub seed: u64,

    /// Formats of the synthetic weights: real (the checkpoint's), or every
    /// matrix in f16 or bf16 (the engines' 16-bit float kernels on a real
    /// shape; twice the bytes of Q8_0).
    #[arg(long, default_value = "real", value_parser = parse_weights, requires = "synthetic")]
    pub weights: Weights,

    /// PRM family used for the `score` timing.
    #[arg(long, default_value = "confidence")]
    pub family: Family,

    /// Length of the synthetic trace, in tokens (exact).
    #[arg(long, default_value_t = 512)]
    pub tokens: usize,

    /// CPU threads.
    #[arg(long, default_value_t = 2, value_parser = crate::options::threads)]
    pub threads: usize,

    /// Timed runs of each measurement (best and median are reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,

    /// Untimed runs before the timed ones.
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,

    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Time only the prefill: the logits and score_steps runs each take as
    /// long again, minutes on a 16k-token trace (their JSON fields are null).
    #[arg(long, conflicts_with_all = ["decode", "candidates"])]
    pub prefill_only: bool,

    /// Engines to time: auto (CPU, plus the GPU when there is a hardware
    /// one; software rasterizers such as llvmpipe are skipped), gpu (CPU and
    /// GPU on any adapter; fails without one), cpu.
    #[arg(long, default_value = "auto")]
    pub backend: Backend,

    /// Cached prefix of the append benchmark, in tokens (0 skips it).
    #[arg(long, default_value_t = 1024)]
    pub append_prefix: usize,

    /// New tokens of the append benchmark.
    #[arg(long, default_value_t = 32)]
    pub append_step: usize,

    /// Write the trace's token ids (and its text) as JSON to this file, so
    /// another runtime can be timed on exactly the same input.
    #[arg(long)]
    pub dump_tokens: Option<PathBuf>,

    /// Time generation instead: this many single-token steps on the KV
    /// cache after --decode-prompt tokens, each with its full-vocabulary
    /// logits (tokens/s), and every weight shape on one row.
    #[arg(long, value_name = "N")]
    pub decode: Option<usize>,

    /// The prompt before the --decode steps, in tokens.
    #[arg(long, default_value_t = 256, requires = "decode")]
    pub decode_prompt: usize,

    /// Time best-of-N scoring instead: N candidate solutions for one
    /// problem, scored one by one and with the problem's tokens shared.
    /// Without --model this is the default PRM with its own head (--family
    /// is not used).
    #[arg(long, value_name = "N", conflicts_with_all = ["decode", "synthetic"])]
    pub candidates: Option<usize>,

    /// The problem's length for --candidates (template included), in tokens (at least).
    #[arg(long, default_value_t = 200, requires = "candidates")]
    pub candidate_prompt: usize,

    /// Each candidate's length for --candidates, in tokens (at least; whole sentences).
    #[arg(long, default_value_t = 150, requires = "candidates")]
    pub candidate_tokens: usize,
}

/// Timings of one measurement, in seconds.
struct Timing {
    best: f64,
    median: f64,
}

impl Timing {
    fn of(mut secs: Vec<f64>) -> Timing {
        secs.sort_by(f64::total_cmp);
        let best = secs.first().copied().unwrap_or(f64::NAN);
        let median = match secs.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => secs[n / 2],
            n => (secs[n / 2 - 1] + secs[n / 2]) / 2.0,
        };
        Timing { best, median }
    }

    fn json(&self, tokens: usize) -> serde_json::Value {
        serde_json::json!({
            "best_s": self.best,
            "median_s": self.median,
            "best_tokens_per_s": tokens as f64 / self.best,
            "median_tokens_per_s": tokens as f64 / self.median,
        })
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    if args.repeats == 0 {
        return Err(Failure::Usage("--repeats must be at least 1".into()));
    }
    if args.threads == 0 {
        return Err(Failure::Usage(
            "--threads must be at least 1 (the benchmark pins a thread count)".into(),
        ));
    }
    if let Some(n) = args.candidates {
        return candidates_report(&args, n);
    }
    let source = Source::new(&args)?;
    let options = ScorerOptions {
        family: Some(args.family),
        threads: args.threads,
        max_tokens: None,
        truncation: Truncation::Error,
        quantize: None,
        ..ScorerOptions::default()
    };
    let rss_before_load = proc_status_kib("VmRSS");
    let started = Instant::now();
    let scorer = source.open(&options)?;
    let load_s = started.elapsed().as_secs_f64();
    let rss_after_load = proc_status_kib("VmRSS");
    if args.tokens < 8 || args.tokens > scorer.max_tokens() {
        return Err(Failure::Usage(format!(
            "--tokens {} is outside 8..={} (the model's context)",
            args.tokens,
            scorer.max_tokens()
        )));
    }

    if let Some(steps) = args.decode {
        return decode_report(&args, &source, &scorer, steps, load_s);
    }

    let trace = SyntheticTrace::build(&scorer, args.tokens)?;
    let steps: Vec<&str> = trace.steps.iter().map(String::as_str).collect();
    let enc = scorer.encode(&trace.problem, &steps)?;
    let logit_rows: usize = enc.step_tokens.iter().map(|r| r.len()).sum();
    if let Some(file) = &args.dump_tokens {
        let dump = serde_json::json!({
            "tokens": enc.tokens,
            "problem": trace.problem,
            "steps": trace.steps,
            "family": scorer.family().name(),
        });
        std::fs::write(file, dump.to_string())
            .map_err(|e| Failure::Io(format!("{}: {e}", file.display())))?;
    }

    let model = scorer.model();
    let n = enc.tokens.len();
    let runs = args.warmup + args.repeats;
    progress(&format!("cpu: prefill, {n} tokens x {runs} runs"));
    let prefill = time(args.warmup, args.repeats, || {
        scorer.forward(&enc.tokens, None).map(|_| ())
    })?;
    let (logits_all, score) = if args.prefill_only {
        (None, None)
    } else {
        progress("cpu: prefill + logits of every row");
        let logits_all = time(args.warmup, args.repeats, || {
            let hidden = scorer.forward(&enc.tokens, None)?;
            model.logits_for(&hidden.data, None).map(|_| ())
        })?;
        progress("cpu: score_steps");
        let score = time(args.warmup, args.repeats, || {
            scorer.score_steps(&trace.problem, &steps).map(|_| ())
        })?;
        (Some(logits_all), Some(score))
    };
    let peak_rss = proc_status_kib("VmHWM");

    let gpu = if args.backend == Backend::Cpu {
        Err("--backend cpu".to_string())
    } else {
        gpu_timings(&args, &source, &options, &enc.tokens, &trace, &steps)?
    };
    let append = if args.append_prefix == 0 {
        None
    } else {
        Some(append_bench(&args, &scorer, gpu.as_ref().ok())?)
    };

    let backend = Simd::detect().name().to_string();
    let cfg = model.config();
    if args.json {
        let value = serde_json::json!({
            "runtime": "stepscore",
            "model": source.name(),
            "synthetic": args.synthetic.map(|s| s.spec().name),
            "synthetic_weights": args.synthetic.map(|_| format!("{:?}", args.weights).to_lowercase()),
            "family": scorer.family().name(),
            "adapter": "cpu",
            "simd": backend,
            "threads": model.threads(),
            "tokens": n,
            "steps": steps.len(),
            "logit_rows_score": logit_rows,
            "vocab_size": cfg.vocab_size,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "load_s": load_s,
            "prefill": prefill.json(n),
            "logits_all": logits_all.as_ref().map(|t| t.json(n)),
            "score": score.as_ref().map(|t| t.json(n)),
            "rss_before_load_kib": rss_before_load,
            "rss_after_load_kib": rss_after_load,
            "peak_rss_kib": peak_rss,
            "gpu": match &gpu {
                Ok(g) => serde_json::json!({
                    "adapter": g.adapter,
                    "prefill": g.prefill.json(n),
                    "score": g.score.json(n),
                }),
                Err(why) => serde_json::json!({ "skipped": why }),
            },
            "append": append.as_ref().map(|a| a.json()),
        });
        return crate::output::print_line(value);
    }

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = crate::output::stdout_error;
    writeln!(
        out,
        "stepscore bench: {} ({} family), cpu/{backend}, {} threads, {n} tokens ({} steps, {logit_rows} scored tokens), \
         {} warmup + {} timed runs",
        source.name(),
        scorer.family(),
        model.threads(),
        steps.len(),
        args.warmup,
        args.repeats
    )
    .map_err(io)?;
    let mut table = Table::new(&[
        "engine",
        "measurement",
        "best tok/s",
        "median tok/s",
        "best ms",
    ]);
    let mut rows = vec![("cpu", "prefill (hidden states)", &prefill)];
    if let (Some(logits_all), Some(score)) = (&logits_all, &score) {
        rows.push(("cpu", "prefill + logits, all rows", logits_all));
        rows.push(("cpu", "score_steps end to end", score));
    }
    if let Ok(g) = &gpu {
        rows.push(("gpu", "prefill (hidden states)", &g.prefill));
        rows.push(("gpu", "score_steps end to end", &g.score));
    }
    for (engine, name, t) in rows {
        table.row(vec![
            engine.to_string(),
            name.to_string(),
            format!("{:.1}", n as f64 / t.best),
            format!("{:.1}", n as f64 / t.median),
            format!("{:.1}", t.best * 1e3),
        ]);
    }
    table.write(&mut out)?;
    match &gpu {
        Ok(g) => writeln!(out, "gpu engine: {}", g.adapter).map_err(io)?,
        Err(why) => writeln!(out, "gpu: skipped ({why})").map_err(io)?,
    }
    if let Some(a) = &append {
        for (engine, r) in [("cpu", Some(&a.cpu)), ("gpu", a.gpu.as_ref())] {
            if let Some(r) = r {
                writeln!(
                    out,
                    "append ({engine}): {} tokens after a cached {}-token prefix {:.1} ms vs without prefix {:.1} ms: {:.2}x",
                    a.step,
                    a.prefix,
                    r.append.best * 1e3,
                    r.plain.best * 1e3,
                    r.append.best / r.plain.best
                )
                .map_err(io)?;
            }
        }
    }
    let mib = |k: Option<u64>| {
        k.map_or_else(
            || "n/a".to_string(),
            |k| format!("{:.1} MiB", k as f64 / 1024.0),
        )
    };
    writeln!(
        out,
        "load {:.3}s; RSS before load {}, after load {}, peak {}",
        load_s,
        mib(rss_before_load),
        mib(rss_after_load),
        mib(peak_rss)
    )
    .map_err(io)?;
    Ok(())
}

/// `--candidates`: opens the model (the default PRM with its head when no
/// --model is given, else the model with --family) and runs
/// [`candidates::run`].
fn candidates_report(args: &Args, n: usize) -> Result<(), Failure> {
    let options = ScorerOptions {
        family: args.model.as_ref().map(|_| args.family),
        threads: args.threads,
        backend: Backend::Cpu,
        ..ScorerOptions::default()
    };
    let name = args.model.as_deref().map_or_else(
        || "the default PRM".to_string(),
        |p| p.display().to_string(),
    );
    progress(&format!("loading {name}"));
    let mut display = fetch::FetchDisplay::default();
    let opened = stepscore::catalog::open(
        args.model.as_deref(),
        HeadSource::Checkpoint,
        &options,
        &mut |entry, p| display.show(entry, p),
    )
    .map_err(|e| Failure::during(format!("cannot load {name}"), e))?;
    candidates::run(args, &opened.scorer, &opened.path.display().to_string(), n)
}

/// `--decode`: runs [`decode::run`] and prints its table or JSON.
fn decode_report(
    args: &Args,
    source: &Source,
    scorer: &Scorer,
    steps: usize,
    load_s: f64,
) -> Result<(), Failure> {
    let prompt = args.decode_prompt;
    let (d, tokens) = decode::run(scorer, prompt, steps, args.warmup, args.repeats)?;
    if let Some(file) = &args.dump_tokens {
        let dump = serde_json::json!({
            "tokens": &tokens[..prompt],
            "decode": &tokens[prompt..],
        });
        std::fs::write(file, dump.to_string())
            .map_err(|e| Failure::Io(format!("{}: {e}", file.display())))?;
    }
    let simd = Simd::detect().name().to_string();
    let model = scorer.model();
    if args.json {
        let mut value = d.json();
        let extra = serde_json::json!({
            "runtime": "stepscore",
            "model": source.name(),
            "simd": simd,
            "threads": model.threads(),
            "vocab_size": model.config().vocab_size,
            "repeats": args.repeats,
            "warmup": args.warmup,
            "load_s": load_s,
            "peak_rss_kib": proc_status_kib("VmHWM"),
        });
        if let (Some(v), serde_json::Value::Object(e)) = (value.as_object_mut(), extra) {
            v.extend(e);
        }
        return crate::output::print_line(value);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = crate::output::stdout_error;
    writeln!(
        out,
        "stepscore bench --decode: {}, cpu/{simd}, {} threads, {steps} tokens after a {prompt}-token prompt, \
         full-vocabulary logits per token, {} warmup + {} timed runs",
        source.name(),
        model.threads(),
        args.warmup,
        args.repeats
    )
    .map_err(io)?;
    writeln!(
        out,
        "decode: best {:.2} tok/s ({:.2} ms/token), median {:.2} tok/s",
        steps as f64 / d.timing.best,
        d.timing.best * 1e3 / steps as f64,
        steps as f64 / d.timing.median
    )
    .map_err(io)?;
    let mut table = Table::new(&[
        "matrices",
        "format",
        "rows x cols",
        "per token",
        "best us",
        "GB/s",
        "ms/token",
    ]);
    for s in &d.shapes {
        table.row(vec![
            s.roles.clone(),
            s.ty.to_string(),
            format!("{}x{}", s.rows, s.cols),
            s.count.to_string(),
            format!("{:.1}", s.best_s * 1e6),
            format!("{:.1}", s.bytes as f64 / s.best_s / 1e9),
            format!("{:.2}", s.count as f64 * s.best_s * 1e3),
        ]);
    }
    table.write(&mut out)?;
    writeln!(
        out,
        "one-row matmuls: {:.2} ms of the {:.2} ms a token takes",
        d.matmul_ms_per_token(),
        d.timing.best * 1e3 / steps as f64
    )
    .map_err(io)?;
    Ok(())
}

/// The GPU engine's timings.
struct GpuTimings {
    adapter: String,
    /// The scorer on the GPU engine, for `prefill`, `score` and the append benchmark.
    scorer: Scorer,
    prefill: Timing,
    score: Timing,
}

/// Times `prefill` and `score` on the GPU; `Err(reason)` when there is no
/// usable adapter and `--backend auto` allows skipping.
fn gpu_timings(
    args: &Args,
    source: &Source,
    options: &ScorerOptions,
    tokens: &[u32],
    trace: &SyntheticTrace,
    steps: &[&str],
) -> Result<Result<GpuTimings, String>, Failure> {
    // Auto times the GPU engine only on a hardware GPU, the core's one
    // policy (`auto_preference`): on llvmpipe the kernels run on the same
    // CPU, minutes for a result nobody asked for. `--backend gpu` times any
    // adapter.
    if args.backend == Backend::Auto {
        let preference = stepscore::prm::auto_preference();
        if preference.chosen != Backend::Gpu {
            return Ok(Err(preference.to_string()));
        }
    }
    let options = ScorerOptions {
        backend: Backend::Gpu,
        ..options.clone()
    };
    progress(&format!("loading {} on the GPU engine", source.name()));
    let scorer = match source.try_open(&options) {
        Ok(s) => s,
        Err(e @ stepscore::Error::Gpu(_)) if args.backend == Backend::Auto => {
            return Ok(Err(e.to_string()))
        }
        Err(e) => {
            return Err(Failure::during(
                format!("cannot load {} on the GPU", source.name()),
                e,
            ))
        }
    };
    let adapter = scorer.backend_report().to_string();
    progress(&format!("gpu: prefill ({adapter})"));
    let prefill = time(args.warmup, args.repeats, || {
        scorer.forward(tokens, None).map(|_| ())
    })?;
    progress("gpu: score_steps");
    let score = time(args.warmup, args.repeats, || {
        scorer.score_steps(&trace.problem, steps).map(|_| ())
    })?;
    Ok(Ok(GpuTimings {
        adapter,
        scorer,
        prefill,
        score,
    }))
}

struct AppendPair {
    append: Timing,
    plain: Timing,
}

struct AppendTimings {
    prefix: usize,
    step: usize,
    cpu: AppendPair,
    gpu: Option<AppendPair>,
}

impl AppendTimings {
    fn json(&self) -> serde_json::Value {
        let pair = |p: &AppendPair| {
            serde_json::json!({
                "append_best_s": p.append.best,
                "append_median_s": p.append.median,
                "plain_best_s": p.plain.best,
                "plain_median_s": p.plain.median,
                "ratio_best": p.append.best / p.plain.best,
            })
        };
        serde_json::json!({
            "prefix_tokens": self.prefix,
            "step_tokens": self.step,
            "cpu": pair(&self.cpu),
            "gpu": self.gpu.as_ref().map(pair),
        })
    }
}

/// A step of `--append-step` tokens after a cached `--append-prefix`-token
/// prefix, against the same step without a prefix, per engine. The cache
/// is cut back to the prefix after every timed append.
fn append_bench(
    args: &Args,
    scorer: &Scorer,
    gpu: Option<&GpuTimings>,
) -> Result<AppendTimings, Failure> {
    let (prefix, step) = (args.append_prefix, args.append_step);
    let total = prefix + step;
    if step == 0 || total > scorer.max_tokens() {
        return Err(Failure::Usage(format!(
            "--append-prefix {prefix} + --append-step {step} must be within 1..={} tokens, with a step of at least 1",
            scorer.max_tokens()
        )));
    }
    let long = SyntheticTrace::build(scorer, total.max(8))?;
    let refs: Vec<&str> = long.steps.iter().map(String::as_str).collect();
    let tokens = scorer.encode(&long.problem, &refs)?.tokens;
    let (head, tail) = tokens.split_at(prefix);
    let tail = &tail[..step];

    let pair = |scorer: &Scorer| -> Result<AppendPair, Failure> {
        let mut cache = scorer.new_cache();
        scorer.forward(head, Some(&mut cache))?;
        Ok(AppendPair {
            append: time(args.warmup, args.repeats, || {
                scorer.forward(tail, Some(&mut cache))?;
                cache.truncate(prefix);
                Ok(())
            })?,
            plain: time(args.warmup, args.repeats, || {
                scorer.forward(tail, None).map(|_| ())
            })?,
        })
    };
    progress(&format!("cpu: append {step} tokens after {prefix}"));
    let cpu = pair(scorer)?;
    if gpu.is_some() {
        progress(&format!("gpu: append {step} tokens after {prefix}"));
    }
    let gpu = gpu.map(|g| pair(&g.scorer)).transpose()?;
    Ok(AppendTimings {
        prefix,
        step,
        cpu,
        gpu,
    })
}

fn parse_shape(name: &str) -> Result<Shape, String> {
    Shape::parse(name).map_err(|e| e.to_string())
}

fn parse_weights(name: &str) -> Result<Weights, String> {
    Weights::parse(name).map_err(|e| e.to_string())
}

/// The model to time: `--model` (a path or a catalog name), else the
/// default PRM's backbone, or a synthetic one built in memory.
enum Source {
    File(PathBuf),
    /// Both engines' scorers open the same bytes.
    Synthetic {
        shape: Shape,
        seed: u64,
        gguf: GgufModel,
    },
}

impl Source {
    fn new(args: &Args) -> Result<Source, Failure> {
        let Some(shape) = args.synthetic else {
            return Ok(Source::File(fetch::model_path(args.model.as_deref())?));
        };
        let spec = shape.spec().with_weights(args.weights);
        let weights = spec.weight_bytes();
        // The GPU engine keeps its own copy (device memory, or host memory on
        // a software adapter) beside the CPU engine's; auto makes one only
        // on a hardware GPU.
        let gpu_copy = match args.backend {
            Backend::Cpu => false,
            Backend::Gpu => true,
            Backend::Auto => stepscore::prm::auto_preference().chosen == Backend::Gpu,
        };
        let copies = if gpu_copy { 2 } else { 1 };
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        eprintln!(
            "stepscore bench: synthetic {} ({} layers, d {}, {} / {} heads, ffn {}, vocab {}; {}): \
             {:.2} GiB of random weights in memory{}",
            spec.name,
            spec.layers,
            spec.hidden,
            spec.heads,
            spec.kv_heads,
            spec.ffn,
            spec.vocab,
            spec.formats_summary(),
            gib(weights),
            if copies == 2 { ", the same again for the GPU engine" } else { "" },
        );
        if let Some(free) = proc_meminfo_kib("MemAvailable") {
            let need = weights * copies + (512 << 20);
            if need > free * 1024 {
                return Err(Failure::Usage(format!(
                    "--synthetic {} needs about {:.1} GiB and this machine has {:.1} GiB available{}",
                    spec.name,
                    gib(need),
                    gib(free * 1024),
                    if copies == 2 { " (--backend cpu needs one copy less)" } else { "" }
                )));
            }
        }
        progress(&format!("building synthetic {}", spec.name));
        let gguf = synthetic::generate_with(shape, args.seed, args.weights)
            .map_err(|e| Failure::during(format!("building synthetic {}", spec.name), e))?;
        Ok(Source::Synthetic {
            shape,
            seed: args.seed,
            gguf,
        })
    }

    fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Synthetic { shape, seed, .. } => {
                format!("synthetic {} (seed {seed})", shape.spec().name)
            }
        }
    }

    fn try_open(&self, options: &ScorerOptions) -> stepscore::Result<Scorer> {
        match self {
            Source::File(p) => Scorer::open(p, options),
            Source::Synthetic { gguf, .. } => {
                let shared = GgufModel {
                    file: gguf.file.clone(),
                    bytes: gguf.bytes.clone(),
                };
                Scorer::from_gguf(shared, &HeadSource::Checkpoint, options)
            }
        }
    }

    fn open(&self, options: &ScorerOptions) -> Result<Scorer, Failure> {
        self.try_open(options)
            .map_err(|e| Failure::during(format!("cannot load {}", self.name()), e))
    }
}

/// What the benchmark is doing now, on stderr: a run can take minutes and
/// must not look hung.
fn progress(what: &str) {
    eprintln!("stepscore bench: {what}...");
}

/// Runs `f` `warmup` times untimed, then `repeats` times timed.
fn time(
    warmup: usize,
    repeats: usize,
    mut f: impl FnMut() -> stepscore::Result<()>,
) -> Result<Timing, Failure> {
    for _ in 0..warmup {
        f()?;
    }
    let mut secs = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t = Instant::now();
        f()?;
        secs.push(t.elapsed().as_secs_f64());
    }
    Ok(Timing::of(secs))
}

/// A `kB` field of /proc/self/status (Linux); `None` elsewhere.
fn proc_status_kib(field: &str) -> Option<u64> {
    status_field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, field)
}

/// A `kB` field of /proc/meminfo (Linux); `None` elsewhere.
fn proc_meminfo_kib(field: &str) -> Option<u64> {
    status_field_kib(&std::fs::read_to_string("/proc/meminfo").ok()?, field)
}

/// The value of a `Name:   1234 kB` line of a /proc status text.
fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse().ok()
    })
}

/// A made-up but plausible worked solution whose encoding is exactly the
/// requested number of tokens.
struct SyntheticTrace {
    problem: String,
    steps: Vec<String>,
}

/// Deterministic numbers for the step text (a 64-bit LCG; quality is irrelevant).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below.max(1)
    }
}

fn step_text(i: usize, nums: &mut Numbers) -> String {
    let (a, b, c) = (nums.next(90) + 10, nums.next(90) + 10, nums.next(40) + 2);
    match i % 4 {
        0 => format!("Step {}: The crate holds {a} apples and {b} pears, so there are {a} + {b} = {} fruits in total.", i + 1, a + b),
        1 => format!("Step {}: Each of the {c} shelves takes {a} items, which gives {c} x {a} = {} items altogether.", i + 1, c * a),
        2 => format!("Step {}: Removing the {b} damaged ones leaves {} - {b} = {} items.", i + 1, a * c + b, a * c),
        _ => format!("Step {}: Splitting {} items evenly among {c} buyers gives {} items each, with no remainder.", i + 1, a * c, a),
    }
}

impl SyntheticTrace {
    fn build(scorer: &Scorer, target: usize) -> Result<SyntheticTrace, Failure> {
        let problem = "A grocer receives crates of fruit every morning, stacks them on shelves, throws away the \
            damaged pieces and sells the rest to a fixed number of buyers. Work out, step by step, how many \
            pieces each buyer gets."
            .to_string();
        let count = |steps: &[String]| -> Result<usize, Failure> {
            let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
            Ok(scorer.encode(&problem, &refs)?.tokens.len())
        };
        // The shortest trace this text makes: the problem and a one-character step.
        let least = count(&["1".to_string()])?;
        if least > target {
            return Err(Failure::Usage(format!(
                "--tokens {target} is shorter than the benchmark's problem text and one step ({least} tokens with this tokenizer)"
            )));
        }
        let mut nums = Numbers(0x5eed);
        let mut steps: Vec<String> = Vec::new();
        // Whole steps while they fit; each step is far shorter than any
        // context, so this stops after about target / 25 steps.
        loop {
            steps.push(step_text(steps.len(), &mut nums));
            if count(&steps)? > target {
                break;
            }
        }
        // The whole steps before the last one fit. The last one is not a
        // step of its own: it continues the one before (as more sentences
        // of it), cut to the prefix that lands exactly on `target`. A new
        // step would cost its separator tokens too, so when the fitting
        // steps ended one or two tokens short of `target` no cut of a new
        // step could reach it (Qwen's 1,056 tokens). A few alternative
        // continuations cover the rare case where a merge jumps over it.
        let i = steps.len() - 1;
        let base = if i > 0 {
            steps.pop();
            steps[i - 1].clone()
        } else {
            String::new()
        };
        let last = steps.len() - 1;
        for alt in 0..16 {
            let more = step_text(i + alt, &mut nums);
            let full = if base.is_empty() {
                more
            } else {
                format!("{base} {more}")
            };
            let from = if base.is_empty() { 0 } else { base.len() };
            let cuts: Vec<usize> = full
                .char_indices()
                .map(|(b, _)| b)
                .filter(|&b| b > from)
                .chain([full.len()])
                .collect();
            let at = |k: usize, steps: &mut Vec<String>| -> Result<usize, Failure> {
                steps[last] = full[..cuts[k]].to_string();
                count(steps)
            };
            if !base.is_empty() {
                steps[last] = base.clone();
                if count(&steps)? == target {
                    return Ok(SyntheticTrace { problem, steps });
                }
            }
            // Largest cut with count <= target (counts grow with the prefix
            // almost monotonically; the exact check below is what matters).
            let (mut lo, mut hi) = (0usize, cuts.len());
            while lo < hi {
                let mid = (lo + hi) / 2;
                if at(mid, &mut steps)? <= target {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            for k in lo.saturating_sub(3)..(lo + 3).min(cuts.len()) {
                if at(k, &mut steps)? == target {
                    return Ok(SyntheticTrace { problem, steps });
                }
            }
        }
        Err(Failure::Usage(format!(
            "could not build a trace of exactly {target} tokens with this tokenizer"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `stepscore bench --synthetic`'s models (`stepscore::engine::synthetic`): the smallest shape (random
    /// weights of SmolLM2-135M's layout, built in memory) loads through the GGUF
    /// path with its byte-level vocabulary, scores a trace end to end with
    /// finite results, and its bytes follow from the seed alone.
    #[test]
    fn synthetic_model_loads_scores_and_stays_finite() {
        use stepscore::engine::synthetic::generate_with;

        let g = generate_with(Shape::Smollm2_135m, 3, Weights::Real).unwrap();
        let data = g.bytes.as_slice();
        assert_eq!(
            g.file.tensors.len(),
            1 + 30 * 9 + 1,
            "token_embd, 9 tensors a layer, output_norm"
        );
        let again = generate_with(Shape::Smollm2_135m, 3, Weights::Real).unwrap();
        assert!(again.bytes.as_slice() == data, "same seed, same model");
        let other = generate_with(Shape::Smollm2_135m, 4, Weights::Real).unwrap();
        assert!(other.bytes.as_slice() != data);
        drop((again, other));

        let options = ScorerOptions {
            family: Some(Family::Confidence),
            threads: 2,
            ..ScorerOptions::default()
        };
        let shared = GgufModel {
            file: g.file.clone(),
            bytes: g.bytes.clone(),
        };
        let scorer = Scorer::from_gguf(shared, &HeadSource::Checkpoint, &options).unwrap();
        let cfg = scorer.model().config();
        assert_eq!(
            (cfg.n_layers, cfg.hidden_size, cfg.vocab_size),
            (30, 576, 49152)
        );
        // Byte-level vocabulary without merges: one token per byte.
        assert_eq!(scorer.tokenizer().encode("2 + 3", false).unwrap().len(), 5);
        let score = scorer
            .score_steps("What is 2 + 3?", &["2 + 3 = 5.", "The answer is 5."])
            .unwrap();
        assert_eq!(score.step_scores.len(), 2);
        assert!(
            score
                .step_scores
                .iter()
                .all(|s| s.is_some_and(f64::is_finite)),
            "{:?}",
            score.step_scores
        );
        let tokens: Vec<u32> = (0..24).map(|i| 3 + i * 7).collect();
        let hidden = scorer.forward(&tokens, None).unwrap();
        assert!(hidden.data.iter().all(|v| v.is_finite()));
        let logits = scorer.model().logits_for(&hidden.data, None).unwrap();
        assert_eq!(logits.len(), 24 * 49152);
        assert!(logits.iter().all(|v| v.is_finite()));
        // Not all equal: the random weights carry the input through.
        assert!(hidden.data[..576] != hidden.data[576..2 * 576]);
    }

    /// Issue 22/23 item 14: `bench --model stepscore-prm-qwen1.5b` with the
    /// default options needs a trace of exactly 1,056 tokens (the append
    /// benchmark's 1,024 + 32), which the old search could not build. Every
    /// length around it, and the default 512, must come out exact.
    #[test]
    fn synthetic_traces_hit_every_length_on_the_default_model() {
        let Some(path) = stepscore::testing::find_catalog_model(stepscore::catalog::DEFAULT_PRM)
        else {
            eprintln!("skipped: the default PRM is not cached");
            return;
        };
        let options = ScorerOptions {
            family: Some(Family::Confidence),
            threads: 1,
            backend: Backend::Cpu,
            ..ScorerOptions::default()
        };
        let scorer = Scorer::open(&path, &options).unwrap();
        for target in [512, 1056].into_iter().chain(1040..1072) {
            let trace = SyntheticTrace::build(&scorer, target)
                .unwrap_or_else(|e| panic!("{target} tokens: {e:?}"));
            let steps: Vec<&str> = trace.steps.iter().map(String::as_str).collect();
            let n = scorer.encode(&trace.problem, &steps).unwrap().tokens.len();
            assert_eq!(n, target);
        }
    }

    #[test]
    fn timing_best_and_median() {
        let t = Timing::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((t.best, t.median), (1.0, 2.0));
        let t = Timing::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((t.best, t.median), (1.0, 2.5));
    }

    #[test]
    fn parses_status_fields() {
        let text =
            "Name:\tstepscore\nVmPeak:\t  300000 kB\nVmHWM:\t   212000 kB\nVmRSS:\t   27000 kB\n";
        assert_eq!(status_field_kib(text, "VmHWM"), Some(212_000));
        assert_eq!(status_field_kib(text, "VmRSS"), Some(27_000));
        // A prefix of another field's name is not that field.
        assert_eq!(status_field_kib(text, "Vm"), None);
        assert_eq!(status_field_kib(text, "Name"), None);
        assert_eq!(status_field_kib(text, "VmSwap"), None);
    }

    #[test]
    fn reads_this_process_high_water_mark() {
        if !cfg!(target_os = "linux") {
            return;
        }
        // One snapshot: the kernel reports VmHWM as at least the RSS of the
        // same moment, and a running test binary occupies well over 100 KiB.
        let Ok(text) = std::fs::read_to_string("/proc/self/status") else {
            panic!("/proc/self/status is unreadable on Linux");
        };
        let hwm = status_field_kib(&text, "VmHWM").unwrap_or(0);
        let rss = status_field_kib(&text, "VmRSS").unwrap_or(0);
        assert!(rss > 100 && hwm >= rss, "VmRSS {rss} VmHWM {hwm}");
    }
}
