//! `stepscore generate`: a model writes a solution to each problem of a
//! JSONL file (`{"problem": ..., "id"?: ...}` or `{"prompt": ...}`), through
//! its chat template, on the CPU or GPU engine. One JSON line per problem:
//! its id, the text, its steps (blank-line segmentation), the tokens, and
//! why it stopped. On a terminal the text streams to stderr as it is written.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use serde_json::{json, Value};
use stepscore::prm::{GenerateOptions, StopReason};
use stepscore::sample::Sampling;
use stepscore::segment::Segmenter;

use crate::model_args::ModelArgs;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    echo '{\"problem\": \"What is 15% of 80?\"}' | stepscore generate --model smollm2-135m --temperature 0\n  \
    stepscore generate problems.jsonl --max-new-tokens 256 --seed 7 --stop-at-step")]
pub struct Args {
    /// JSONL of problems (`problem` or `prompt`, optional `id`); `-` reads stdin.
    #[arg(default_value = "-")]
    pub input: PathBuf,

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
    #[arg(long, default_value_t = 512, value_parser = crate::options::positive)]
    pub max_new_tokens: usize,

    /// 0 is greedy (the most likely token); higher is more varied.
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

    /// Penalize tokens among the last 64 (1: off).
    #[arg(long, default_value_t = Sampling::default().repetition_penalty)]
    pub repetition_penalty: f64,

    /// Seeds the sampling: the same seed writes the same text on every engine.
    #[arg(long, default_value_t = 0)]
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
    /// The options these flags say; `system` when `--system` is not given.
    pub fn options(&self, system: Option<&str>) -> Result<GenerateOptions, Failure> {
        let options = GenerateOptions {
            sampling: Sampling {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repetition_penalty: self.repetition_penalty,
                seed: self.seed,
                ..Sampling::default()
            },
            max_new_tokens: self.max_new_tokens,
            stop: self.stop.clone(),
            stop_at_step: false,
            chat: !self.raw,
            system: self.system.clone().or(system.map(str::to_string)),
        };
        options.sampling.validate()?;
        Ok(options)
    }
}

/// The input file (or stdin) as lines, and its name for messages.
pub fn open_input(input: &std::path::Path) -> Result<(String, Box<dyn BufRead>), Failure> {
    if input.as_os_str() == "-" {
        return Ok(("<stdin>".to_string(), Box::new(std::io::stdin().lock())));
    }
    let source = input.display().to_string();
    let f = std::fs::File::open(input).map_err(|e| Failure::Io(format!("{source}: {e}")))?;
    Ok((source, Box::new(std::io::BufReader::new(f))))
}

pub fn run(args: Args) -> Result<(), Failure> {
    let options = GenerateOptions {
        stop_at_step: args.stop_at_step,
        ..args.generation.options(None)?
    };
    let (source, reader) = open_input(&args.input)?;
    let scorer = args.model.open_backbone()?;
    scorer.can_generate()?;
    let live = std::io::stderr().is_terminal();
    let mut bad = 0;
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| Failure::Io(format!("{source} line {}: {e}", i + 1)))?;
        if line.trim().is_empty() {
            continue;
        }
        let (id, prompt) = match problem(&line) {
            Ok(p) => (p.id, p.problem),
            Err(why) => {
                eprintln!("stepscore: {source} line {}: {why}", i + 1);
                bad += 1;
                continue;
            }
        };
        let mut generation = match scorer.generate(&prompt, &options) {
            Ok(g) => g,
            Err(e) => {
                eprintln!("stepscore: {source} line {}: {e}", i + 1);
                bad += 1;
                continue;
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
            eprintln!("stepscore: {source} line {}: {e}", i + 1);
            bad += 1;
            continue;
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
        let row = json!({
            "id": id,
            "problem": prompt,
            "text": text,
            "steps": steps,
            "tokens": generation.tokens(),
            "prompt_tokens": generation.prompt_tokens(),
            "stop_reason": stop,
        });
        crate::output::print_line(row)?;
    }
    if bad > 0 {
        return Err(Failure::BadRecords(bad));
    }
    Ok(())
}

/// One row of a problems file.
pub struct ProblemRow {
    pub id: Value,
    pub problem: String,
    /// The known answer (`reference_answer`, else `answer`), when given.
    pub reference: Option<String>,
}

/// A problem row: `problem` (or `prompt`, or `question`), optional `id`
/// and a reference answer (`reference_answer` or `answer`; a GSM8K-style
/// worked answer is reduced to what follows its `####`).
pub fn problem(line: &str) -> Result<ProblemRow, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let text = v
        .get("problem")
        .or_else(|| v.get("prompt"))
        .or_else(|| v.get("question"))
        .ok_or("no `problem`, `prompt` or `question` field")?
        .as_str()
        .ok_or("the problem must be a string")?
        .to_string();
    let reference = match v.get("reference_answer").or_else(|| v.get("answer")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.contains("####") => stepscore::answer::extract_answer(s),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => return Err("the reference answer must be a string or a number".into()),
    };
    Ok(ProblemRow {
        id: v.get("id").cloned().unwrap_or(Value::Null),
        problem: text,
        reference,
    })
}
