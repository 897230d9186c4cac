//! PRM-guided search on real models: SmolLM2-135M generating, stepscore's
//! SmolLM2 value-head PRM verifying (small budgets, so it runs in seconds).
//! Checked against independent computations, not against itself: every
//! finalist's step scores equal scoring its finished text from scratch
//! (bit for bit), its steps are what the blank-line segmenter cuts from its
//! text, the choice is the best aggregate, the verifier ran each shared
//! prefix once, and budgets, cancellation and the methods' shapes hold.

#[cfg(feature = "gpu")]
use crate::gpu_support;

use stepscore::aggregate::{aggregate, Aggregation};
use stepscore::engine::Sampling;
use stepscore::prm::head_file::SMOLLM2_HEAD_NAME;
use stepscore::prm::{
    Backend, GenerateOptions, HeadFile, HeadSource, Scorer, ScorerOptions, SearchEvent,
    SearchMethod, SearchOptions, SearchResult, StopReason,
};
use stepscore::segment::Segmenter;

const PROBLEM: &str = "Tom has 3 boxes with 4 apples each. He eats 2 apples. How many are left?";

/// The generator (a backbone: the PRM drops its LM head) and the verifier.
fn open(backend: Backend) -> Option<(Scorer, Scorer)> {
    let Some(path) = stepscore::testing::find_catalog_model("smollm2-135m") else {
        eprintln!("SKIPPED: smollm2-135m not fetched (stepscore fetch smollm2-135m)");
        return None;
    };
    let options = ScorerOptions {
        backend,
        threads: 2,
        ..ScorerOptions::default()
    };
    let head = HeadFile::embedded(SMOLLM2_HEAD_NAME).unwrap();
    Some((
        Scorer::open_with(&path, &HeadSource::Backbone, &options).unwrap(),
        Scorer::open_with(&path, &HeadSource::Loaded(head.clone()), &options).unwrap(),
    ))
}

fn options(method: SearchMethod) -> SearchOptions {
    let defaults = SearchOptions::default();
    SearchOptions {
        method,
        n: 4,
        beam_width: 2,
        max_steps: 3,
        aggregation: Aggregation::Min,
        generate: GenerateOptions {
            sampling: Sampling {
                seed: 5,
                ..Sampling::default()
            },
            max_new_tokens: 24,
            ..defaults.generate
        },
        ..defaults
    }
}

fn run(
    generator: &Scorer,
    verifier: &Scorer,
    options: &SearchOptions,
) -> (SearchResult, Vec<SearchEvent>) {
    let mut events = Vec::new();
    let result = generator
        .search(verifier, PROBLEM, options, &mut |e| {
            events.push(e.clone());
            true
        })
        .unwrap();
    (result, events)
}

/// What holds for every method's result.
fn check_finalists(verifier: &Scorer, result: &SearchResult, how: Aggregation) {
    assert!(!result.finalists.is_empty());
    for &i in &result.finalists {
        let c = &result.candidates[i];
        assert!(c.finalist && !c.pruned, "candidate {i}");
        assert!(c.stop_reason.is_some(), "candidate {i} never ended");
        let cut: Vec<String> = Segmenter::BlankLine
            .segment(&c.text)
            .into_iter()
            .map(|s| s.text)
            .collect();
        assert_eq!(c.steps, cut, "candidate {i}: steps vs the segmenter");
        let steps: Vec<&str> = c.steps.iter().map(String::as_str).collect();
        let fresh = verifier.score_steps(PROBLEM, &steps).unwrap();
        let fresh: Vec<u64> = fresh
            .step_scores
            .iter()
            .map(|s| s.unwrap().to_bits())
            .collect();
        let ours: Vec<u64> = c.scores.iter().map(|s| s.to_bits()).collect();
        assert_eq!(
            ours, fresh,
            "candidate {i}: session scores vs scoring the text"
        );
        assert_eq!(c.score, aggregate(&c.scores, how));
    }
    let best = result
        .finalists
        .iter()
        .copied()
        .filter(|&i| result.candidates[i].score.is_some())
        .max_by(|&a, &b| {
            let (x, y) = (result.candidates[a].score, result.candidates[b].score);
            x.partial_cmp(&y).unwrap().then(b.cmp(&a))
        });
    assert_eq!(result.chosen, best);
    assert_eq!(result.selection.best, best);
    let generated: usize = result.candidates.iter().map(|c| c.tokens).sum::<usize>();
    assert!(result.tokens_generated <= generated);
}

