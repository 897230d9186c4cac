//! `stepscore bench --candidates N`: best-of-N scoring, N candidate
//! solutions for one problem. Timed two ways in the same run: each
//! candidate scored alone (`Scorer::score_steps`, the problem's tokens run
//! N times) and all of them with the problem's tokens run once
//! (`Scorer::score_candidates`: the problem primed into a KV cache, then each
//! candidate's steps in one pass after a copy of it). The two give the same
//! scores bit for bit, which the run checks before timing.

use std::io::Write;

use stepscore::prm::Scorer;

use super::{progress, step_text, time, Args, Numbers, Timing};
use crate::output::Table;
use crate::Failure;

/// The problem and the candidates the benchmark scores, with their sizes.
struct Candidates {
    problem: String,
    solutions: Vec<Vec<String>>,
    /// Tokens before the first step (template and problem).
    prompt_tokens: usize,
    /// Tokens of each whole candidate trace.
    trace_tokens: Vec<usize>,
}

/// A problem of at least `prompt` tokens and `n` different solutions of at
/// least `solution` tokens each (whole sentences, so a few tokens more).
fn build(scorer: &Scorer, n: usize, prompt: usize, solution: usize) -> Result<Candidates, Failure> {
    let prompt_len = |problem: &str| -> Result<usize, Failure> {
        let enc = scorer.encode(problem, &["1"])?;
        Ok(enc.step_tokens[0].start.min(enc.markers[0]))
    };
    let opening = "A grocer receives crates of fruit every morning and sells them to a fixed number of buyers.";
    let closing = " Work out, step by step, how many pieces each buyer gets.";
    let mut days = String::new();
    let mut nums = Numbers(0xc0ffee);
    let mut day = 1;
    let mut problem = format!("{opening}{closing}");
    while prompt_len(&problem)? < prompt {
        let (a, b) = (nums.next(90) + 10, nums.next(9) + 2);
        days.push_str(&format!(
            " On day {day} there are {a} crates and {b} free shelves."
        ));
        day += 1;
        problem = format!("{opening}{days}{closing}");
        if problem.len() > 64 * prompt.max(1) {
            return Err(Failure::Usage(format!(
                "--candidate-prompt {prompt}: the problem text does not reach that many tokens"
            )));
        }
    }
    let prompt_tokens = prompt_len(&problem)?;
    let mut solutions = Vec::with_capacity(n);
    let mut trace_tokens = Vec::with_capacity(n);
    for c in 0..n {
        let mut nums = Numbers(0x5eed + c as u64);
        let mut steps: Vec<String> = Vec::new();
        loop {
            steps.push(step_text(steps.len(), &mut nums));
            let refs: Vec<&str> = steps.iter().map(String::as_str).collect();
            let total = scorer.encode(&problem, &refs)?.tokens.len();
            if total >= prompt_tokens + solution {
                if total > scorer.max_tokens() {
                    return Err(Failure::Usage(format!(
                        "a candidate of {total} tokens is over the model's limit of {}",
                        scorer.max_tokens()
                    )));
                }
                trace_tokens.push(total);
                break;
            }
        }
        solutions.push(steps);
    }
    Ok(Candidates {
        problem,
        solutions,
        prompt_tokens,
        trace_tokens,
    })
}

/// Runs the benchmark and prints its table or JSON.
pub(super) fn run(args: &Args, scorer: &Scorer, model_name: &str, n: usize) -> Result<(), Failure> {
    if n == 0 {
        return Err(Failure::Usage("--candidates must be at least 1".into()));
    }
    let c = build(scorer, n, args.candidate_prompt, args.candidate_tokens)?;
    let cands: Vec<Vec<&str>> = c
        .solutions
        .iter()
        .map(|s| s.iter().map(String::as_str).collect())
        .collect();
    progress(&format!(
        "cpu: {n} candidates, one by one and sharing the {}-token prompt",
        c.prompt_tokens
    ));
    // The shared path must be the same computation, not a faster different one.
    let shared_scores = scorer.score_candidates(&c.problem, &cands)?;
    for (k, (cand, got)) in cands.iter().zip(&shared_scores).enumerate() {
        let alone = scorer.score_steps(&c.problem, cand)?;
        let same = alone.step_scores.len() == got.len()
            && alone
                .step_scores
                .iter()
                .zip(got)
                .all(|(a, b)| a.map(f64::to_bits) == Some(b.to_bits()));
        if !same {
            return Err(Failure::Usage(format!(
                "candidate {k}: the shared-prompt scores differ from scoring it alone"
            )));
        }
    }
    let one_by_one = time(args.warmup, args.repeats, || {
        for cand in &cands {
            scorer.score_steps(&c.problem, cand)?;
        }
        Ok(())
    })?;
    let shared = time(args.warmup, args.repeats, || {
        scorer.score_candidates(&c.problem, &cands).map(|_| ())
    })?;
    let tokens: usize = c.trace_tokens.iter().sum();
    let solution_tokens: Vec<usize> = c.trace_tokens.iter().map(|t| t - c.prompt_tokens).collect();
    let threads = scorer.model().threads();
    if args.json {
        let value = serde_json::json!({
            "runtime": "stepscore",
            "model": model_name,
            "family": scorer.family().name(),
            "threads": threads,
            "candidates": n,
            "prompt_tokens": c.prompt_tokens,
            "solution_tokens": solution_tokens,
            "one_by_one": one_by_one.json(tokens),
            "shared_prompt": shared.json(tokens),
            "ratio_best": shared.best / one_by_one.best,
            "ratio_median": shared.median / one_by_one.median,
            "scores_identical": true,
        });
        return crate::output::print_line(value);
    }
    let io = crate::output::stdout_error;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let (lo, hi) = (
        solution_tokens.iter().min().copied().unwrap_or(0),
        solution_tokens.iter().max().copied().unwrap_or(0),
    );
    writeln!(
        out,
        "stepscore bench --candidates: {model_name} ({} family), {threads} threads, {n} candidates of \
         {lo}-{hi} tokens after a {}-token prompt ({tokens} tokens in all), {} warmup + {} timed runs; \
         the shared-prompt scores equal the one-by-one scores bit for bit",
        scorer.family(),
        c.prompt_tokens,
        args.warmup,
        args.repeats
    )
    .map_err(io)?;
    let mut table = Table::new(&["scoring", "best s", "median s", "ratio (median)"]);
    let row = |t: &Timing, ratio: f64| {
        vec![
            format!("{:.3}", t.best),
            format!("{:.3}", t.median),
            format!("{ratio:.3}"),
        ]
    };
    let mut first = vec!["one by one".to_string()];
    first.extend(row(&one_by_one, 1.0));
    table.row(first);
    let mut second = vec!["shared prompt".to_string()];
    second.extend(row(&shared, shared.median / one_by_one.median));
    table.row(second);
    table.write(&mut out)
}
