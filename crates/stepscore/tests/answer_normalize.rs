//! Normalization and equality of final answers.

use proptest::prelude::*;
use stepscore::answer::{answers_equal, normalize_answer};

#[track_caller]
fn norm(input: &str, expected: &str) {
    assert_eq!(
        normalize_answer(input),
        expected,
        "normalize_answer({input:?})"
    );
}

#[track_caller]
fn same(a: &str, b: &str) {
    assert!(answers_equal(a, b), "expected {a:?} == {b:?}");
    assert!(answers_equal(b, a), "expected {b:?} == {a:?} (symmetry)");
}

#[track_caller]
fn differ(a: &str, b: &str) {
    assert!(!answers_equal(a, b), "expected {a:?} != {b:?}");
    assert!(!answers_equal(b, a), "expected {b:?} != {a:?} (symmetry)");
}

#[test]
fn integers_and_signs() {
    norm("42", "42");
    norm(" 42 ", "42");
    norm("+7", "7");
    norm("-7", "-7");
    norm("\u{2212}7", "-7"); // unicode minus sign
    norm("-0", "0");
    norm("007", "7");
    same("+5", "5");
    differ("-5", "5");
}

#[test]
fn trailing_zeros_and_decimals() {
    norm("2.50", "2.5");
    norm("3.0", "3");
    norm("3.", "3");
    norm(".5", "0.5");
    norm("-0.50", "-0.5");
    same("2.50", "2.5");
    same("10.000", "10");
    differ("2.05", "2.5");
}

#[test]
fn thousands_separators() {
    norm("1,234", "1234");
    norm("1,234,567.50", "1234567.5");
    norm("1{,}234", "1234");
    norm("1\\,234", "1234"); // thin space used as a separator
    norm("\\$1,000", "1000");
    // Not thousands groups: a pair stays a pair.
    norm("1,2", "1,2");
    norm("12,34", "12,34");
    same("1,000,000", "1000000");
}

/// Thousands separators against a table of locale-free rules (issue 23,
/// item 8): a comma between three-digit groups, or two or more points
/// between three-digit groups, groups thousands; one point is a decimal
/// point; any other dotted run is no number and keeps its text.
#[test]
fn thousands_separator_table() {
    let table = [
        // (answer, canonical form)
        ("1,000", "1000"),
        ("-1,234,567", "-1234567"),
        ("1,234.5", "1234.5"),
        ("1.000.000", "1000000"),
        ("\\boxed{1.000.000}", "1000000"),
        ("-12.345.678", "-12345678"),
        ("1.000", "1"),           // one point: a decimal point
        ("1.234", "1.234"),       // idem
        ("10.20.30", "10.20.30"), // not three-digit groups: itself
        ("1.2.3", "1.2.3"),
        ("1.000.00", "1.000.00"),         // a short last group: itself
        ("1000.000.000", "1000.000.000"), // a long first group: itself
        ("1.000,5", "1.000,5"),           // mixed marks: no rule reads it, and not the pair 1,5
        ("(1.000,5)", "(1,5)"),           // in brackets: a pair
        ("1,000.000.000", "1,000.000.000"),
        ("(1.50,2.0)", "(1.5,2)"), // decimals inside a tuple still cleaned
        ("(10.20.30,2.50)", "(10.20.30,2.5)"),
        ("v1.20.3", "v1.20.3"),
    ];
    for (input, want) in table {
        norm(input, want);
        // Idempotent: the canonical form is a fixed point.
        norm(want, want);
    }
    differ("\\boxed{1.000.000}", "\\boxed{1}");
    differ("1.000.000", "1");
    same("1.000.000", "1,000,000");
    differ("10.20.30", "10.2.30");
    differ("10.20.30", "10.2");
    differ("1.000,5", "1,5");
}

