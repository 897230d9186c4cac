//! `stepscore score`: run a PRM over traces and write per-step scores.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use stepscore::aggregate::{aggregate, Aggregation};
use stepscore::prm::verdict::{first_error_with_verdict, solution_score};
use stepscore::prm::{Family, TraceScore, Verdict};
use stepscore::validate::Scored;
use stepscore::Trace;

use crate::input::{finish, for_each_record, report_error, InputArgs};
use crate::model_args::ModelArgs;
use crate::output::{clip, jsonl, num, OutputMode};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Output (JSONL) is each input trace in stepscore's format with `score` set on \
    every step, and `metadata.stepscore` holding the family, token count, truncation and (for the \
    confidence family) per-step log-probability statistics; pipe it into `stepscore aggregate`, \
    `select` or `eval`.\n\
    Without --model, the default PRM is used: stepscore-prm-qwen1.5b, Qwen2.5-Coder-1.5B-Instruct \
    (GGUF Q4_K_M, fetched into the cache on first use) with stepscore's calibrated head (built \
    in; see docs/TRAINING.md). `--family confidence` without --model scores with that \
    backbone's own token confidence.\n\
    Example:\n  stepscore score examples/traces.jsonl --output table"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    /// Aggregation shown in the table.
    #[arg(long, short, default_value = "min")]
    pub aggregation: Aggregation,

    /// A step scoring below this is marked as the first error in the table, in [0, 1]
    /// (default: the threshold the model's head was shipped with, else 0.5).
    #[arg(long, value_parser = crate::options::threshold)]
    pub threshold: Option<f64>,

    /// JSONL: also write each scored step's token log-probabilities with the byte range of the
    /// step text each token covers (`metadata.stepscore.token_logprobs`: per step a list of
    /// {start, end, logprob, entropy}, the entropy being that of the distribution that predicted
    /// the token), for heads that read them (the default PRM, `--family confidence`).
    #[arg(long)]
    pub token_logprobs: bool,

    /// Also ask the model, in a second pass over about as many tokens as the trace, whether the
    /// whole solution is correct: `metadata.stepscore.verdict` = {p_yes, tokens}, P(Yes) of its
    /// answer (docs/TRAINING.md has what it adds to the step scores), and
    /// `solution_score`, the log-odds of the lowest step score plus those of P(Yes), flagged below
    /// the head's shipped `solution_threshold` when it has one (the default PRM does), with
    /// `first_error`: the first step below the step threshold, else the lowest step of a flagged
    /// solution (the table marks it). Needs a chat model opened with its LM head, as the default
    /// PRM is.
    #[arg(long)]
    pub verdict: bool,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let scorer = args.model.open()?;
    let threshold = scorer.threshold_in_force(args.threshold);

    let progress = progress_bar(&args.input);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let as_table = args.output.table();
    let mut failed = 0usize;
    let mut model_failed = 0usize;
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
                attach(&mut trace, &result, scorer.family(), args.token_logprobs);
                let verdict = if args.verdict {
                    let steps: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
                    match scorer.verdict(&trace.problem, &steps) {
                        Ok(v) => {
                            tokens += v.tokens;
                            Some(v)
                        }
                        // The scores stand; the missing verdict is reported
                        // and counts as a failed record.
                        Err(e) => {
                            failed += 1;
                            let e = stepscore::Error::input_at(at.clone(), format!("verdict: {e}"));
                            progress.suspend(|| report_error(&e));
                            None
                        }
                    }
                } else {
                    None
                };
                let solution = verdict.as_ref().and_then(|v| {
                    let lowest = result
                        .step_scores
                        .iter()
                        .flatten()
                        .copied()
                        .reduce(f64::min)?;
                    Some(Solution {
                        score: solution_score(lowest, v.p_yes),
                        threshold: scorer.solution_threshold(),
                    })
                });
                if let (Some(v), Some(info)) = (&verdict, trace.metadata.get_mut("stepscore")) {
                    let mut j = serde_json::to_value(v).unwrap_or_default();
                    if let Some(s) = &solution {
                        j["solution_score"] = s.score.into();
                        if let Some(t) = s.threshold {
                            j["solution_threshold"] = t.into();
                            j["solution_flagged"] = (s.score < t).into();
                            j["first_error"] = s.first_error(&result.scored(), threshold).into();
                        }
                    }
                    info["verdict"] = j;
                }
                if as_table {
                    let table = Table {
                        name: &name,
                        trace: &trace,
                        result: &result,
                        verdict: verdict.as_ref(),
                        solution: solution.as_ref(),
                    };
                    progress.suspend(|| write_table(&mut out, &table, &args, threshold))
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
            // The model gave this trace a non-finite score: no score is
            // written for it, the others are still scored, and the run ends
            // with the model's exit code.
            Err(e @ stepscore::Error::Model { .. }) => {
                failed += 1;
                model_failed += 1;
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
    if model_failed > 0 {
        return Err(Failure::Core {
            context: None,
            error: Box::new(stepscore::Error::model(
                "the model",
                format!("{model_failed} trace(s) could not be scored (see above)"),
            )),
        });
    }
    finish(bad + failed)
}

/// Writes the scores into the trace, and what produced them into its metadata.
fn attach(trace: &mut Trace, result: &TraceScore, family: Family, token_logprobs: bool) {
    for (step, score) in trace.steps.iter_mut().zip(&result.step_scores) {
        step.score = *score;
    }
    let mut info = serde_json::json!({
        "family": family.name(),
        "tokens": result.tokens,
        "truncated_steps": result.truncated_steps,
    });
    if let Some(z) = result.outcome_logit {
        info["outcome_logit"] = z.into();
    }
    if let Some(conf) = &result.confidence {
        info["confidence"] = serde_json::to_value(conf).unwrap_or_default();
    }
    if let Some(critique) = &result.critique {
        info["critique"] = serde_json::to_value(critique).unwrap_or_default();
    }
    if let Some(tokens) = result.token_logprobs.as_ref().filter(|_| token_logprobs) {
        info["token_logprobs"] = serde_json::to_value(tokens).unwrap_or_default();
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

/// Where a person should look in flagged step `i` (the core's
/// [`stepscore::prm::least_likely`] rule): the text and the token's log-prob.
/// `None` when the head read no token log-probabilities.
fn least_likely_token(result: &TraceScore, i: usize, text: &str) -> Option<(String, f64)> {
    let tokens = result.token_logprobs.as_ref()?.get(i)?;
    let l = stepscore::prm::least_likely(tokens, text)?;
    Some((text.get(l.start..l.end)?.to_string(), l.logprob))
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

/// One scored trace as the table shows it.
struct Table<'a> {
    name: &'a str,
    trace: &'a Trace,
    result: &'a TraceScore,
    verdict: Option<&'a Verdict>,
    solution: Option<&'a Solution>,
}

/// The step scores and the verdict as one solution score, and the head's
/// threshold for it.
struct Solution {
    score: f64,
    threshold: Option<f64>,
}

impl Solution {
    /// The first error by the step scores `scored` and the verdict together
    /// (`None` without a solution threshold): what the table marks and the
    /// JSONL's `verdict.first_error` holds.
    fn first_error(&self, scored: &Scored, threshold: f64) -> Option<usize> {
        let t = self.threshold?;
        first_error_with_verdict(&scored.scores, threshold, self.score, t).map(|i| i + scored.first)
    }
}

fn write_table(
    out: &mut impl Write,
    table: &Table<'_>,
    args: &Args,
    threshold: f64,
) -> Result<(), Failure> {
    let Table {
        name,
        trace,
        result,
        verdict,
        solution,
    } = *table;
    let io = crate::output::stdout_error;
    writeln!(out, "{name}: {}", clip(&trace.problem, 72)).map_err(io)?;
    let scored = result.scored();
    let by_steps = scored.first_error(threshold);
    // With the verdict a flagged solution marks its lowest step when no step
    // is below the threshold.
    let first = by_steps.or_else(|| solution.and_then(|s| s.first_error(&scored, threshold)));
    for (i, step) in trace.steps.iter().enumerate() {
        let s = result.step_scores.get(i).copied().flatten();
        let mark = match first {
            Some(f) if f == i && result.outcome_logit.is_some() => "  <- the solution is flagged",
            Some(f) if f == i && by_steps.is_some() => "  <- first error",
            Some(f) if f == i => "  <- first error (lowest step of a flagged solution)",
            _ => "",
        };
        writeln!(
            out,
            "  {i:>3}  {}  {:>6}  {}{mark}",
            bar(s.unwrap_or(f64::NAN)),
            num(s, 3),
            clip(&step.text, 60)
        )
        .map_err(io)?;
        if let Some(c) = &result.critique {
            match c.verdicts.get(i).copied().flatten() {
                Some(v) => writeln!(out, "       critique's verdict: {}", v.word()),
                None => writeln!(
                    out,
                    "       critique's verdict: none (it ended before this step)"
                ),
            }
            .map_err(io)?;
        }
        if first == Some(i) {
            if let Some((text, lp)) = least_likely_token(result, i, &step.text) {
                writeln!(
                    out,
                    "       least likely: {text:?} (token log-prob {lp:.1})"
                )
                .map_err(io)?;
            }
        }
        // Arithmetic that is false in exact arithmetic, whatever the PRM says.
        if let Some(e) = stepscore::recompute::recompute(&step.text).first_false() {
            writeln!(out, "       arithmetic: {}", e.explain()).map_err(io)?;
        }
    }
    let agg = aggregate(&scored.scores, args.aggregation);
    let truncated = if result.truncated_steps > 0 {
        format!(
            ", {} steps past the token limit unscored",
            result.truncated_steps
        )
    } else {
        String::new()
    };
    let logit = result.outcome_logit.map_or(String::new(), |z| {
        format!(" (the solution's score; logit {z:.3})")
    });
    writeln!(
        out,
        "  {} = {}{logit}, {} tokens{truncated}",
        args.aggregation,
        num(agg, 3),
        result.tokens
    )
    .map_err(io)?;
    if let Some(v) = verdict {
        let judged = match solution {
            Some(&Solution {
                score,
                threshold: Some(t),
            }) => {
                let (cmp, flag) = if score < t {
                    ("<", ": flagged as wrong")
                } else {
                    (">=", "")
                };
                format!("\n  solution score (lowest step + verdict, log-odds) {score:.2} {cmp} {t:.2}{flag}")
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "  verdict: the model reads the whole solution as correct with P = {:.3} ({} tokens){judged}",
            v.p_yes, v.tokens
        )
        .map_err(io)?;
    }
    writeln!(out).map_err(io)?;
    Ok(())
}
