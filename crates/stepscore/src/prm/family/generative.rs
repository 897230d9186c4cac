//! Generative verifiers (ThinkPRM and the verifiers trained on its data): the
//! model reads the problem and the numbered steps in one user turn, writes a
//! verification of each step that ends in `\boxed{correct}` or
//! `\boxed{incorrect}`, and a step's score is P(correct) over those two
//! verdict tokens where the critique writes its verdict. The prompt, the
//! "Let's verify step by step:" lead and the stop rule are ThinkPRM's
//! (mukhal/ThinkPRM: `utils/helper.py` `format_verification_cot_for_thinkprm`,
//! `prm/thinkprm_api.py`).
//!
//! A critique is scored teacher-forced: the prompt and the critique run as
//! one forward pass, and the two verdict tokens' vocabulary rows are read at
//! the token before each verdict, as Math-Shepherd's "+"/"-" rows are at its
//! tag. So a critique written elsewhere (a vLLM server, a larger model) is
//! scored the same way as one written here. Writing it is
//! [`crate::prm::Scorer::critique`].

use std::ops::Range;
use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::{plus_minus, reads_no_features, HeadLoad, Protocol, Spec};
use crate::engine::Matrix;
use crate::engine::Tokenizer;
use crate::prm::chat::{locate, ChatFormat, Message};
use crate::prm::head::Kind;
use crate::prm::template::Encoded;
use crate::{Error, Result};

pub(super) const SPEC: Spec = Spec {
    names: &["generative", "thinkprm", "generative-verifier"],
    needs_lm_head: true,
    scores_each_step: true,
    writes_critique: true,
    detect: None,
    head_file_tensors: &[],
    prepare,
    encode,
    head,
};

/// The instruction ThinkPRM's verifiers were trained with.
const INSTRUCTION: &str = "Review and critique each step in the proposed solution to determine \
whether each step is correct. If the solution is incomplete, only verify the provided steps.";

/// What follows the assistant's header: the critique continues it.
const LEAD: &str = "\nLet's verify step by step:";

/// The verdict words, as the verifier boxes them.
const CORRECT: &str = "correct";
const INCORRECT: &str = "incorrect";
const BOX_OPEN: &str = "\\boxed{";

/// A step's verdict as the critique writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepVerdict {
    Correct,
    Incorrect,
}

impl StepVerdict {
    pub fn word(self) -> &'static str {
        match self {
            StepVerdict::Correct => CORRECT,
            StepVerdict::Incorrect => INCORRECT,
        }
    }
}

/// A verdict found in a critique: what it says and where its word starts
/// (a byte offset in the critique).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrittenVerdict {
    pub(crate) verdict: StepVerdict,
    pub(crate) at: usize,
}

fn prepare(p: &mut Protocol, tokenizer: &Tokenizer) -> Result<()> {
    if p.chat.is_none() {
        return Err(p.missing_chat("the verifier reads the solution in a user turn"));
    }
    let correct = verdict_token(p, tokenizer, CORRECT)?;
    let incorrect = verdict_token(p, tokenizer, INCORRECT)?;
    if correct == incorrect {
        return Err(p.missing(
            "different tokens to start `correct` and `incorrect` after `\\boxed{` (both start \
             with the same token, so the verdict's probability cannot be read)",
        ));
    }
    // Read as "+"/"-" are: softmax over the two rows, probability of the first.
    p.plus_minus = Some((correct, incorrect));
    Ok(())
}

/// The token that starts `word` in `\boxed{word}`, as the verifier writes it
/// (it may also hold the brace: a vocabulary with `{correct` as one token).
fn verdict_token(p: &Protocol, tokenizer: &Tokenizer, word: &str) -> Result<u32> {
    let text = format!("{BOX_OPEN}{word}}}");
    let at = BOX_OPEN.len();
    let enc = tokenizer.encode_with_offsets(&text, false)?;
    enc.ids
        .iter()
        .zip(&enc.offsets)
        .find(|(_, &(s, e))| s <= at && at < e)
        .map(|(&id, _)| id)
        .ok_or_else(|| p.missing(&format!("a token for `{word}` in `{text}`")))
}

