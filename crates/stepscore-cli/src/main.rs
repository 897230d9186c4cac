//! The `stepscore` command-line tool.
//!
//! Exit codes: 0 success; 1 some input records were bad (each reported on
//! stderr with its line and field, the good ones still processed); 2 usage
//! error; 3 I/O error (a file that cannot be opened or written).

mod commands;
mod input;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{
    aggregate, bench, doctor, eval, features, fetch, score, segment, select, serve, train,
};

#[derive(Parser)]
#[command(
    name = "stepscore",
    version,
    about = "Score the steps of reasoning traces with process reward models",
    long_about = "Score the steps of reasoning traces with process reward models.\n\n\
        Reads traces as JSON or JSONL (ProcessBench rows, TRL PRM rows, raw {problem, response}, \
        chat messages, or stepscore's own format) from a file or stdin. Prints tables on a \
        terminal and JSONL when piped.\n\n\
        Exit codes: 0 success, 1 bad input records (reported on stderr), 2 usage error, 3 I/O error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Score every step of every trace with a PRM (GGUF or Hugging Face checkpoint).
    Score(score::Args),
    /// Split responses into steps, keeping each step's byte span.
    Segment(segment::Args),
    /// Combine per-step scores into trace scores and find the first error.
    Aggregate(aggregate::Args),
    /// Pick among N candidates per problem: best-of-N, majority and PRM-weighted vote.
    Select(select::Args),
    /// ProcessBench F1, step AUROC and calibration of scored, labelled traces.
    Eval(eval::Args),
    /// Per-step hidden-state features (and confidence statistics) for training a head.
    Features(features::Args),
    /// Train a value head on your own labelled traces (build with `--features train`).
    Train(train::Args),
    /// Download the default model into the local cache and verify its sha256.
    Fetch(fetch::Args),
    /// Time prefill and scoring on a synthetic trace of an exact token length.
    Bench(bench::Args),
    /// List the GPU adapters (features, limits) and what `--backend auto` would use.
    Doctor(doctor::Args),
    /// Serve rewards over HTTP for RL trainers (OpenRLHF's /get_reward and per-step scores).
    Serve(serve::Args),
}

/// What ended a command early.
pub enum Failure {
    /// Some records were bad; the rest were processed.
    BadRecords(usize),
    /// A file could not be opened, read or written.
    Io(String),
    /// A value given on the command line cannot be used.
    Usage(String),
}

impl From<stepscore::Error> for Failure {
    fn from(e: stepscore::Error) -> Self {
        match e {
            stepscore::Error::InvalidArgument(m) => Failure::Usage(m),
            other => Failure::Io(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Score(args) => score::run(args),
        Command::Segment(args) => segment::run(args),
        Command::Aggregate(args) => aggregate::run(args),
        Command::Select(args) => select::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Fetch(args) => fetch::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Features(args) => features::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Train(args) => train::run(args),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadRecords(n)) => {
            eprintln!("stepscore: {n} bad input record(s), see above");
            ExitCode::from(1)
        }
        Err(Failure::Usage(m)) => {
            eprintln!("stepscore: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Io(m)) => {
            // A closed pipe (`stepscore ... | head`) is a normal way to stop reading.
            if m.contains("Broken pipe") {
                return ExitCode::SUCCESS;
            }
            eprintln!("stepscore: {m}");
            ExitCode::from(3)
        }
    }
}
