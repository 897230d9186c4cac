//! `stepscore segment`: split responses into steps with their byte spans.

use std::io::Write;

use crate::input::{finish, for_each_trace, InputArgs};
use crate::output::{clip, jsonl, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example:\n  echo '{\"problem\":\"2+2?\",\"response\":\"2+2=4.\\n\\nThe answer is 4.\"}' | stepscore segment"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let table = args.output.table();
    let mut index = 0usize;
    let bad = for_each_trace(&args.input, |trace| {
        if table {
            let name = trace.id.clone().unwrap_or_else(|| format!("#{index}"));
            writeln!(out, "{name}: {}", clip(&trace.problem, 70))
                .map_err(crate::output::stdout_error)?;
            let mut t = Table::new(&["step", "span", "role", "text"]);
            for (i, step) in trace.steps.iter().enumerate() {
                let span = step
                    .span
                    .map_or("-".to_string(), |s| format!("{}..{}", s.start, s.end));
                let role = step.role.map_or(String::new(), |r| r.as_str().to_string());
                t.row(vec![i.to_string(), span, role, clip(&step.text, 60)]);
            }
            t.write(&mut out)?;
            writeln!(out).map_err(crate::output::stdout_error)?;
        } else {
            jsonl(&mut out, &trace)?;
        }
        index += 1;
        Ok(())
    })?;
    out.flush().map_err(crate::output::stdout_error)?;
    finish(bad)
}