/// The family's steps are scored from the verdicts of a critique, so a
/// prompt alone has nothing to read: [`encode_critique`] lays out both.
fn encode(p: &Protocol, _: &Tokenizer, _: &str, _: &[&str]) -> Result<Encoded> {
    Err(Error::InvalidArgument(format!(
        "the {} family scores each step from the verdict of a critique the model writes: score \
         the trace (the critique is written first) or score a given critique; its prompt alone \
         has no position that scores a step (no step features, sessions or streams)",
        p.family
    )))
}

fn head(load: &HeadLoad<'_>) -> Result<Kind<Matrix>> {
    reads_no_features(load)?;
    plus_minus(load)
}

/// The verifier's prompt for `problem` and `steps`: the chat format's user
/// turn and assistant header, then [`LEAD`]. Also each step's byte range in
/// it and the step text shown there (ThinkPRM numbers the steps itself, so
/// it removes "Step N:" labels from them and trims them).
pub(crate) fn prompt(
    chat: &ChatFormat,
    problem: &str,
    steps: &[&str],
) -> Result<(String, Vec<Range<usize>>, Vec<String>)> {
    static LABEL: OnceLock<Regex> = OnceLock::new();
    let label = LABEL.get_or_init(|| Regex::new(r"Step \d+:").expect("a valid pattern"));
    let mut solution = String::new();
    let mut local = Vec::with_capacity(steps.len());
    let mut texts = Vec::with_capacity(steps.len());
    for (i, s) in steps.iter().enumerate() {
        if i > 0 {
            solution.push('\n');
        }
        let shown = label.replace_all(s, "");
        let shown = shown.trim();
        solution.push_str(&format!("Step {}: ", i + 1));
        local.push(solution.len()..solution.len() + shown.len());
        solution.push_str(shown);
        texts.push(shown.to_string());
    }
    let before = format!(
        "You are given a math problem and a proposed step-by-step solution:\n\n[Math \
         Problem]\n\n{problem}\n\n[Solution]\n\n"
    );
    let user = format!("{before}{solution}\n\n{INSTRUCTION}");
    let text = chat.render(
        &[Message {
            role: "user",
            content: &user,
        }],
        true,
    )? + LEAD;
    let at = locate(&text, &user)? + before.len();
    let spans = local
        .into_iter()
        .map(|r| r.start + at..r.end + at)
        .collect();
    Ok((text, spans, texts))
}

/// Where writing stops for `n_steps` steps (beside the end-of-turn token and
/// the budget): the decision question, the end of a thinking block, and a
/// heading for a step the solution does not have.
pub(crate) fn stops(n_steps: usize) -> Vec<String> {
    vec![
        "Is the solution correct?".into(),
        "</think>".into(),
        format!("Step {}:", n_steps + 1),
    ]
}

