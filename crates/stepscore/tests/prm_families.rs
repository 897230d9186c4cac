//! Each PRM family on a tiny checkpoint with the real layout, against step
//! scores from the independent Python reference (scripts/reference/prm_reference.py:
//! HF `tokenizers`, jinja2 chat templates, a float64 numpy forward).
//!
//! Tolerance: |Δscore| ≤ 1e-4 (the engine computes in f32; the reference in
//! f64). Token ids and marker positions must match exactly.

use std::path::PathBuf;

use serde::Deserialize;
use stepscore::prm::{Family, Scorer, ScorerOptions, Truncation};
use stepscore::{Error, Step, Trace};

#[derive(Deserialize)]
struct Reference {
    family: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    problem: String,
    steps: Vec<String>,
    input_ids: Vec<u32>,
    marker_positions: Vec<usize>,
    /// `null` where the family scores no such step (outcome: all but the last).
    step_scores: Vec<Option<f64>>,
    /// An outcome reward model's logit.
    #[serde(default)]
    logit: Option<f64>,
    #[serde(default)]
    mean_logprob: Option<Vec<f64>>,
    #[serde(default)]
    min_logprob: Option<Vec<f64>>,
    #[serde(default)]
    mean_entropy: Option<Vec<f64>>,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/prm")
        .join(name)
}