#[test]
fn fractions_are_exact_rationals() {
    // 3/4 has a terminating decimal, so that is its canonical form.
    norm("3/4", "0.75");
    norm("\\frac{3}{4}", "0.75");
    norm("\\dfrac{3}{4}", "0.75");
    norm("\\tfrac{3}{4}", "0.75");
    norm("\\frac34", "0.75");
    norm("\\frac{6}{8}", "0.75");
    // 1/3 has none: reduced p/q.
    norm("\\frac{2}{6}", "1/3");
    norm("-\\frac{2}{6}", "-1/3");
    norm("\\frac{-2}{6}", "-1/3");
    norm("4/2", "2");
    norm("\\frac{\\frac{1}{2}}{2}", "0.25"); // nested: (1/2)/2
    same("3/4", "0.75");
    same("\\frac12", "0.5");
    same("\\frac{1}{2}", "\\dfrac12");
    same("1/3", "\\frac{2}{6}");
    differ("1/3", "0.333");
    differ("1/3", "0.33");
    differ("\\frac{1}{0}", "0"); // division by zero is not a number
}

#[test]
fn long_decimals_get_a_tolerance() {
    // 10 significant digits: taken as a rounded value, within 1e-9 relative.
    same("1/3", "0.3333333333");
    same("\\frac{2}{3}", "0.6666666667");
    // Short decimals are exact.
    differ("2/3", "0.667");
    // Integers are always exact, however long.
    differ("1000000000", "1000000001");
    // Beyond 128 bits the value is kept as a float and its canonical text.
    let big = "123456789012345678901234567890123456789012345";
    norm(big, big);
    same(big, &format!("{big}.0"));
}

#[test]
fn latex_wrappers() {
    norm("$5$", "5");
    norm("$$5$$", "5");
    norm("\\(5\\)", "5");
    norm("\\[5\\]", "5");
    norm("\\boxed{5}", "5");
    norm("\\boxed{\\frac{1}{2}}", "0.5");
    norm("$\\boxed{\\dfrac{3}{4}}$", "0.75");
    norm("\\text{Yes}", "yes");
    norm("\\textbf{(B)}", "(b)");
    norm("\\displaystyle \\frac{1}{4}", "0.25");
    norm("\\left( 1, 2 \\right)", "(1,2)");
    norm("\\left[ 0, 1 \\right)", "[0,1)");
    norm("\\{1, 2\\}", "{1,2}");
    norm("\\left\\{ 1, 2 \\right\\}", "{1,2}");
    norm("3\\!\\cdot\\!2", "3\\cdot2");
    // `\rightarrow` is a command, not `\right` + `arrow`.
    norm("a \\rightarrow b", "a\\rightarrowb");
    norm("\\sqrt2", "\\sqrt{2}");
    norm("2\\sqrt 3", "2\\sqrt{3}");
    same("\\sqrt2", "\\sqrt{2}");
    same("$\\frac{\\sqrt{3}}{2}$", "\\dfrac{\\sqrt3}{2}");
    same("\\left(1,\\ 2\\right)", "(1,2)");
}

#[test]
fn units_percent_degrees() {
    norm("5\\text{ cm}", "5");
    norm("5 \\text{cm}^2", "5");
    norm("\\frac{1}{2}\\mbox{ hours}", "0.5");
    norm("12 apples", "12");
    norm("1,500 square feet", "1500");
    norm("75\\%", "75");
    norm("75%", "75");
    norm("30^\\circ", "30");
    norm("30^{\\circ}", "30");
    norm("30\u{00b0}", "30");
    same("75%", "75");
    // Documented choice: the percent sign is dropped, not divided out.
    differ("75%", "0.75");
    same("90^\\circ", "90");
}

#[test]
fn currency_signs() {
    norm("\u{20ac}34", "34");
    norm("\u{00a3}1,200", "1200");
    norm("-\u{20ac}5", "-5");
    norm("\u{00a5}7.50", "7.5");
    norm("\u{20b9}12", "12");
    norm("\\pounds 85", "85");
    norm("\\textsterling85", "85");
    norm("\\euro 3", "3");
    norm("\\boxed{\u{20ac}34}", "34");
    same("\u{20ac}34", "34");
    same("\u{00a3}85", "$85");
    differ("\u{20ac}34", "35");
}

