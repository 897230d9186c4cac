//! `stepscore generate`: a model writes a solution to each problem of a
//! JSONL file (`{"problem": ..., "id"?: ...}` or `{"prompt": ...}`), through
//! its chat template, on the CPU or GPU engine. One JSON line per problem:
//! its id, the text, its steps (blank-line segmentation), the tokens, and
//! why it stopped. On a terminal the text streams to stderr as it is written.
//! Rows are read by the core's reader, as `score` reads traces
//! (`input::ProblemArgs`): a bad row is reported and the others are written.

use std::io::{IsTerminal, Write};

use serde_json::json;
use stepscore::engine::Sampling;
use stepscore::prm::{GenerateOptions, StopReason};
use stepscore::segment::Segmenter;

use crate::input::{for_each_problem, report_error, ProblemArgs};
use crate::model_args::ModelArgs;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    echo '{\"problem\": \"What is 15% of 80?\"}' | stepscore generate --model smollm2-135m --temperature 0\n  \
    stepscore generate problems.jsonl --max-new-tokens 256 --seed 7 --stop-at-step")]
pub struct Args {
    #[command(flatten)]
    pub input: ProblemArgs,

    #[command(flatten)]
    pub model: ModelArgs,

    #[command(flatten)]
    pub generation: GenerationArgs,

    /// Stop after the first complete step (a blank line after some text).
    #[arg(long)]
    pub stop_at_step: bool,
}

/// How to write: sampling and limits, shared by `generate` and `search`.
#[derive(clap::Args, Debug)]
pub struct GenerationArgs {
    /// Most tokens to write per problem (per candidate in a search).
    #[arg(long, default_value_t = GenerateOptions::default().max_new_tokens, value_parser = crate::options::positive)]
    pub max_new_tokens: usize,

    /// 0 (or anything below 1e-4) is greedy: the most likely token; higher is more varied.
    #[arg(long, default_value_t = Sampling::default().temperature)]
    pub temperature: f64,

    /// Keep the k most likely tokens (0: all).
    #[arg(long, default_value_t = Sampling::default().top_k)]
    pub top_k: usize,

    /// Keep the fewest likely tokens whose probabilities reach p (1: all).
    #[arg(long, default_value_t = Sampling::default().top_p)]
    pub top_p: f64,

    /// Drop tokens less likely than min-p times the most likely one (0: none).
    #[arg(long, default_value_t = Sampling::default().min_p)]
    pub min_p: f64,

    /// Penalize tokens among the last --penalty-last-n (1: off).
    #[arg(long, default_value_t = Sampling::default().repetition_penalty)]
    pub repetition_penalty: f64,

    /// How many recent tokens the repetition penalty looks at.
    #[arg(long, default_value_t = Sampling::default().penalty_last_n)]
    pub penalty_last_n: usize,

    /// Seeds the sampling: the same seed writes the same text on every engine.
    #[arg(long, default_value_t = Sampling::default().seed)]
    pub seed: u64,

    /// Stop before this string (repeatable).
    #[arg(long)]
    pub stop: Vec<String>,

    /// Give the prompt to the model as it is, without its chat template.
    #[arg(long)]
    pub raw: bool,

    /// A system message for the chat template.
    #[arg(long)]
    pub system: Option<String>,
}

impl GenerationArgs {
    /// The options these flags say over the core's `defaults` (the
    /// generation's or the search's: they differ in the system message).
    pub fn options(&self, defaults: GenerateOptions) -> Result<GenerateOptions, Failure> {
        let options = GenerateOptions {
            sampling: Sampling {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                penalty_last_n: self.penalty_last_n,
                seed: self.seed,
            },
            max_new_tokens: self.max_new_tokens,
            stop: self.stop.clone(),
            chat: !self.raw,
            system: self.system.clone().or(defaults.system),
            ..defaults
        };
        options.sampling.validate()?;
        Ok(options)
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let options = GenerateOptions {
        stop_at_step: args.stop_at_step,
        ..args.generation.options(GenerateOptions::default())?
    };
    let problems = args.input.open()?;
    let scorer = args.model.open_backbone()?;
    scorer.can_generate()?;
    let live = std::io::stderr().is_terminal();
    let mut bad = 0;
    let bad_rows = for_each_problem(problems, |row| {
        let fail = |e: stepscore::Error| {
            report_error(&stepscore::Error::input_at(row.at.clone(), e.to_string()))
        };
        let mut generation = match scorer.generate(&row.problem, &options) {
            Ok(g) => g,
            Err(e) => {
                fail(e);
                bad += 1;
                return Ok(());
            }
        };
        let mut failed = None;
        for token in generation.by_ref() {
            match token {
                Ok(t) if live => {
                    eprint!("{}", t.text);
                    let _ = std::io::stderr().flush();
                }
                Ok(_) => {}
                Err(e) => failed = Some(e),
            }
        }
        if live {
            eprintln!();
        }
        if let Some(e) = failed {
            fail(e);
            bad += 1;
            return Ok(());
        }
        let text = generation.text().to_string();
        let steps: Vec<String> = Segmenter::BlankLine
            .segment(&text)
            .into_iter()
            .map(|s| s.text)
            .collect();
        let stop = generation
            .stop_reason()
            .cloned()
            .unwrap_or(StopReason::MaxTokens);
        let out = json!({
            "id": row.id,
            "problem": row.problem,
            "text": text,
            "steps": steps,
            "tokens": generation.tokens(),
            "prompt_tokens": generation.prompt_tokens(),
            "stop_reason": stop,
        });
        crate::output::print_line(out)
    })?;
    crate::input::finish(bad + bad_rows)
}
