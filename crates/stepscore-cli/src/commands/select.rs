//! `stepscore select`: choose among N candidate responses per problem.

use std::io::Write;

use serde::Serialize;
use stepscore::aggregate::Aggregation;
use stepscore::answer::answers_equal;
use stepscore::select::{best_of_n_accuracy_with, group_candidates, select_with, Selection, Vote};
use stepscore::validate::scored_steps;
use stepscore::Trace;

use crate::input::{finish, read_all, report, InputArgs, UnscoredArgs};
use crate::output::{clip, jsonl, num, OutputMode, Table};
use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Candidates are grouped by their `group` field, else by problem text. \
    Each candidate's steps must carry scores (probabilities in [0, 1]; see --unscored for \
    candidates whose last steps were left unscored by `score --truncation drop-steps`); a candidate that \
    does not is reported on stderr and left out. Its answer comes from `final_answer` or is \
    extracted from the response (\\boxed{}, ####, \"The answer is\", last number).\n\
    Example:\n  stepscore select tests/fixtures/best_of_n.jsonl --aggregation min"
)]
pub struct Args {
    #[command(flatten)]
    pub input: InputArgs,

    #[command(flatten)]
    pub scores: UnscoredArgs,

    /// How step scores combine into a candidate's score.
    #[arg(long, short, default_value = "min")]
    pub aggregation: Aggregation,

    /// Output: auto (table on a terminal, JSONL otherwise), table, jsonl.
    #[arg(long, value_enum, default_value = "auto")]
    pub output: OutputMode,
}

#[derive(Serialize)]
struct GroupRecord<'a> {
    kind: &'static str,
    group: &'a str,
    problem: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reference_answer: Option<&'a str>,
    #[serde(flatten)]
    selection: &'a Selection,
    /// Whether each method's answer equals the reference, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    correct: Option<Correct>,
}

#[derive(Serialize)]
struct Correct {
    best_of_n: bool,
    majority: bool,
    weighted: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let policy = args.scores.unscored;
    let (records, bad) = read_all(&args.input)?;
    let mut refused = 0;
    let traces: Vec<Trace> = records
        .into_iter()
        .filter_map(|r| match scored_steps(&r.trace, policy) {
            Ok(_) => Some(r.trace),
            Err(problem) => {
                report(&r.at, problem);
                refused += 1;
                None
            }
        })
        .collect();
    let groups = group_candidates(traces);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let as_table = args.output.table();
    let io = crate::output::stdout_error;

    for (key, candidates) in &groups {
        let selection = select_with(candidates, args.aggregation, policy);
        let reference = candidates
            .iter()
            .find_map(|c| c.reference_answer.as_deref());
        let correct = reference.map(|r| Correct {
            best_of_n: best_answer(&selection).is_some_and(|a| answers_equal(&a, r)),
            majority: selection
                .majority
                .as_ref()
                .is_some_and(|v| answers_equal(&v.answer, r)),
            weighted: selection
                .weighted
                .as_ref()
                .is_some_and(|v| answers_equal(&v.answer, r)),
        });
        let problem = candidates.first().map_or("", |c| c.problem.as_str());
        if as_table {
            write_group_table(
                &mut out,
                key,
                problem,
                reference,
                candidates,
                &selection,
                correct.as_ref(),
            )?;
        } else {
            jsonl(
                &mut out,
                &GroupRecord {
                    kind: "group",
                    group: key,
                    problem,
                    reference_answer: reference,
                    selection: &selection,
                    correct,
                },
            )?;
        }
    }