/// Each step's verdict in `critique`, for a solution of `n_steps` steps:
/// the steps with a verdict are a prefix (a critique may stop early), at
/// least the first.
///
/// A verdict is `\boxed{correct}` or `\boxed{incorrect}` (other boxes, such
/// as a recomputed answer, are not verdicts). A line that starts with
/// "Step K" (after Markdown marks) opens step K's section, and step K's
/// verdict is the last one written in its sections (a verifier that checks a
/// step again has the last word); verdicts before the first heading, or
/// under a step the solution does not have, belong to no step. A critique
/// with no headings gives its verdicts to the steps in order (ThinkPRM's own
/// rule). Errors: no verdict; a step without one before a step with one; a
/// verdict written in another case or with spaces (`\boxed{Correct}`), whose
/// token probability cannot be read; more verdicts than steps without
/// headings to place them.
pub(crate) fn parse_verdicts(
    critique: &str,
    n_steps: usize,
) -> Result<Vec<Option<WrittenVerdict>>> {
    static HEADING: OnceLock<Regex> = OnceLock::new();
    static BOXED: OnceLock<Regex> = OnceLock::new();
    let heading = HEADING.get_or_init(|| {
        Regex::new(r"(?m)^[ \t#*_>]*Step[ \t]+(\d{1,9})(?:[^\d]|$)").expect("a valid pattern")
    });
    let boxed = BOXED.get_or_init(|| Regex::new(r"\\boxed\{([^{}]*)\}").expect("a valid pattern"));
    let headings: Vec<(usize, usize)> = heading
        .captures_iter(critique)
        .filter_map(|c| {
            let k = c[1].parse::<usize>().ok()?;
            Some((c.get(0)?.start(), k))
        })
        .collect();
    let mut found = Vec::new();
    for c in boxed.captures_iter(critique) {
        let Some(content) = c.get(1) else { continue };
        let word = content.as_str();
        let verdict = match word.trim().to_ascii_lowercase().as_str() {
            CORRECT => StepVerdict::Correct,
            INCORRECT => StepVerdict::Incorrect,
            _ => continue,
        };
        if word != verdict.word() {
            return Err(Error::InvalidArgument(format!(
                "the critique's verdict `\\boxed{{{word}}}` (byte {}) is not written \
                 `\\boxed{{correct}}` or `\\boxed{{incorrect}}`, so its token probability cannot \
                 be read",
                content.start()
            )));
        }
        found.push(WrittenVerdict {
            verdict,
            at: content.start(),
        });
    }
    let mut out = vec![None; n_steps];
    if headings.is_empty() {
        if found.len() > n_steps {
            return Err(Error::InvalidArgument(format!(
                "the critique gives {} verdicts for {n_steps} steps and has no `Step K:` \
                 headings to tell which step each is for",
                found.len()
            )));
        }
        for (slot, v) in out.iter_mut().zip(found) {
            *slot = Some(v);
        }
    } else {
        for v in found {
            // The section a verdict is in: the last heading before it.
            let k = match headings.partition_point(|&(pos, _)| pos <= v.at) {
                0 => continue,
                i => headings[i - 1].1,
            };
            if (1..=n_steps).contains(&k) {
                out[k - 1] = Some(v);
            }
        }
    }
    let given = out.iter().take_while(|v| v.is_some()).count();
    if given == 0 {
        return Err(Error::InvalidArgument(
            match out.iter().position(Option::is_some) {
                Some(k) => format!(
                    "the critique gives no verdict for step 1 but gives one for step {}",
                    k + 1
                ),
                None => "the critique gives no step a verdict (`\\boxed{correct}` or \
                     `\\boxed{incorrect}`)"
                    .into(),
            },
        ));
    }
    if let Some(k) = out[given..].iter().position(Option::is_some) {
        return Err(Error::InvalidArgument(format!(
            "the critique gives no verdict for step {} but gives one for step {}",
            given + 1,
            given + k + 1
        )));
    }
    Ok(out)
}