fn reference(name: &str) -> Reference {
    let text =
        std::fs::read_to_string(fixture(name).join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference.json parses")
}

/// Loads the fixture with its family detected (or given), checks the
/// detection, and compares every case.
fn check(name: &str, explicit: Option<Family>) {
    let reference = reference(name);
    let options = ScorerOptions {
        family: explicit,
        threads: 2,
        ..Default::default()
    };
    let scorer = Scorer::open(fixture(name), &options).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(scorer.family().name(), reference.family, "{name}: family");
    for (k, case) in reference.cases.iter().enumerate() {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let enc = scorer
            .encode(&case.problem, &steps)
            .unwrap_or_else(|e| panic!("{name} case {k}: {e}"));
        assert_eq!(enc.tokens, case.input_ids, "{name} case {k}: token ids");
        assert_eq!(
            enc.markers, case.marker_positions,
            "{name} case {k}: marker positions"
        );
        let got = scorer
            .score_steps(&case.problem, &steps)
            .unwrap_or_else(|e| panic!("{name} case {k}: {e}"));
        assert_eq!(got.step_scores.len(), case.step_scores.len());
        for (i, (g, want)) in got.step_scores.iter().zip(&case.step_scores).enumerate() {
            let Some(want) = want else {
                assert_eq!(
                    *g, None,
                    "{name} case {k} step {i}: scored, the reference has none"
                );
                continue;
            };
            let g = g.unwrap_or_else(|| panic!("{name} case {k} step {i}: unscored"));
            // Confidence scores are tiny probabilities of a random model:
            // compare those relatively.
            let tol = if reference.family == "confidence" {
                1e-4 * want.abs()
            } else {
                1e-4
            };
            assert!(
                (g - want).abs() <= tol,
                "{name} case {k} step {i}: {g} vs reference {want}"
            );
        }
        if let Some(want) = case.logit {
            let z = got.outcome_logit.expect("an outcome logit");
            assert!(
                (z - want).abs() <= 1e-4,
                "{name} case {k}: logit {z} vs {want}"
            );
        }
        if let (Some(conf), Some(mean), Some(min), Some(ent)) = (
            &got.confidence,
            &case.mean_logprob,
            &case.min_logprob,
            &case.mean_entropy,
        ) {
            for i in 0..conf.len() {
                assert!(
                    (conf[i].mean_logprob - mean[i]).abs() < 1e-4,
                    "{name} case {k} step {i}: mean log-prob"
                );
                assert!(
                    (conf[i].min_logprob - min[i]).abs() < 1e-4,
                    "{name} case {k} step {i}: min log-prob"
                );
                assert!(
                    (conf[i].mean_entropy - ent[i]).abs() < 1e-4,
                    "{name} case {k} step {i}: entropy"
                );
            }
        }
    }
}

#[test]
fn score_head_qwen2_prm() {
    check("qwen2-prm-tiny", None);
}

#[test]
fn value_head_skywork() {
    check("skywork-prm-tiny", None);
}

#[test]
fn lm_head_math_shepherd() {
    check("math-shepherd-tiny", None);
}

#[test]
fn lm_head_rlhflow() {
    // Nothing in an RLHFlow checkpoint names its protocol: it is chosen.
    check("rlhflow-tiny", Some(Family::Rlhflow));
}

#[test]
fn confidence_family() {
    check("confidence-tiny", Some(Family::Confidence));
}

/// The confidence family on a Gemma 3 checkpoint as transformers lays it out:
/// `gemma3_text` config, norms stored as gain - 1, a SentencePiece-style
/// tokenizer.json without a prepended "▁" whose post-processor adds `<bos>`.
#[test]
fn confidence_family_on_gemma3() {
    // Detected, not named: Gemma's vocabulary holds Math-Shepherd's tag "ки"
    // as an ordinary token, which alone once made it a Math-Shepherd PRM.
    check("gemma3-confidence-tiny", None);
}

#[test]
fn outcome_reward_model() {
    check("outcome-tiny", None);
}

/// A generative verifier's case: what the fixture's model writes (greedy) and
/// the verdicts' P(correct) read teacher-forced, from the float64 reference.
#[derive(Deserialize)]
struct CritiqueCase {
    problem: String,
    #[serde(default)]
    prompt_text: String,
    steps: Vec<String>,
    critique: String,
    #[serde(default)]
    stop_reason: Option<String>,
    input_ids: Vec<u32>,
    verdicts: Vec<Option<String>>,
    step_scores: Vec<Option<f64>>,
}

#[derive(Deserialize)]
struct CritiqueReference {
    cases: Vec<CritiqueCase>,
    given: CritiqueCase,
}

fn generative_scorer() -> Scorer {
    let options = ScorerOptions {
        family: Some(Family::Generative),
        threads: 2,
        ..Default::default()
    };
    Scorer::open(fixture("generative-tiny"), &options).expect("the generative fixture loads")
}

fn check_critique(what: &str, got: &stepscore::prm::TraceScore, want: &CritiqueCase) {
    let critique = got.critique.as_ref().expect("a critique");
    assert_eq!(critique.text, want.critique, "{what}: the critique written");
    let verdicts: Vec<Option<&str>> = critique
        .verdicts
        .iter()
        .map(|v| v.map(|v| v.word()))
        .collect();
    let want_verdicts: Vec<Option<&str>> = want.verdicts.iter().map(|v| v.as_deref()).collect();
    assert_eq!(verdicts, want_verdicts, "{what}: verdicts");
    assert_eq!(
        critique.stop_reason.as_ref().map(|r| r.name()),
        want.stop_reason.as_deref(),
        "{what}: why writing stopped"
    );
    assert_eq!(got.step_scores.len(), want.step_scores.len(), "{what}");
    for (i, (g, w)) in got.step_scores.iter().zip(&want.step_scores).enumerate() {
        match (g, w) {
            (Some(g), Some(w)) => assert!(
                (g - w).abs() <= 1e-4,
                "{what} step {i}: {g} vs reference {w}"
            ),
            (None, None) => {}
            _ => panic!("{what} step {i}: {g:?} vs reference {w:?}"),
        }
    }
}

#[test]
fn generative_verifier_writes_its_critique_and_scores_the_verdicts() {
    let text = std::fs::read_to_string(fixture("generative-tiny").join("reference.json")).unwrap();
    let reference: CritiqueReference = serde_json::from_str(&text).unwrap();
    let scorer = generative_scorer();
    assert_eq!(scorer.family(), Family::Generative);
    for (k, case) in reference.cases.iter().enumerate() {
        let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
        let got = scorer
            .score_steps(&case.problem, &steps)
            .unwrap_or_else(|e| panic!("case {k}: {e}"));
        check_critique(&format!("case {k}"), &got, case);
        // The prompt, the writing and the reading pass were all run.
        assert!(
            got.tokens > case.input_ids.len(),
            "case {k}: {} tokens",
            got.tokens
        );
    }
    // A critique written elsewhere (after the prompt the scorer hands out)
    // is read the same way, and only read.
    let given = &reference.given;
    let steps: Vec<&str> = given.steps.iter().map(String::as_str).collect();
    let prompt = scorer.critique_prompt(&given.problem, &steps).unwrap();
    assert_eq!(prompt, reference.cases[1].prompt_text);
    let got = scorer
        .score_critique(&given.problem, &steps, &given.critique)
        .unwrap();
    check_critique("the given critique", &got, given);
    assert_eq!(got.tokens, given.input_ids.len());
}

#[test]
fn generative_verifier_errors_say_what_is_wrong() {
    let scorer = generative_scorer();
    let steps = ["$2^{10} = 1024$.", "So the answer is \\boxed{1000}."];
    let err = |e: Error| e.to_string();
    // No verdict at all, or a gap before a verdict.
    let none = err(scorer
        .score_critique("Compute $2^{10}$.", &steps, "Step 1: fine.")
        .unwrap_err());
    assert!(none.contains("gives no step a verdict"), "{none}");
    // A budget that runs out before the first verdict says so.
    let short = stepscore::prm::CritiqueOptions {
        max_new_tokens: 2,
        ..Default::default()
    };
    let budget = err(scorer
        .critique("Compute $2^{10}$.", &steps, &short)
        .unwrap_err());
    assert!(budget.contains("writing stopped: max-tokens"), "{budget}");
    // Steps cannot be scored as they arrive, and a prompt alone has no marker.
    let session = err(scorer
        .session("Compute $2^{10}$.")
        .extend(&steps)
        .unwrap_err());
    assert!(
        session.contains("one critique of the whole solution"),
        "{session}"
    );
    let encode = err(scorer.encode("Compute $2^{10}$.", &steps).unwrap_err());
    assert!(encode.contains("verdict of a critique"), "{encode}");
    // A checkpoint without a chat template is refused at load, saying so.
    let bare = ScorerOptions {
        family: Some(Family::Generative),
        ..Default::default()
    };
    let no_chat = err(Scorer::open(fixture("confidence-tiny"), &bare).unwrap_err());
    assert!(
        no_chat.contains("needs a chat template") && no_chat.contains("this checkpoint has none"),
        "{no_chat}"
    );
    // The family is named, never detected: the checkpoint is a plain causal LM.
    let plain = Scorer::open(fixture("generative-tiny"), &ScorerOptions::default()).unwrap();
    assert_eq!(plain.family(), Family::Confidence);
    let other = err(plain
        .score_critique("p", &steps, "Step 1: \\boxed{correct}")
        .unwrap_err());
    assert!(
        other.contains("this scorer's family is confidence"),
        "{other}"
    );
}

#[test]
fn an_outcome_score_is_of_the_whole_solution_only() {
    let scorer = Scorer::open(fixture("outcome-tiny"), &ScorerOptions::default()).unwrap();
    let steps = ["3 + 4 = 7.", "So 7 fruits.", "The answer is 7."];
    // Aggregates and the first error read the one score, on the last step.
    let got = scorer.score_steps("How many fruits?", &steps).unwrap();
    let scored = got.scored();
    assert_eq!((scored.first, scored.scores.len()), (2, 1));
    assert_eq!(scored.first_error(1.0), Some(2));
    assert_eq!(scored.first_error(0.0), None);
    // Steps cannot be scored as they arrive.
    let err = scorer
        .session("How many fruits?")
        .extend(&steps)
        .unwrap_err();
    assert!(
        err.to_string().contains("scores a whole solution once"),
        "{err}"
    );
    // Dropping steps to fit the limit would score another solution.
    let n = scorer
        .encode("How many fruits?", &steps)
        .unwrap()
        .tokens
        .len();
    let short = ScorerOptions {
        max_tokens: Some(n - 1),
        truncation: Truncation::DropSteps,
        ..Default::default()
    };
    let scorer = Scorer::open(fixture("outcome-tiny"), &short).unwrap();
    let err = scorer.score_steps("How many fruits?", &steps).unwrap_err();
    assert!(err.to_string().contains("dropping its last"), "{err}");
    // Qwen3's template splits an assistant turn at `</think>` and rewrites
    // it: such a solution is refused, not scored at guessed positions.
    let scorer = Scorer::open(fixture("outcome-tiny"), &ScorerOptions::default()).unwrap();
    let err = scorer
        .score_steps("How many fruits?", &["I count 3 </think> so 3.", "Done."])
        .unwrap_err();
    assert!(
        err.to_string().contains("rewrites the message text"),
        "{err}"
    );
}

#[test]
fn confidence_has_per_step_statistics() {
    let scorer = Scorer::open(
        fixture("confidence-tiny"),
        &ScorerOptions {
            family: Some(Family::Confidence),
            ..Default::default()
        },
    )
    .unwrap();
    let r = scorer
        .score_steps("What is 2 + 3?", &["2 + 3 = 5.", "The answer is 5."])
        .unwrap();
    let conf = r.confidence.expect("confidence statistics");
    assert_eq!(conf.len(), 2);
    for c in &conf {
        assert!(c.min_logprob <= c.mean_logprob && c.mean_logprob <= 0.0);
        assert!(c.mean_entropy >= 0.0 && c.tokens > 0);
    }
}

#[test]
fn scoring_a_trace_uses_its_steps() {
    let reference = reference("skywork-prm-tiny");
    let case = &reference.cases[0];
    let scorer = Scorer::open(fixture("skywork-prm-tiny"), &ScorerOptions::default()).unwrap();
    let trace = Trace {
        problem: case.problem.clone(),
        steps: case.steps.iter().map(Step::new).collect(),
        ..Default::default()
    };
    let r = scorer.score(&trace).unwrap();
    assert!((r.step_scores[0].unwrap() - case.step_scores[0].unwrap()).abs() < 1e-4);
}

#[test]
fn over_long_traces_error_or_truncate() {
    let reference = reference("skywork-prm-tiny");
    let case = &reference.cases[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    // A limit that fits the first step's marker but not the whole trace.
    let limit = case.marker_positions[0] + 1;
    let strict = Scorer::open(
        fixture("skywork-prm-tiny"),
        &ScorerOptions {
            max_tokens: Some(limit),
            ..Default::default()
        },
    )
    .unwrap();
    match strict.score_steps(&case.problem, &steps) {
        Err(Error::TraceTooLong {
            tokens, limit: l, ..
        }) => {
            assert_eq!(tokens, case.input_ids.len());
            assert_eq!(l, limit);
        }
        other => panic!("expected TraceTooLong, got {other:?}"),
    }
    let lenient = Scorer::open(
        fixture("skywork-prm-tiny"),
        &ScorerOptions {
            max_tokens: Some(limit),
            truncation: Truncation::DropSteps,
            ..Default::default()
        },
    )
    .unwrap();
    let r = lenient.score_steps(&case.problem, &steps).unwrap();
    assert_eq!(r.truncated_steps, steps.len() - 1);
    assert!(
        (r.step_scores[0].unwrap() - case.step_scores[0].unwrap()).abs() < 1e-4,
        "a step's score depends only on what precedes it"
    );
    assert!(r.step_scores[1..].iter().all(Option::is_none));
}

#[test]
fn steps_holding_the_marker_are_refused() {
    let scorer = Scorer::open(fixture("qwen2-prm-tiny"), &ScorerOptions::default()).unwrap();
    let err = scorer.score_steps("p", &["a <extra_0> b"]).unwrap_err();
    assert!(err.to_string().contains("step 0"), "{err}");
    let err = scorer.score_steps("p", &[]).unwrap_err();
    assert!(err.to_string().contains("at least one step"), "{err}");
}

#[test]
fn wrong_family_for_the_checkpoint_is_a_clear_error() {
    // The score-head checkpoint has no lm_head: an LM-head family cannot run on it.
    let err = Scorer::open(
        fixture("qwen2-prm-tiny"),
        &ScorerOptions {
            family: Some(Family::Confidence),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("lm_head"), "{err}");
    // The value head is missing from a plain causal LM.
    let err = Scorer::open(
        fixture("confidence-tiny"),
        &ScorerOptions {
            family: Some(Family::ValueHead),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("v_head.summary.weight") || err.to_string().contains("BOS"),
        "{err}"
    );
}

#[test]
fn load_time_quantization_keeps_scores_close() {
    // Q8_0 weights (with Q8_0 activations) against the f32 checkpoint: the
    // scores move by quantization noise only. Bound: 0.05 absolute, measured
    // well below that on this fixture.
    let reference = reference("qwen2-prm-tiny");
    let case = &reference.cases[0];
    let steps: Vec<&str> = case.steps.iter().map(String::as_str).collect();
    let q = Scorer::open(
        fixture("qwen2-prm-tiny"),
        &ScorerOptions {
            quantize: Some(stepscore::engine::GgmlType::Q8_0),
            ..Default::default()
        },
    )
    .unwrap();
    let got = q.score_steps(&case.problem, &steps).unwrap();
    for (g, w) in got.step_scores.iter().zip(&case.step_scores) {
        let (g, w) = (g.unwrap(), w.unwrap());
        assert!((g - w).abs() < 0.05, "{g} vs {w}");
    }
    let bad = Scorer::open(
        fixture("qwen2-prm-tiny"),
        &ScorerOptions {
            quantize: Some(stepscore::engine::GgmlType::Q6K),
            ..Default::default()
        },
    );
    assert!(bad.is_err());
}

/// Every tiny fixture, with the family the sessions' tests open it as.
const FAMILIES: [(&str, Option<Family>); 5] = [
    ("qwen2-prm-tiny", None),
    ("skywork-prm-tiny", None),
    ("math-shepherd-tiny", None),
    ("rlhflow-tiny", Some(Family::Rlhflow)),
    ("confidence-tiny", Some(Family::Confidence)),
];

/// Appending steps one at a time gives the scores of scoring the whole trace
/// (within 1e-4), on every family, while running each token about once.
#[test]
fn incremental_sessions_match_full_scoring() {
    for (name, family) in FAMILIES {
        let reference = reference(name);
        let scorer = Scorer::open(
            fixture(name),
            &ScorerOptions {
                family,
                ..Default::default()
            },
        )
        .unwrap();
        for (k, case) in reference.cases.iter().enumerate() {
            let mut session = scorer.session(&case.problem);
            for (i, step) in case.steps.iter().enumerate() {
                let got = session
                    .append(step)
                    .unwrap_or_else(|e| panic!("{name} case {k} step {i}: {e}"));
                let want = case.step_scores[i].expect("every step scored");
                let tol = if family == Some(Family::Confidence) {
                    1e-4 * want.abs()
                } else {
                    1e-4
                };
                assert!(
                    (got - want).abs() <= tol,
                    "{name} case {k} step {i}: incremental {got} vs full {want}"
                );
            }
            // Each token runs once, plus at most two per step re-run at the
            // boundary (the previous marker, a chat turn's closing tokens).
            let total = case.input_ids.len();
            assert!(
                session.computed_tokens() <= total + 3 * case.steps.len(),
                "{name} case {k}: {} tokens computed for a {total}-token trace",
                session.computed_tokens()
            );
        }
    }
}

/// Candidates for one problem, scored with the problem's tokens run once
/// and each candidate's steps in one pass, give the scores of scoring each
/// alone, bit for bit, on every family; so does a session extended by
/// several steps at once after one appended step.
#[test]
fn candidates_share_the_prompt_and_match_full_scoring() {
    for (name, family) in FAMILIES {
        let reference = reference(name);
        let options = ScorerOptions {
            family,
            ..Default::default()
        };
        let scorer = Scorer::open(fixture(name), &options).unwrap();
        let problem = &reference.cases[0].problem;
        let candidates: Vec<Vec<&str>> = reference
            .cases
            .iter()
            .map(|c| c.steps.iter().map(String::as_str).collect())
            .collect();
        let got = scorer.score_candidates(problem, &candidates).unwrap();
        assert_eq!(got.len(), candidates.len());
        for (k, (cand, scores)) in candidates.iter().zip(&got).enumerate() {
            let alone = scorer.score_steps(problem, cand).unwrap();
            let alone: Vec<u64> = alone
                .step_scores
                .iter()
                .map(|s| s.unwrap().to_bits())
                .collect();
            let bits: Vec<u64> = scores.iter().map(|s| s.to_bits()).collect();
            assert_eq!(bits, alone, "{name} candidate {k}: shared prefix vs alone");
            if cand.len() > 1 {
                let mut session = scorer.session(problem);
                session.append(cand[0]).unwrap();
                let rest = session.extend(&cand[1..]).unwrap();
                let rest: Vec<u64> = rest.iter().map(|s| s.to_bits()).collect();
                assert_eq!(rest, alone[1..], "{name} candidate {k}: append then extend");
                assert_eq!(session.steps().len(), cand.len());
            }
        }
        // Enough candidates that their rows exceed one forward pass's cap
        // (2,048): the groups still give each candidate's own scores.
        let alone: Vec<Vec<u64>> = got
            .iter()
            .map(|s| s.iter().map(|x| x.to_bits()).collect())
            .collect();
        let prompt = scorer.encode(problem, &["0"]).unwrap().step_tokens[0].start;
        let rows: usize = candidates
            .iter()
            .map(|c| scorer.encode(problem, c).unwrap().tokens.len() - prompt)
            .sum();
        let copies = 2100 / rows + 1;
        let many: Vec<Vec<&str>> = (0..copies).flat_map(|_| candidates.clone()).collect();
        let got_many = scorer.score_candidates(problem, &many).unwrap();
        for (k, scores) in got_many.iter().enumerate() {
            let bits: Vec<u64> = scores.iter().map(|s| s.to_bits()).collect();
            assert_eq!(
                bits,
                alone[k % alone.len()],
                "{name} candidate {k} of {}",
                many.len()
            );
        }
    }
}

/// A candidate that cannot be scored is named by its position, and no
/// candidate runs: the error comes before any forward pass.
#[test]
fn a_bad_candidate_is_named_by_its_position() {
    let (name, family) = FAMILIES[0];
    let options = ScorerOptions {
        family,
        ..Default::default()
    };
    let scorer = Scorer::open(fixture(name), &options).unwrap();
    let candidates = vec![vec!["2 + 3 = 5."], vec!["2 + 3 = 5.", "   "]];
    let err = ready(scorer.score_candidates_async("What is 2 + 3?", &candidates)).unwrap_err();
    assert_eq!(err.index, Some(1), "{err}");
    assert!(
        matches!(err.error, stepscore::Error::InvalidArgument(_)),
        "{err}"
    );
    assert!(err.to_string().starts_with("candidates[1]: "), "{err}");
}

/// Sessions extended together give each the scores it gets alone; one
/// whose step cannot be scored gets its error and is left as it was.
#[test]
fn sessions_extended_together_match_alone() {
    let (name, family) = FAMILIES[0];
    let options = ScorerOptions {
        family,
        ..Default::default()
    };
    let scorer = Scorer::open(fixture(name), &options).unwrap();
    let problem = "What is 2 + 3?";
    let mut a = scorer.session(problem);
    a.append("2 + 3 = 5.").unwrap();
    let mut b = scorer.session(problem);
    let mut c = scorer.session(problem);
    c.append("2 + 3 = 6.").unwrap();
    let (a0, c0) = (a.clone(), c.clone());
    let news = vec![
        vec!["The answer is 5."],
        vec!["2 + 3 = 5.", "So 5."],
        vec!["  "],
    ];
    let got = {
        let mut refs = vec![&mut a, &mut b, &mut c];
        ready(stepscore::prm::Session::extend_together(&mut refs, &news)).unwrap()
    };
    let mut alone_a = a0.clone();
    let want_a = alone_a.extend(&news[0]).unwrap();
    let want_b = scorer.session(problem).extend(&news[1]).unwrap();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(got[0].as_ref().unwrap()), bits(&want_a));
    assert_eq!(bits(got[1].as_ref().unwrap()), bits(&want_b));
    assert!(
        matches!(got[2], Err(stepscore::Error::InvalidArgument(_))),
        "{:?}",
        got[2]
    );
    assert_eq!(a.steps().len(), 2);
    assert_eq!(b.scores().len(), 2);
    assert_eq!(c.steps(), c0.steps());
    assert_eq!(bits(c.scores()), bits(c0.scores()));
    // The failed session still extends as if nothing happened.
    let mut c1 = c0.clone();
    assert_eq!(
        bits(&c.extend(&["So 6."]).unwrap()),
        bits(&c1.extend(&["So 6."]).unwrap())
    );
}

/// The value of a CPU engine future, which is ready on its first poll.
fn ready<T>(f: impl std::future::Future<Output = T>) -> T {
    use std::task::{Context, Poll, Waker};
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a CPU engine future was pending"),
    }
}