    let grouped: Vec<Vec<Trace>> = groups.into_iter().map(|(_, c)| c).collect();
    let report = best_of_n_accuracy_with(&grouped, args.aggregation, policy);
    if report.with_reference > 0 {
        if as_table {
            let pct = |k: usize| {
                format!(
                    "{k}/{} ({:.1}%)",
                    report.with_reference,
                    100.0 * k as f64 / report.with_reference as f64
                )
            };
            writeln!(
                out,
                "accuracy over {} problems with a reference answer:",
                report.with_reference
            )
            .map_err(io)?;
            let mut t = Table::new(&["method", "correct"]);
            t.row(vec![
                format!("best-of-N ({})", args.aggregation),
                pct(report.best_of_n_correct),
            ]);
            t.row(vec!["majority vote".into(), pct(report.majority_correct)]);
            t.row(vec![
                "PRM-weighted vote".into(),
                pct(report.weighted_correct),
            ]);
            t.row(vec![
                "oracle (any candidate)".into(),
                pct(report.oracle_correct),
            ]);
            t.write(&mut out)?;
        } else {
            #[derive(Serialize)]
            struct Summary<'a, T: Serialize> {
                kind: &'static str,
                aggregation: &'a str,
                #[serde(flatten)]
                report: T,
            }
            jsonl(
                &mut out,
                &Summary {
                    kind: "summary",
                    aggregation: args.aggregation.name(),
                    report: &report,
                },
            )?;
        }
    }
    out.flush().map_err(io)?;
    finish(bad + refused)
}

fn best_answer(selection: &Selection) -> Option<String> {
    let best = selection.best?;
    selection.candidates.get(best)?.answer.clone()
}

fn vote_text(vote: Option<&Vote>, weighted: bool) -> String {
    match vote {
        None => "no candidate has an answer".to_string(),
        Some(v) if weighted => format!(
            "{} (weight {:.3}, {} candidates)",
            v.display, v.weight, v.count
        ),
        Some(v) => format!("{} ({} of the votes)", v.display, v.count),
    }
}

fn mark(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "  [correct]",
        Some(false) => "  [wrong]",
        None => "",
    }
}

#[allow(clippy::too_many_arguments)]
fn write_group_table(
    out: &mut impl Write,
    key: &str,
    problem: &str,
    reference: Option<&str>,
    candidates: &[Trace],
    selection: &Selection,
    correct: Option<&Correct>,
) -> Result<(), Failure> {
    let io = crate::output::stdout_error;
    writeln!(out, "problem {key}: {}", clip(problem, 70)).map_err(io)?;
    if let Some(r) = reference {
        writeln!(out, "reference answer: {r}").map_err(io)?;
    }
    let mut t = Table::new(&[
        "",
        "candidate",
        "steps",
        &format!("score ({})", selection.aggregation),
        "answer",
    ]);
    for c in &selection.candidates {
        let chosen = if selection.best == Some(c.index) {
            "*"
        } else {
            ""
        };
        let name = c.id.clone().unwrap_or_else(|| format!("#{}", c.index));
        let steps = candidates.get(c.index).map_or(0, |t| t.steps.len());
        let steps = if c.unscored_steps > 0 {
            format!("{}/{steps}", steps - c.unscored_steps)
        } else {
            steps.to_string()
        };
        t.row(vec![
            chosen.to_string(),
            name,
            steps,
            num(c.score, 3),
            c.raw_answer.clone().unwrap_or_else(|| "-".to_string()),
        ]);
    }
    t.write(out)?;
    let best = match selection.best.and_then(|b| selection.candidates.get(b)) {
        Some(c) => format!(
            "{} (score {}, answer {})",
            c.id.clone().unwrap_or_else(|| format!("#{}", c.index)),
            num(c.score, 3),
            c.raw_answer.as_deref().unwrap_or("-")
        ),
        None => "none (no candidate has a complete set of scores)".to_string(),
    };
    writeln!(
        out,
        "best-of-N:         {best}{}",
        mark(correct.map(|c| c.best_of_n))
    )
    .map_err(io)?;
    writeln!(
        out,
        "majority vote:     {}{}",
        vote_text(selection.majority.as_ref(), false),
        mark(correct.map(|c| c.majority))
    )
    .map_err(io)?;
    writeln!(
        out,
        "PRM-weighted vote: {}{}",
        vote_text(selection.weighted.as_ref(), true),
        mark(correct.map(|c| c.weighted))
    )
    .map_err(io)?;
    writeln!(out).map_err(io)?;
    Ok(())
}