/// The prompt and `critique` as one sequence for the engine, each step with
/// a verdict marked at the token before its verdict token (whose output
/// gives P(correct)); also each step's verdict. Steps after the last
/// verdict have no marker (they are left unscored).
pub(crate) fn encode_critique(
    p: &Protocol,
    tokenizer: &Tokenizer,
    problem: &str,
    steps: &[&str],
    critique: &str,
) -> Result<(Encoded, Vec<Option<StepVerdict>>)> {
    let chat = p
        .chat
        .as_ref()
        .ok_or_else(|| p.missing("a chat template"))?;
    let (correct, incorrect) = p
        .plus_minus
        .ok_or_else(|| Error::Internal("the verdict tokens were not resolved".into()))?;
    let verdicts = parse_verdicts(critique, steps.len())?;
    let (prompt, spans, texts) = prompt(chat, problem, steps)?;
    let text = prompt.clone() + critique;
    // Tokenized as generation tokenizes its prompt.
    let enc = tokenizer.encode_with_offsets(&text, true)?;
    let given: Vec<WrittenVerdict> = verdicts.iter().map_while(|v| *v).collect();
    let mut markers = Vec::with_capacity(given.len());
    for (k, v) in given.iter().enumerate() {
        let at = prompt.len() + v.at;
        let want = match v.verdict {
            StepVerdict::Correct => correct,
            StepVerdict::Incorrect => incorrect,
        };
        let token = enc
            .offsets
            .iter()
            .position(|&(s, e)| s <= at && at < e)
            .filter(|&i| i > 0 && enc.ids[i] == want);
        match token {
            Some(i) => markers.push(i - 1),
            None => {
                return Err(Error::InvalidArgument(format!(
                    "step {}'s verdict `{}` (critique byte {}) is not tokenized as the verdict \
                     token the family reads (the token that starts `{}` after `\\boxed{{`), so its \
                     probability cannot be read",
                    k + 1,
                    v.verdict.word(),
                    v.at,
                    v.verdict.word()
                )))
            }
        }
    }
    let n = markers.len();
    let encoded = Encoded::of_prompt(enc, markers, &spans[..n], texts[..n].to_vec());
    let written = verdicts.iter().map(|v| v.map(|v| v.verdict)).collect();
    Ok((encoded, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: &[Option<WrittenVerdict>]) -> Vec<Option<&'static str>> {
        v.iter().map(|v| v.map(|v| v.verdict.word())).collect()
    }

    #[test]
    fn headed_sections_give_each_step_its_last_verdict() {
        let critique = "\nStep 1: 2 + 2 = 4, so the answer \\boxed{4} is right. \\boxed{correct}\n\
             Step 2: wrong sign. \\boxed{incorrect}\n\
             Wait, Step 2 again: no, it is fine.\n\
             **Step 2:** re-checked. \\boxed{correct}\n";
        let v = parse_verdicts(critique, 3).unwrap();
        assert_eq!(words(&v), [Some("correct"), Some("correct"), None]);
        // `at` is the verdict word's first byte.
        let first = v[0].unwrap();
        assert_eq!(&critique[first.at..first.at + 7], "correct");
    }

    #[test]
    fn a_thinkprm_critique_is_read_step_by_step() {
        // The shape of ThinkPRM-1.5B's output (its README's example, shortened).
        let critique = "\n<think>\nAlright, I'll check each step.\n\n\
             Step 1: The student multiplies 12 by 3 to get 36. That's right.\n\n\
             This step is \\boxed{correct}\n\n\
             Step 2: The student adds 5 and gets 42, but 36 + 5 = 41.\n\n\
             This step is \\boxed{incorrect}\n\n";
        let v = parse_verdicts(critique, 2).unwrap();
        assert_eq!(words(&v), [Some("correct"), Some("incorrect")]);
    }

    #[test]
    fn without_headings_verdicts_go_to_the_steps_in_order() {
        let v = parse_verdicts("ok \\boxed{correct}\nbad \\boxed{incorrect}", 3).unwrap();
        assert_eq!(words(&v), [Some("correct"), Some("incorrect"), None]);
        let err = parse_verdicts("\\boxed{correct} \\boxed{correct}", 1).unwrap_err();
        assert!(err.to_string().contains("2 verdicts for 1 steps"), "{err}");
    }

    #[test]
    fn verdicts_outside_the_steps_belong_to_none() {
        let critique =
            "\\boxed{incorrect} preamble\nStep 1: \\boxed{correct}\nStep 4: \\boxed{incorrect}";
        let v = parse_verdicts(critique, 2).unwrap();
        assert_eq!(words(&v), [Some("correct"), None]);
    }

    #[test]
    fn unreadable_critiques_are_errors_that_say_why() {
        let none = parse_verdicts("Step 1: looks fine.\nStep 2: also fine.", 2).unwrap_err();
        assert!(
            none.to_string().contains("gives no step a verdict"),
            "{none}"
        );
        let gap = parse_verdicts("Step 1: ok\nStep 2: \\boxed{correct}", 2).unwrap_err();
        assert!(
            gap.to_string()
                .contains("no verdict for step 1 but gives one for step 2"),
            "{gap}"
        );
        let hole =
            parse_verdicts("Step 1: \\boxed{correct}\nStep 3: \\boxed{correct}", 3).unwrap_err();
        assert!(
            hole.to_string()
                .contains("no verdict for step 2 but gives one for step 3"),
            "{hole}"
        );
        let case = parse_verdicts("Step 1: \\boxed{Correct}", 1).unwrap_err();
        assert!(case.to_string().contains("`\\boxed{Correct}`"), "{case}");
        let spaced = parse_verdicts("Step 1: \\boxed{ incorrect }", 1).unwrap_err();
        assert!(spaced.to_string().contains("cannot be read"), "{spaced}");
    }

    #[test]
    fn other_boxes_and_words_are_not_verdicts() {
        // "incorrect" contains "correct": the boxed word is compared whole.
        let v = parse_verdicts("Step 1: \\boxed{42} \\boxed{incorrect}", 1).unwrap();
        assert_eq!(words(&v), [Some("incorrect")]);
        let v = parse_verdicts("Step 1: not \\boxed{correctly} \\boxed{correct}", 1).unwrap();
        assert_eq!(words(&v), [Some("correct")]);
    }

    #[test]
    fn the_stop_rule_names_the_step_past_the_last() {
        assert_eq!(
            stops(3),
            ["Is the solution correct?", "</think>", "Step 4:"]
        );
    }

    #[test]
    fn the_prompt_is_thinkprms_user_turn_with_steps_numbered() {
        let chat = ChatFormat::ChatMl;
        let (text, spans, texts) = prompt(
            &chat,
            "What is 2+3?",
            &["Step 1: 2+3 = 5. ", "So \\boxed{5}."],
        )
        .unwrap();
        let want = "<|im_start|>user\nYou are given a math problem and a proposed step-by-step \
             solution:\n\n[Math Problem]\n\nWhat is 2+3?\n\n[Solution]\n\nStep 1: 2+3 = 5.\nStep 2: \
             So \\boxed{5}.\n\nReview and critique each step in the proposed solution to determine \
             whether each step is correct. If the solution is incomplete, only verify the provided \
             steps.<|im_end|>\n<|im_start|>assistant\n\nLet's verify step by step:";
        assert_eq!(text, want);
        assert_eq!(texts, ["2+3 = 5.", "So \\boxed{5}."]);
        for (span, shown) in spans.iter().zip(&texts) {
            assert_eq!(&text[span.clone()], shown);
        }
    }

    /// ThinkPRM-1.5B's checkpoint carries DeepSeek-R1-Distill's template: the
    /// prompt is Jinja2's rendering of the user turn with the generation
    /// prompt (tests/fixtures/chat/deepseek-r1-distill.json), then the lead.
    #[test]
    fn the_prompt_in_deepseek_r1s_template_is_jinja2s_rendering() {
        let fx: serde_json::Value = serde_json::from_str(include_str!(
            "../../../../../tests/fixtures/chat/deepseek-r1-distill.json"
        ))
        .unwrap();
        let text_of = |k: &str| fx[k].as_str().unwrap().to_string();
        let chat = ChatFormat::from_template(
            &text_of("template"),
            Some(text_of("bos_token")),
            Some(text_of("eos_token")),
        )
        .unwrap();
        let steps = ["2 + 3 = 5.", "The answer is \\boxed{5}."];
        let (text, spans, _) = prompt(&chat, "What is 2+3?", &steps).unwrap();
        let case = fx["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| {
                c["messages"][0]["content"]
                    .as_str()
                    .unwrap()
                    .starts_with("You are given a math problem")
            })
            .unwrap();
        let jinja2 = case["with_generation_prompt"].as_str().unwrap();
        assert!(jinja2.ends_with("<｜Assistant｜><think>\n"), "{jinja2:?}");
        assert_eq!(text, format!("{jinja2}{LEAD}"));
        for (span, step) in spans.iter().zip(steps) {
            assert_eq!(&text[span.clone()], step);
        }
    }
}