#[test]
fn best_of_n_scores_every_step_as_a_fresh_scoring_would_and_shares_the_prompt() {
    let Some((generator, verifier)) = open(Backend::Cpu) else {
        return;
    };
    let o = options(SearchMethod::BestOfN);
    let (result, events) = run(&generator, &verifier, &o);
    assert_eq!(result.candidates.len(), 4);
    assert_eq!(result.finalists, vec![0, 1, 2, 3]);
    check_finalists(&verifier, &result, o.aggregation);
    // Independent samples: not all four texts are the same.
    let first = &result.candidates[0].text;
    assert!(result.candidates.iter().any(|c| &c.text != first));
    // The streamed tokens add up to each text; every step was announced.
    for c in &result.candidates {
        let streamed: String = events
            .iter()
            .filter_map(|e| match e {
                SearchEvent::Token { candidate, text } if *candidate == c.index => {
                    Some(text.as_str())
                }
                _ => None,
            })
            .collect();
        assert!(
            streamed.starts_with(c.text.as_str()),
            "candidate {}",
            c.index
        );
        let steps = events
            .iter()
            .filter(|e| matches!(e, SearchEvent::Step { candidate, .. } if *candidate == c.index))
            .count();
        assert_eq!(steps, c.scores.len());
    }
    // Generated tokens are each candidate's own; the prompt ran once.
    let tokens: usize = result.candidates.iter().map(|c| c.tokens).sum();
    assert_eq!(result.tokens_generated, tokens);
    // The verifier ran the problem's prefix once, then each step's tokens
    // and, per step, the one token before it (a session keeps keys and
    // values, not logits, and the head reads the step's first token's
    // log-prob): no more than that, where scoring each from scratch would
    // run the prefix once per candidate.
    let prefix = verifier.encode(PROBLEM, &["0"]).unwrap().step_tokens[0].start;
    let (mut tails, mut steps) = (0, 0);
    for c in &result.candidates {
        let texts: Vec<&str> = c.steps.iter().map(String::as_str).collect();
        tails += verifier.encode(PROBLEM, &texts).unwrap().tokens.len() - prefix;
        steps += texts.len();
    }
    assert!(
        result.tokens_scored <= prefix + tails + steps,
        "scored {} tokens; prefix {prefix} + tails {tails} + steps {steps}",
        result.tokens_scored
    );
    assert!(result.tokens_scored < 4 * prefix + tails);
    // The same options give the same search.
    let (again, _) = run(&generator, &verifier, &o);
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&result).unwrap()
    );
}

#[test]
fn beam_search_keeps_n_over_m_and_continues_each_m_times() {
    let Some((generator, verifier)) = open(Backend::Cpu) else {
        return;
    };
    let o = options(SearchMethod::Beam);
    let (result, events) = run(&generator, &verifier, &o);
    check_finalists(&verifier, &result, o.aggregation);
    assert!(result.finalists.len() <= o.n);
    // Every fork continues a candidate that was kept, from its text.
    for c in result.candidates.iter().filter(|c| c.parent.is_some()) {
        let p = &result.candidates[c.parent.unwrap()];
        assert!(!p.pruned, "candidate {} forked from a pruned one", c.index);
        assert_eq!(c.steps[0], p.steps[0], "candidate {}", c.index);
    }
    // After each step at most N/M unfinished beams are kept: a round prunes
    // every unfinished beam but the best two.
    let pruned = events
        .iter()
        .filter(|e| matches!(e, SearchEvent::Pruned { .. }))
        .count();
    let finished_early = result
        .candidates
        .iter()
        .filter(|c| c.stop_reason.is_some() && !c.finalist)
        .count();
    assert!(pruned + finished_early > 0 || result.candidates.len() == o.n);
    for c in result.candidates.iter().filter(|c| c.pruned && !c.finalist) {
        assert!(!result.finalists.contains(&c.index));
    }
}

