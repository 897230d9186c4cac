//! `stepscore search`: PRM-guided search for each problem of a JSONL file
//! (best-of-N, step beam search or DVTS; see `stepscore::prm::search`).
//! One JSON line per problem: the chosen candidate and its answer, the
//! three choices side by side (best PRM aggregate, majority vote,
//! PRM-weighted vote), the finalists (every candidate with `--keep-all`)
//! with their steps and step scores, and what the search spent. With a
//! reference answer in the row each answer is checked against it. On a
//! terminal a progress line per problem shows the candidates being written.
//! Rows are read as `generate` reads them (`input::ProblemArgs`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use stepscore::aggregate::Aggregation;
use stepscore::answer::answers_equal;
use stepscore::prm::{Scorer, SearchEvent, SearchMethod, SearchOptions, SearchResult};

use super::generate::GenerationArgs;
use crate::input::{for_each_problem, report_error, ProblemArgs};
use crate::model_args::ModelArgs;
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  \
    echo '{\"problem\": \"What is 15% of 80?\", \"answer\": \"12\"}' | stepscore search --n 4\n  \
    stepscore search problems.jsonl --method beam --n 8 --beam-width 2 --token-budget 4000 --keep-all")]
pub struct Args {
    #[command(flatten)]
    pub input: ProblemArgs,

    /// The verifier is --model (with its head); this option names another
    /// model to write the candidates (a GGUF file, a checkpoint directory
    /// or a catalog name). Default: the verifier's own model (one copy of
    /// the weights when the PRM keeps its LM head, as the default PRM does).
    #[arg(long)]
    pub generator: Option<PathBuf>,

    #[command(flatten)]
    pub model: ModelArgs,

    /// best-of-n, beam (step beam search) or dvts (diverse verifier tree search).
    #[arg(long, default_value_t = SearchOptions::default().method, value_parser = method)]
    pub method: SearchMethod,

    /// Candidates per problem (N).
    #[arg(long, default_value_t = SearchOptions::default().n)]
    pub n: usize,

    /// Expansions per kept beam (M) for beam and dvts; N must be a multiple of it.
    #[arg(long, default_value_t = SearchOptions::default().beam_width)]
    pub beam_width: usize,

    /// Most steps per candidate for beam and dvts (the last is written to the end).
    #[arg(long, default_value_t = SearchOptions::default().max_steps)]
    pub max_steps: usize,

    /// How step scores rank a candidate: min, prod, last, mean, geo_mean.
    #[arg(long, default_value_t = SearchOptions::default().aggregation)]
    pub aggregation: Aggregation,

    /// Most generated tokens per problem over all its candidates (default: no limit).
    #[arg(long)]
    pub token_budget: Option<usize>,

    /// Write every candidate (pruned ones and DVTS's intermediate beams too),
    /// each answer checked against the row's reference: data for training a verifier.
    #[arg(long)]
    pub keep_all: bool,

    #[command(flatten)]
    pub generation: GenerationArgs,
}

fn method(s: &str) -> Result<SearchMethod, String> {
    serde_json::from_value(Value::String(s.to_string()))
        .map_err(|_| format!("unknown method `{s}` (expected best-of-n, beam or dvts)"))
}

pub fn run(args: Args) -> Result<(), Failure> {
    let options = SearchOptions {
        method: args.method,
        n: args.n,
        beam_width: args.beam_width,
        max_steps: args.max_steps,
        aggregation: args.aggregation,
        token_budget: args.token_budget,
        generate: args.generation.options(SearchOptions::default().generate)?,
    };
    options.validate()?;
    let problems = args.input.open()?;
    let verifier = args.model.open()?;
    let separate = generator(&args, &verifier)?;
    let generator = separate.as_ref().unwrap_or(&verifier);
    generator.can_generate()?;
    let live = std::io::stderr().is_terminal();
    let mut bad = 0;
    let bad_rows = for_each_problem(problems, |row| {
        let progress = Progress::new(live, row.at.line, options.n);
        let result = generator.search(&verifier, &row.problem, &options, &mut |e| {
            progress.on(e);
            true
        });
        progress.done();
        match result {
            Ok(result) => {
                let out = output(
                    row.id.as_deref(),
                    &row.problem,
                    row.reference.as_deref(),
                    &result,
                    args.keep_all,
                );
                crate::output::print_line(out)
            }
            Err(e) => {
                report_error(&stepscore::Error::input_at(row.at, e.to_string()));
                bad += 1;
                Ok(())
            }
        }
    })?;
    crate::input::finish(bad + bad_rows)
}

