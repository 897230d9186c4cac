//! Extracting the final answer from a response.

use proptest::prelude::*;
use stepscore::answer::{answers_equal, extract_answer, normalize_answer};

#[track_caller]
fn extracts(text: &str, expected: Option<&str>) {
    assert_eq!(
        extract_answer(text).as_deref(),
        expected,
        "extract_answer({text:?})"
    );
}

#[test]
fn boxed() {
    extracts("So we get $\\boxed{5}$.", Some("5"));
    extracts("\\boxed{\\frac{1}{2}}", Some("\\frac{1}{2}"));
    // Deep nesting and escaped braces inside.
    extracts(
        "= \\boxed{\\left\\{ \\frac{a^{2}}{b_{1}} \\right\\}}",
        Some("\\left\\{ \\frac{a^{2}}{b_{1}} \\right\\}"),
    );
    // The last box wins.
    extracts("first \\boxed{1}, then \\boxed{2}", Some("2"));
    extracts("framed: \\fbox{7}", Some("7"));
    extracts("\\boxed 9$", Some("9"));
    extracts("\\boxed{ 12 }", Some("12"));
    // A truncated last box falls back to the previous, well-formed one.
    extracts("\\boxed{3} ... \\boxed{\\frac{1}{", Some("3"));
    // A box beats every other pattern.
    extracts("The answer is 4.\n#### 5\n\\boxed{6}", Some("6"));
}

#[test]
fn gsm8k_marker() {
    extracts("Natalia sold 48/2 = 24 clips in May.\n#### 72", Some("72"));
    extracts("#### 1,234.\n", Some("1,234"));
    extracts("#### -3\nsome trailing words 9", Some("-3"));
    // A markdown heading is not a GSM8K answer.
    extracts("#### Step 1\nWe add 2 and 3 to get 5", Some("5"));
    // The marker beats "The answer is".
    extracts("The answer is 4.\n#### 5", Some("5"));
}

#[test]
fn stated_answers() {
    extracts("Adding them, the answer is 42. Done.", Some("42"));
    extracts(
        "The final answer is $\\frac{3}{4}$.",
        Some("$\\frac{3}{4}$"),
    );
    extracts("So the answer is 3.14.", Some("3.14"));
    extracts("Answer: 17\nExplanation: because 12 + 5", Some("17"));
    extracts("**Final Answer:** Paris", Some("Paris"));
    extracts("The answer is: yes", Some("yes"));
    // The last statement counts.
    extracts("The answer is 1. No wait, the answer is 2.", Some("2"));
    // An empty statement falls through to the last number.
    extracts("We get 8 apples. The answer is", Some("8"));
}

#[test]
fn last_number() {
    extracts("She has 3 apples and buys 4 more, so 7", Some("7"));
    extracts("Total: 1,250 dollars.", Some("1,250"));
    extracts("x = -5", Some("-5"));
    extracts("3-5", Some("5"));
    extracts("a half is 1/2 here", Some("1/2"));
    extracts("it costs 2.75.", Some("2.75"));
    extracts("no digits here", None);
    extracts("", None);
}

/// Issue 44, D9: the last-number fallback read "1.000.000 dollars" as 0,
/// "12.345.678 apples" as 678 and "10.20.30" as 30. It now takes the dotted
/// run whole and the thousands rules of marked answers decide: the same
/// canonical answer as `\boxed{}` and "The answer is" give.
#[test]
fn last_number_follows_the_thousands_rules() {
    for (text, run, canonical) in [
        ("The total is 1.000.000 dollars", "1.000.000", "1000000"),
        ("So she has 12.345.678 apples", "12.345.678", "12345678"),
        ("The date is 10.20.30", "10.20.30", "10.20.30"),
        ("It costs 1.000.000.", "1.000.000", "1000000"),
        ("a decimal 2.5 stays one", "2.5", "2.5"),
    ] {
        extracts(text, Some(run));
        let got = normalize_answer(&extract_answer(text).unwrap());
        assert_eq!(got, canonical, "{text}");
        let stated = extract_answer(&format!(
            "The answer is {}",
            &text[text.find(run).unwrap()..]
        ));
        assert_eq!(normalize_answer(&stated.unwrap()), canonical, "{text}");
        let boxed = format!("\\boxed{{{run}}}");
        assert_eq!(
            normalize_answer(&extract_answer(&boxed).unwrap()),
            canonical
        );
    }
    assert!(answers_equal(
        &extract_answer("The total is 1.000.000 dollars").unwrap(),
        "1000000"
    ));
    assert!(!answers_equal(&extract_answer("10.20.30").unwrap(), "30"));
}

proptest! {
    #[test]
    fn boxed_round_trips(prefix in "[a-z .=]{0,20}", inner in r"[0-9a-z+\-^ ]{1,12}") {
        let inner = inner.trim();
        prop_assume!(!inner.is_empty());
        // Nest the content in a \frac to exercise brace matching.
        let content = format!("\\frac{{{inner}}}{{2}}");
        let text = format!("{prefix} \\boxed{{{content}}} and then 99");
        prop_assert_eq!(extract_answer(&text), Some(content));
    }

    #[test]
    fn never_panics(s in any::<String>()) {
        let _ = extract_answer(&s);
    }
}