#[test]
fn dvts_reports_m_children_per_subtree() {
    let Some((generator, verifier)) = open(Backend::Cpu) else {
        return;
    };
    let o = options(SearchMethod::Dvts);
    let (result, _) = run(&generator, &verifier, &o);
    check_finalists(&verifier, &result, o.aggregation);
    assert_eq!(result.finalists.len(), o.n);
    // Children of one expansion share their parent (none in the first).
    for pair in result.finalists.chunks(2) {
        let parents: Vec<_> = pair.iter().map(|&i| result.candidates[i].parent).collect();
        assert_eq!(parents[0], parents[1]);
    }
}

#[test]
fn a_token_budget_and_a_cancel_end_every_candidate() {
    let Some((generator, verifier)) = open(Backend::Cpu) else {
        return;
    };
    let o = SearchOptions {
        token_budget: Some(30),
        ..options(SearchMethod::BestOfN)
    };
    let (result, _) = run(&generator, &verifier, &o);
    assert_eq!(result.tokens_generated, 30);
    assert!(result.budget_exhausted);
    assert!(result
        .candidates
        .iter()
        .any(|c| c.stop_reason == Some(StopReason::Budget)));
    check_finalists(&verifier, &result, o.aggregation);

    let mut tokens = 0;
    let result = generator
        .search(&verifier, PROBLEM, &options(SearchMethod::Beam), &mut |e| {
            tokens += matches!(e, SearchEvent::Token { .. }) as usize;
            tokens < 7
        })
        .unwrap();
    assert!(result.cancelled);
    // The turn that wrote the seventh token finishes (one token per beam).
    assert!(
        (7..7 + 4).contains(&result.tokens_generated),
        "{}",
        result.tokens_generated
    );
    assert!(result
        .candidates
        .iter()
        .all(|c| c.stop_reason == Some(StopReason::Cancelled)));
}

#[test]
fn bad_search_options_are_typed_errors() {
    let Some((generator, verifier)) = open(Backend::Cpu) else {
        return;
    };
    let o = SearchOptions {
        n: 3,
        ..options(SearchMethod::Dvts)
    };
    let err = generator
        .search(&verifier, PROBLEM, &o, &mut |_| true)
        .unwrap_err();
    assert!(err.to_string().contains("multiple of beam_width"), "{err}");
}

#[cfg(feature = "gpu")]
#[test]
fn cpu_and_wgsl_engines_search_alike() {
    if !gpu_support::have_adapter() {
        return;
    }
    let (Some((cg, cv)), Some((gg, gv))) = (open(Backend::Cpu), open(Backend::Gpu)) else {
        return;
    };
    let o = SearchOptions {
        n: 2,
        beam_width: 1,
        max_steps: 2,
        generate: GenerateOptions {
            max_new_tokens: 16,
            ..options(SearchMethod::Beam).generate
        },
        ..options(SearchMethod::Beam)
    };
    let (a, _) = run(&cg, &cv, &o);
    let (b, _) = run(&gg, &gv, &o);
    // The same tokens, steps and choices; scores within 1e-4 (the fast
    // PRM's head reads log-probability statistics, which the two engines
    // compute to about 1e-7 apart).
    assert_close(
        &serde_json::to_value(&a).unwrap(),
        &serde_json::to_value(&b).unwrap(),
        "result",
    );
}

/// Equal JSON, except that non-integer numbers may differ by 1e-4.
#[cfg(feature = "gpu")]
fn assert_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-4, "{at}: CPU {x} vs GPU {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_close(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}: fields"
            );
            for (k, x) in x {
                assert_close(x, &y[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}
