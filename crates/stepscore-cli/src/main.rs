//! The `stepscore` command-line tool.
//!
//! Exit codes ([`EXIT_CODES`], printed by `--help`), decided by the kind of
//! error ([`stepscore::Error`]'s variant), never by its message: 0 success;
//! 1 some input records were bad (each reported on stderr with its line, id
//! and field, the good ones still processed); 2 usage error; 3 I/O error (a
//! file that cannot be opened, read or written, a closed or broken stdout);
//! 4 a model or tokenizer file is malformed or unsupported; 5 the GPU
//! engine failed; 70 an internal error (a bug).

/// The CLI's `eprintln!` and `eprint!`: std's panic when stderr cannot be
/// written (`2>/dev/full` exited 101 with a panic, issue 44 D12); these drop
/// the message and leave the exit code to the command. Defined before the
/// modules, so they shadow std's everywhere in this crate.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

macro_rules! eprint {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod commands;
mod input;
mod model_args;
mod options;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use commands::{
    aggregate, bench, doctor, eval, features, fetch, generate, read, score, search, segment,
    select, serve, train, verify_stream,
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
        Exit codes: 0 success, 1 bad input records (reported on stderr, the good ones still \
        processed), 2 usage error, 3 I/O error (a file cannot be opened, read or written; stdout \
        closed), 4 model or tokenizer file unusable, 5 GPU error, 70 internal error (a bug)."
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
    /// Show what the reader makes of each row: its trace and format, or its error.
    Read(read::Args),
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
    /// Write a solution to each problem with a model (sampling, stop strings, step ends).
    Generate(generate::Args),
    /// PRM-guided search: best-of-N, step beam search or DVTS, with the choice by best score and votes.
    Search(search::Args),
    /// Score an OpenAI-compatible streaming completion step by step as it is written; stop it below a threshold.
    VerifyStream(verify_stream::Args),
}

/// What ended a command early.
#[derive(Debug)]
pub enum Failure {
    /// Some records were bad; the rest were processed.
    BadRecords(usize),
    /// A file could not be opened, read or written (a message the CLI made).
    Io(String),
    /// A value given on the command line cannot be used.
    Usage(String),
    /// A typed error from the library, with what the command was doing.
    Core {
        context: Option<String>,
        error: Box<stepscore::Error>,
    },
}

impl Failure {
    /// `error`, said to have happened while doing `context`.
    pub fn during(context: impl Into<String>, error: stepscore::Error) -> Self {
        Failure::Core {
            context: Some(context.into()),
            error: Box::new(error),
        }
    }
}

impl From<stepscore::Error> for Failure {
    fn from(error: stepscore::Error) -> Self {
        Failure::Core {
            context: None,
            error: Box::new(error),
        }
    }
}

/// The process exit code of each kind of failure (see the module docs).
pub mod exit {
    pub const BAD_RECORDS: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const IO: u8 = 3;
    pub const MODEL: u8 = 4;
    pub const GPU: u8 = 5;
    pub const INTERNAL: u8 = 70;
}

/// The exit code for a library error, by its variant.
fn exit_code(e: &stepscore::Error) -> u8 {
    use stepscore::Error as E;
    match e {
        // A bad record that ended the run (an input that is not JSON Lines).
        E::Input { .. } | E::TraceTooLong { .. } => exit::BAD_RECORDS,
        E::InvalidArgument(_) => exit::USAGE,
        E::Io { .. } => exit::IO,
        E::Model { .. } | E::Tokenizer(_) => exit::MODEL,
        E::Gpu(_) => exit::GPU,
        E::Internal(_) => exit::INTERNAL,
    }
}

/// A message and exit code for a failure.
fn report(failure: Failure) -> (String, u8) {
    match failure {
        Failure::BadRecords(n) => (
            format!("{n} bad input record(s), see above"),
            exit::BAD_RECORDS,
        ),
        Failure::Usage(m) => (m, exit::USAGE),
        Failure::Io(m) => (m, exit::IO),
        Failure::Core { context, error } => {
            let code = exit_code(&error);
            let text = match error.as_ref() {
                // `stepscore ... | head`: the reader left; say so plainly.
                stepscore::Error::Io { path, source }
                    if source.kind() == std::io::ErrorKind::BrokenPipe =>
                {
                    format!("{path}: the reading end of the pipe was closed; output is incomplete")
                }
                other => other.to_string(),
            };
            match context {
                Some(c) => (format!("{c}: {text}"), code),
                None => (text, code),
            }
        }
    }
}

/// Whether stdout was closed when the process started (`stepscore ... >&-`).
/// Rust's runtime reopens a closed standard descriptor on `/dev/null`, read
/// and write, so writes "succeed" and the output is lost without a word; a
/// shell redirect `>/dev/null` opens it write-only, which tells the two apart.
#[cfg(target_os = "linux")]
fn stdout_was_closed() -> bool {
    let is_null =
        std::fs::read_link("/proc/self/fd/1").is_ok_and(|p| p == std::path::Path::new("/dev/null"));
    if !is_null {
        return false;
    }
    // `flags:` in fdinfo is octal; O_ACCMODE is 3 and O_RDWR 2.
    std::fs::read_to_string("/proc/self/fdinfo/1").is_ok_and(|info| {
        info.lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .is_some_and(|flags| flags & 3 == 2)
    })
}

#[cfg(not(target_os = "linux"))]
fn stdout_was_closed() -> bool {
    false
}

fn main() -> ExitCode {
    // Mesa's Vulkan device-select layer, loaded while adapters are listed,
    // asks Wayland for a display and prints "error: XDG_RUNTIME_DIR is
    // invalid" when there is no session (servers, CI): noise on a run that
    // went well. Without a session it has no display to pick a GPU by, so
    // turning it off loses nothing; stepscore ranks adapters itself. Set
    // before any thread exists.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none_or(|v| v.is_empty())
        && std::env::var_os("NODEVICE_SELECT").is_none()
    {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let cli = Cli::parse();
    if stdout_was_closed() && cli.command.writes_stdout() {
        eprintln!("stepscore: <stdout> is closed; nothing could be written (redirect it to a file or /dev/null)");
        return ExitCode::from(exit::IO);
    }
    let result = match cli.command {
        Command::Score(args) => score::run(args),
        Command::Segment(args) => segment::run(args),
        Command::Read(args) => read::run(args),
        Command::Aggregate(args) => aggregate::run(args),
        Command::Select(args) => select::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Fetch(args) => fetch::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Features(args) => features::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Train(args) => train::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Search(args) => search::run(args),
        Command::VerifyStream(args) => verify_stream::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let (message, code) = report(failure);
            eprintln!("stepscore: {message}");
            ExitCode::from(code)
        }
    }
}

impl Command {
    /// Whether the command's results go to stdout (all but `train`, which
    /// writes its head file, and `serve`, which answers over HTTP: a server
    /// started with stdout on /dev/null read-write, as Python's
    /// `subprocess.run(stdout=DEVNULL)` does, exited 3, issue 44 D11).
    fn writes_stdout(&self) -> bool {
        !matches!(self, Command::Train(_) | Command::Serve(_))
    }
}