/// The generator `--generator` names, or the verifier's backbone when the
/// verifier itself cannot generate; `None`: the verifier generates.
fn generator(args: &Args, verifier: &Scorer) -> Result<Option<Scorer>, Failure> {
    let backbone = match &args.generator {
        Some(path) => ModelArgs {
            model: Some(path.clone()),
            head: None,
            family: None,
            ..args.model.clone()
        },
        None if verifier.can_generate().is_ok() => return Ok(None),
        None => ModelArgs {
            head: None,
            ..args.model.clone()
        },
    };
    let scorer = backbone.open_backbone()?;
    eprintln!(
        "stepscore: generator loaded (engine {})",
        scorer.backend_report()
    );
    Ok(Some(scorer))
}

/// One problem's output line.
fn output(
    id: Option<&str>,
    problem: &str,
    reference: Option<&str>,
    result: &SearchResult,
    keep_all: bool,
) -> Value {
    let correct = |answer: Option<&str>| match (reference, answer) {
        (Some(r), Some(a)) => Some(answers_equal(a, r)),
        (Some(_), None) => Some(false),
        (None, _) => None,
    };
    let candidates: Vec<Value> = result
        .candidates
        .iter()
        .filter(|c| keep_all || c.finalist)
        .map(|c| {
            let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
            if let (Some(ok), Value::Object(m)) = (correct(c.answer.as_deref()), &mut v) {
                m.insert("correct".into(), Value::Bool(ok));
            }
            v
        })
        .collect();
    let chosen = result.chosen.map(|i| &result.candidates[i]);
    let vote = |v: &Option<stepscore::select::Vote>| {
        v.as_ref().map(|v| {
            json!({
                "answer": v.display,
                "count": v.count,
                "weight": v.weight,
                "members": v.members,
                "correct": correct(Some(&v.display)),
            })
        })
    };
    json!({
        "id": id,
        "problem": problem,
        "reference": reference,
        "method": result.method,
        "chosen": result.chosen,
        "answer": chosen.and_then(|c| c.answer.clone()),
        "correct": chosen.and_then(|c| correct(c.answer.as_deref())),
        "choices": {
            "best": chosen.map(|c| json!({
                "candidate": c.index,
                "answer": c.answer,
                "score": c.score,
                "correct": correct(c.answer.as_deref()),
            })),
            "majority": vote(&result.selection.majority),
            "weighted": vote(&result.selection.weighted),
        },
        "aggregation": result.selection.aggregation,
        "finalists": result.finalists,
        "candidates": candidates,
        "prompt_tokens": result.prompt_tokens,
        "tokens_generated": result.tokens_generated,
        "tokens_scored": result.tokens_scored,
        "budget_exhausted": result.budget_exhausted,
    })
}

/// A one-line spinner per problem on a terminal: candidates made, live,
/// pruned, tokens written and the best step score so far.
struct Progress {
    bar: ProgressBar,
    row: usize,
    state: std::cell::RefCell<(usize, usize, usize, usize)>,
}

impl Progress {
    fn new(live: bool, row: usize, n: usize) -> Progress {
        let bar = if live {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            ProgressBar::hidden()
        };
        bar.set_message(format!("problem {row}: starting {n} candidates"));
        Progress {
            bar,
            row,
            state: std::cell::RefCell::new((0, 0, 0, 0)),
        }
    }

    fn on(&self, event: &SearchEvent) {
        let mut s = self.state.borrow_mut();
        let (made, tokens, steps, pruned) = &mut *s;
        match event {
            SearchEvent::Forked { .. } => *made += 1,
            SearchEvent::Token { .. } => *tokens += 1,
            SearchEvent::Step { .. } => *steps += 1,
            SearchEvent::Pruned { .. } => *pruned += 1,
            SearchEvent::Finished { .. } => {}
        }
        if *tokens % 8 == 0 || !matches!(event, SearchEvent::Token { .. }) {
            self.bar.set_message(format!(
                "problem {}: {made} candidates, {tokens} tokens, {steps} steps scored, {pruned} pruned",
                self.row
            ));
        }
    }

    fn done(&self) {
        self.bar.finish_and_clear();
    }
}
