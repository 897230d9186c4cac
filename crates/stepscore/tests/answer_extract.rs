//! Extracting the final answer from a response.

use proptest::prelude::*;
use stepscore::answer::extract_answer;

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