#[test]
fn assignments_and_periods() {
    norm("x = 5", "5");
    norm("y=-\\frac{1}{2}", "-0.5");
    norm("\\theta = 30^\\circ", "30");
    norm("a_1 = 4", "4");
    norm("5.", "5");
    norm("The end.", "theend");
    // Two assignments are an equation system, kept as is.
    norm("x=1,y=2", "x=1,y=2");
    same("x = 5", "5");
    same("k=\\frac{3}{4}", "0.75");
}

#[test]
fn text_answers() {
    same("Yes", "yes");
    same("New York", "new york");
    same("\\text{(A)}", "(a)");
    differ("yes", "no");
    // Math keeps its case: \Delta is not \delta.
    differ("\\Delta", "\\delta");
    // Compound answers still drop trailing zeros inside.
    same("(1.50, 2)", "(1.5,2)");
    differ("(1, 2)", "(2, 1)");
}

#[test]
fn nothing_and_garbage() {
    norm("", "");
    norm("   ", "");
    norm("\\boxed{", "\\boxed{");
    norm("}}{{", "}}{{");
    differ("", "0");
}

fn with_separators(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

proptest! {
    #[test]
    fn thousands_separators_disappear(n in 0u64..u64::MAX, latex in any::<bool>(), neg in any::<bool>()) {
        let mut s = with_separators(n);
        if latex {
            s = s.replace(',', "{,}");
        }
        let sign = if neg && n != 0 { "-" } else { "" };
        prop_assert_eq!(normalize_answer(&format!("{sign}{s}")), format!("{sign}{n}"));
    }

    #[test]
    fn fractions_equal_their_decimals(num in 0u32..100_000, twos in 0u32..8, fives in 0u32..8) {
        // num / (2^a 5^b) terminates; scale num * 10^k / den by hand to print it.
        let den = 2u64.pow(twos) * 5u64.pow(fives);
        let k = twos.max(fives);
        let scaled = num as u64 * 10u64.pow(k) / den;
        let int = scaled / 10u64.pow(k);
        let frac = scaled % 10u64.pow(k);
        let dec = if k == 0 { int.to_string() } else { format!("{int}.{frac:0>w$}", w = k as usize) };
        prop_assert!(answers_equal(&format!("\\frac{{{num}}}{{{den}}}"), &dec), "{}/{} vs {}", num, den, dec);
        // Trailing zeros don't matter either.
        let padded = if dec.contains('.') { format!("{dec}000") } else { format!("{dec}.000") };
        let slash = format!("{num}/{den}");
        prop_assert!(answers_equal(&slash, &padded), "{} vs {}", slash, padded);
    }

    #[test]
    fn normalize_is_idempotent(s in r#"[0-9a-zA-Z.,/\\{}()$%=^ +\-]{0,24}"#) {
        let once = normalize_answer(&s);
        prop_assert_eq!(normalize_answer(&once), once.clone(), "input {:?}", s);
        prop_assert!(answers_equal(&s, &once));
    }

    #[test]
    fn normalize_is_idempotent_on_latex(
        head in prop::sample::select(vec!["", "$", "\\boxed{", "x = ", "\\text{", "\\left("]),
        body in prop::sample::select(vec!["\\frac{3}{4}", "1,234", "2.50", "75\\%", "\\sqrt2", "Yes", "-\\dfrac12", "30^\\circ"]),
        tail in prop::sample::select(vec!["", "$", "}", ".", "\\right)", "\\text{ cm}"]),
    ) {
        let s = format!("{head}{body}{tail}");
        let once = normalize_answer(&s);
        prop_assert_eq!(normalize_answer(&once), once.clone(), "input {:?}", s);
    }

    #[test]
    fn arbitrary_text_is_safe_and_idempotent(s in any::<String>()) {
        let once = normalize_answer(&s);
        prop_assert_eq!(normalize_answer(&once), once.clone(), "input {:?}", s);
    }

    #[test]
    fn equality_is_symmetric(a in r#"[0-9./\-]{1,8}"#, b in r#"[0-9./\-]{1,8}"#) {
        prop_assert_eq!(answers_equal(&a, &b), answers_equal(&b, &a));
    }
}
