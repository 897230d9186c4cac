//! Scores each step of one trace with the `stepscore` crate.
//!
//! ```text
//! cargo run -p stepscore-example -- path/to/prm.gguf-or-checkpoint-dir
//! ```
//!
//! (`stepscore fetch stepscore-prm-smollm2` puts a PRM backbone in the cache;
//! CI runs this with the tiny fixture `tests/fixtures/prm/skywork-prm-tiny`.)

use stepscore::prm::{Scorer, ScorerOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(model) = std::env::args_os().nth(1) else {
        return Err("usage: stepscore-example <model: GGUF file or checkpoint directory>".into());
    };
    // threads 0: this process's share of the CPUs (stepscore::engine::thread_count's rule).
    let threads = stepscore::engine::thread_count(0, None);
    let scorer = Scorer::open(&model, &ScorerOptions::default())?;
    println!(
        "model {} ({} family), {} threads ({})",
        model.to_string_lossy(),
        scorer.family().name(),
        threads.threads,
        threads.source
    );

    let problem = "Tom has 3 boxes of 4 apples. He eats 2. How many apples are left?";
    let steps = [
        "3 boxes of 4 apples is 3 * 4 = 12 apples.",
        "He eats 2, so 12 - 2 = 10 apples are left.",
        "The answer is 10.",
    ];
    let result = scorer.score_steps(problem, &steps)?;
    for (step, score) in steps.iter().zip(&result.step_scores) {
        let score = score.map_or("not scored".to_string(), |s| format!("{s:.4}"));
        println!("{score}  {step}");
    }
    let scored: Vec<f64> = result.step_scores.iter().flatten().copied().collect();
    // The head's shipped threshold, else the default: the rule every front end uses.
    let threshold = scorer.threshold_in_force(None);
    match stepscore::aggregate::first_error(&scored, threshold) {
        Some(i) => println!("first step below {threshold}: {}", i + 1),
        None => println!("no step below {threshold}"),
    }
    Ok(())
}
