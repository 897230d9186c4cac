//! Final answers: pulling one out of a response, writing it in a canonical
//! form, and deciding whether two answers are the same.
//!
//! Choices made here (selection and metrics depend on them):
//! - Numbers that parse exactly become reduced rationals, written as a
//!   terminating decimal when one exists (`3/4`, `\frac{3}{4}`, `0.750` all
//!   give `0.75`; `4/2` gives `2`) and as `p/q` otherwise (`\frac{2}{6}` gives
//!   `1/3`). Two exact numbers are therefore equal iff their canonical strings
//!   are equal.
//! - Currency signs are dropped like `$` (`€34`, `£1,200`, `\pounds 5`,
//!   `¥`, `₹`): money answers compare as numbers.
//! - A percent sign is dropped: `75%` and `75\%` normalize to `75`, as in the
//!   MATH grader. `75%` does *not* equal `0.75`: accepting both `75` and `0.75`
//!   would make equality non-transitive (`0.75 != 75`), and selection groups
//!   answers by it.
//! - Decimals with 10 or more significant digits are treated as rounded: they
//!   equal any number within a relative 1e-9 (`0.3333333333 == 1/3`, but
//!   `0.333 != 1/3`). Integers always compare exactly.
//! - Thousands separators by rules that need no locale: commas between
//!   three-digit groups (`1,234.5`), or two or more points between
//!   three-digit groups (`1.000.000` is 1000000). A single point is a decimal
//!   point (`1.000` is 1); other dotted runs (`10.20.30`) keep their text,
//!   and so does `1.000,5` outside brackets (a decimal comma, or a pair).
//! - Text answers (letters and light punctuation only) compare
//!   case-insensitively and ignore spaces.

use std::sync::LazyLock;

use regex::Regex;

/// The response's final answer, raw (not normalized): the content of the last
/// `\boxed{...}` or `\fbox{...}` (nested braces handled), else the text after
/// the last GSM8K `####` marker, else what follows the last "The answer is",
/// "The final answer is" or "Answer:" up to the end of that sentence or line,
/// else the last number in the text (a dotted run such as `1.000.000` or
/// `10.20.30` taken whole, so the thousands rules of the module docs read
/// it as they read a marked answer).
pub fn extract_answer(text: &str) -> Option<String> {
    last_boxed(text)
        .or_else(|| gsm8k_answer(text))
        .or_else(|| stated_answer(text))
        .or_else(|| last_number(text))
        .map(str::to_string)
}

/// Two answers are equal when their normalized forms are: numerically (exact
/// rationals, with a relative 1e-9 tolerance for long decimals) when both are
/// numbers, else as strings. See the module docs for the rules.
pub fn answers_equal(a: &str, b: &str) -> bool {
    normalized_equal(&normalize_answer(a), &normalize_answer(b))
}

/// [`answers_equal`] for strings that are already outputs of
/// [`normalize_answer`]; it skips normalizing them again.
pub(crate) fn normalized_equal(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (Some(x), Some(y)) = (parse_number(a), parse_number(b)) else {
        return false;
    };
    if let (Num::Exact(p), Num::Exact(q)) = (&x, &y) {
        if p == q {
            return true;
        }
    }
    let rounded = matches!(x, Num::Approx { .. })
        || matches!(y, Num::Approx { .. })
        || is_long_decimal(a)
        || is_long_decimal(b);
    rounded && relatively_close(x.to_f64(), y.to_f64(), 1e-9)
}

/// The canonical form of an answer, for comparison and grouping. Strips
/// `\boxed{}`, math delimiters (`$`, `\(`, `\[`), currency signs, `\text{}`-style wrappers and
/// trailing units, `\left`/`\right`, LaTeX spacing, whitespace, a trailing
/// period, percent and degree signs, one leading `x =` assignment and
/// thousands separators; rewrites `\dfrac`/`\tfrac`, `\frac12`, `\sqrt2`;
/// writes numbers canonically (module docs) and lowercases text answers.
/// Idempotent.
pub fn normalize_answer(s: &str) -> String {
    let mut cur = normalize_pass(s);
    // One pass is normally a fixed point; the loop covers wrappers that only
    // appear after an outer one is removed (`$\boxed{$5$}$`).
    for _ in 0..4 {
        let next = normalize_pass(&cur);
        if next == cur {
            break;
        }
        cur = next;
    }
    cur
}

// ---------------------------------------------------------------------------
// Extraction

/// The content of the balanced group opening at byte `open` (a `{`), and the
/// byte index just past its closing brace. Escaped braces (`\{`) don't count.
fn braced(s: &str, open: usize) -> Option<(&str, usize)> {
    let bytes = s.as_bytes();
    if bytes.get(open) != Some(&b'{') {
        return None;
    }
    let mut depth = 0usize;
    let mut i = open;
    while let Some(&b) = bytes.get(i) {
        match b {
            // Skip the escaped byte; a multi-byte char's tail is never a brace.
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((s.get(open + 1..i)?, i + 1));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The content of the last well-formed, non-empty `\boxed`/`\fbox`.
fn last_boxed(s: &str) -> Option<&str> {
    for (pos, _) in s.rmatch_indices('\\') {
        let rest = &s[pos..];
        let name_len = if rest.starts_with("\\boxed") {
            6
        } else if rest.starts_with("\\fbox") {
            5
        } else {
            continue;
        };
        let after = &rest[name_len..];
        if after.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue; // some other command, e.g. \boxedx
        }
        let arg = after.trim_start();
        let found = if arg.starts_with('{') {
            braced(arg, 0).map(|(inner, _)| inner.trim())
        } else if arg.len() < after.len() {
            // `\boxed 5`: the argument runs to the next space or `$`.
            let end = arg
                .find(|c: char| c.is_whitespace() || c == '$')
                .unwrap_or(arg.len());
            Some(&arg[..end])
        } else {
            None
        };
        if let Some(a) = found.filter(|a| !a.is_empty()) {
            return Some(a);
        }
    }
    None
}

/// GSM8K's `#### 72`. Markdown headings (`#### Step 1`) also start with
/// `####`, so a line whose remainder starts with a letter is skipped.
fn gsm8k_answer(s: &str) -> Option<&str> {
    for (pos, _) in s.rmatch_indices("####") {
        let line = s[pos + 4..].lines().next().unwrap_or("");
        let a = trim_answer(line.trim_start_matches('#'));
        if !a.is_empty() && !a.starts_with(|c: char| c.is_alphabetic()) {
            return Some(a);
        }
    }
    None
}

static STATED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:the\s+)?(?:final\s+)?answer\s*(?:is\b\s*:?|:)").expect("valid regex")
});

/// What follows the last "the (final) answer is" / "answer:", to the end of
/// that sentence or line.
fn stated_answer(s: &str) -> Option<&str> {
    let m = STATED.find_iter(s).last()?;
    let rest = &s[m.end()..];
    let line = rest.lines().next().unwrap_or("");
    // A sentence ends at a period followed by whitespace; `3.5` does not end one.
    let end = line
        .char_indices()
        .find(|&(i, c)| c == '.' && line[i + 1..].starts_with(char::is_whitespace))
        .map_or(line.len(), |(i, _)| i);
    let a = trim_answer(&line[..end]);
    (!a.is_empty()).then_some(a)
}

/// Trims spaces, markdown emphasis and trailing periods around an answer.
fn trim_answer(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || c == '*')
        .trim_end_matches(|c: char| c == '.' || c.is_whitespace())
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    // Thousands groups must end at a word boundary so `1,2345` is not `1,234`.
    // Points take the whole dotted run: cut after its first point, `1.000.000`
    // left `000` as the last number (0) and `10.20.30` left `30` (issue 44, D9).
    Regex::new(r"\d+(?:,\d{3}\b)*(?:\.\d+)*(?:/\d+(?:\.\d+)?)?").expect("valid regex")
});

/// The last number in the text, with its minus sign unless the minus is a
/// binary operator (`3-5` ends in `5`, `x = -5` in `-5`).
fn last_number(s: &str) -> Option<&str> {
    let m = NUMBER.find_iter(s).last()?;
    let before = &s[..m.start()];
    if let Some(head) = before.strip_suffix('-') {
        let operand = head
            .trim_end()
            .ends_with(|c: char| c.is_alphanumeric() || c == ')' || c == '}');
        if !operand {
            return Some(&s[m.start() - 1..m.end()]);
        }
    }
    Some(m.as_str())
}

// ---------------------------------------------------------------------------
// Normalization

/// Literal rewrites, in order (longer forms before their prefixes).
const REWRITES: &[(&str, &str)] = &[
    ("\u{2212}", "-"),
    ("\\$", ""),
    ("$", ""),
    // Currency signs go as the dollar does: "€34" is the answer 34.
    ("\\textsterling", ""),
    ("\\pounds", ""),
    ("\\euro", ""),
    ("\u{20ac}", ""),
    ("\u{00a3}", ""),
    ("\u{00a5}", ""),
    ("\u{20b9}", ""),
    ("\\(", ""),
    ("\\)", ""),
    ("\\[", ""),
    ("\\]", ""),
    ("\\displaystyle", ""),
    ("\\!", ""),
    ("\\,", ""),
    ("\\;", ""),
    ("\\:", ""),
    ("\\ ", " "),
    ("~", " "),
    ("{,}", ","),
    ("\\%", ""),
    ("%", ""),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\\circ", ""),
    ("\\degree", ""),
    ("\u{00b0}", ""),
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
];

/// Wrappers whose content is the answer.
const WRAPPERS: &[&str] = &[
    "\\text", "\\textbf", "\\textit", "\\textrm", "\\mathrm", "\\mathbf", "\\mbox",
];

static SIZED_DELIMITER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big)([^A-Za-z]|$)").expect("valid regex")
});
static TEXT_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(.*[0-9}])\s*\\(?:text|textrm|mbox|mathrm)\{[^{}]*\}(?:\^\{?[23]\}?)?$")
        .expect("valid regex")
});
static WORD_UNIT: LazyLock<Regex> = LazyLock::new(|| {
    // A dotted run is kept whole for the thousands rules (`1.000.000 dollars`).
    Regex::new(r"^([+-]?\d[\d,]*(?:\.\d+)*)\s+[A-Za-z]{2,}(?:\s+[A-Za-z]{2,})?$")
        .expect("valid regex")
});
static SQRT_SHORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\\sqrt\s*([0-9A-Za-z])").expect("valid regex"));
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?\s*=\s*([^=]+)$")
        .expect("valid regex")
});
// Thousands separators, by rules that need no locale: a comma between
// groups of three digits (`1,234,567.5`), or two or more points between
// groups of three (`1.234.567`: a decimal has one point, so only grouping
// reads it). One point is always a decimal point (`1.000` is 1), and a
// dotted run in any other shape (`10.20.30`, a version, a date) is no number.
static THOUSANDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$").expect("valid regex"));
static POINT_THOUSANDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[+-]?\d{1,3}(?:\.\d{3}){2,}$").expect("valid regex"));
// A maximal run of digit groups joined by points: only a run with exactly one
// point is a decimal to clean (`10.20.30` must not become `10.2.30`).
static DOTTED_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)+").expect("valid regex"));

fn normalize_pass(input: &str) -> String {
    let mut s = input.trim();
    if let Some(inner) = last_boxed(s) {
        s = inner;
    }
    let mut s = s.to_string();
    for (from, to) in REWRITES {
        if s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s = SIZED_DELIMITER.replace_all(&s, "$1").into_owned();
    // Units go before wrappers are opened, while `\text{ cm}` still says unit.
    s = TEXT_UNIT.replace(s.trim(), "$1").into_owned();
    s = unwrap_commands(&s, WRAPPERS);
    s = WORD_UNIT.replace(s.trim(), "$1").into_owned();
    s = s.replace("\\{", "{").replace("\\}", "}");
    s = fix_frac_shorthand(&s);
    s = SQRT_SHORT.replace_all(&s, "\\sqrt{$1}").into_owned();
    let trimmed = s
        .trim()
        .trim_end_matches(|c: char| c == '.' || c.is_whitespace());
    s = ASSIGNMENT.replace(trimmed, "$1").into_owned();

    let is_text = s.chars().any(char::is_alphabetic)
        && s.chars()
            .all(|c| c.is_alphabetic() || c.is_whitespace() || "'-.,()".contains(c));
    if is_text {
        s = s.to_lowercase();
    }
    s.retain(|c| !c.is_whitespace());
    let s = s.trim_end_matches('.');
    let s = if THOUSANDS.is_match(s) {
        s.replace(',', "")
    } else if POINT_THOUSANDS.is_match(s) {
        s.replace('.', "")
    } else {
        s.to_string()
    };
    match parse_number(&s) {
        Some(n) => n.canonical(),
        // Inside compound answers (tuples, intervals) still drop trailing zeros.
        // Outside brackets, `1.000,5` may be a decimal comma after a point
        // group: left as written rather than made the pair `1,5`.
        None => {
            let bracketed = s.starts_with(['(', '[', '{']);
            DOTTED_RUN
                .replace_all(&s, |c: &regex::Captures| {
                    let run = &c[0];
                    let end = c.get(0).map_or(s.len(), |m| m.end());
                    let after = s.as_bytes().get(end..end + 2).unwrap_or_default();
                    let group_then_comma = !bracketed
                        && run.split_once('.').is_some_and(|(_, f)| f.len() == 3)
                        && after.len() == 2
                        && after[0] == b','
                        && after[1].is_ascii_digit();
                    if run.matches('.').count() == 1 && !group_then_comma {
                        clean_decimal(run)
                    } else {
                        run.to_string()
                    }
                })
                .into_owned()
        }
    }
}

/// Replaces each `\name{content}` by `content`, innermost or outermost alike.
fn unwrap_commands(s: &str, names: &[&str]) -> String {
    let mut out = s.to_string();
    // Every round removes at least one command name, so this terminates.
    loop {
        let hit = names.iter().find_map(|name| {
            out.match_indices(name).find_map(|(pos, _)| {
                let open = pos + name.len();
                let (inner, end) = braced(&out, open)?;
                Some((pos, inner.to_string(), end))
            })
        });
        match hit {
            Some((pos, inner, end)) => out.replace_range(pos..end, &inner),
            None => return out,
        }
    }
}

/// `\frac12` -> `\frac{1}{2}`, `\frac1{x}` -> `\frac{1}{x}`.
fn fix_frac_shorthand(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(pos) = rest.find("\\frac") {
        out.push_str(&rest[..pos + 5]);
        let mut tail = &rest[pos + 5..];
        for _ in 0..2 {
            let t = tail.trim_start();
            if t.starts_with('{') {
                match braced(t, 0) {
                    Some((_, end)) => {
                        out.push_str(&t[..end]);
                        tail = &t[end..];
                    }
                    None => break,
                }
            } else if let Some(c) = t.chars().next().filter(char::is_ascii_alphanumeric) {
                out.push('{');
                out.push(c);
                out.push('}');
                tail = &t[1..];
            } else {
                break;
            }
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

/// A plain decimal without leading zeros, trailing fractional zeros or a
/// dangling point (`007.50` -> `7.5`, `3.0` -> `3`). Input: digits and one
/// optional point.
fn clean_decimal(s: &str) -> String {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    if frac.is_empty() {
        int.to_string()
    } else {
        format!("{int}.{frac}")
    }
}

/// A canonical decimal carrying 10 or more significant digits.
fn is_long_decimal(s: &str) -> bool {
    s.contains('.')
        && s.chars()
            .filter(char::is_ascii_digit)
            .skip_while(|&c| c == '0')
            .count()
            >= 10
}

fn relatively_close(x: f64, y: f64, rel: f64) -> bool {
    if x == y {
        return true;
    }
    let scale = x.abs().max(y.abs());
    scale.is_finite() && (x - y).abs() <= rel * scale
}

// ---------------------------------------------------------------------------
// Exact numbers

/// A reduced rational: `den > 0`, `gcd(num, den) == 1`, zero is never negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ratio {
    neg: bool,
    num: u128,
    den: u128,
}

/// A parsed number: exact when it fits in 128 bits, else a float that keeps
/// its canonical text.
#[derive(Debug, Clone)]
enum Num {
    Exact(Ratio),
    Approx { value: f64, text: String },
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    fn new(neg: bool, num: u128, den: u128) -> Option<Ratio> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den);
        Some(Ratio {
            neg: neg && num != 0,
            num: num / g,
            den: den / g,
        })
    }

    fn to_f64(self) -> f64 {
        let v = self.num as f64 / self.den as f64;
        if self.neg {
            -v
        } else {
            v
        }
    }

    /// Terminating decimal when the denominator is 2^a 5^b, else `p/q`.
    fn canonical(self) -> String {
        let sign = if self.neg { "-" } else { "" };
        if self.den == 1 {
            return format!("{sign}{}", self.num);
        }
        let (mut d, mut twos, mut fives) = (self.den, 0u32, 0u32);
        while d % 2 == 0 {
            d /= 2;
            twos += 1;
        }
        while d % 5 == 0 {
            d /= 5;
            fives += 1;
        }
        let places = twos.max(fives);
        let scaled = 10u128
            .checked_pow(places)
            .map(|p| p / self.den)
            .and_then(|m| self.num.checked_mul(m));
        match scaled {
            Some(digits) if d == 1 => {
                let digits = format!("{digits:0>width$}", width = places as usize + 1);
                let (int, frac) = digits.split_at(digits.len() - places as usize);
                format!("{sign}{int}.{frac}")
            }
            _ => format!("{sign}{}/{}", self.num, self.den),
        }
    }

    fn div(self, other: Ratio) -> Option<Num> {
        if other.num == 0 {
            return None;
        }
        // (a/b) / (c/d) = (a*d) / (b*c), cancelling first to delay overflow.
        let g1 = gcd(self.num, other.num).max(1);
        let g2 = gcd(other.den, self.den).max(1);
        let num = (self.num / g1).checked_mul(other.den / g2);
        let den = (self.den / g2).checked_mul(other.num / g1);
        let neg = self.neg != other.neg;
        Some(match (num, den) {
            (Some(n), Some(d)) => Num::Exact(Ratio::new(neg, n, d)?),
            _ => Num::approx(self.to_f64() / other.to_f64()),
        })
    }
}

impl Num {
    fn approx(value: f64) -> Num {
        Num::Approx {
            value,
            text: format!("{value}"),
        }
    }

    fn to_f64(&self) -> f64 {
        match self {
            Num::Exact(r) => r.to_f64(),
            Num::Approx { value, .. } => *value,
        }
    }

    fn canonical(&self) -> String {
        match self {
            Num::Exact(r) => r.canonical(),
            Num::Approx { text, .. } => text.clone(),
        }
    }

    fn negate(self) -> Num {
        match self {
            Num::Exact(r) => Num::Exact(Ratio {
                neg: !r.neg && r.num != 0,
                ..r
            }),
            Num::Approx { value, text } => {
                let text = match text.strip_prefix('-') {
                    Some(t) => t.to_string(),
                    None if value == 0.0 => text,
                    None => format!("-{text}"),
                };
                Num::Approx {
                    value: -value,
                    text,
                }
            }
        }
    }

    fn div(self, other: Num) -> Option<Num> {
        match (self, other) {
            (Num::Exact(a), Num::Exact(b)) => a.div(b),
            (a, b) => {
                let d = b.to_f64();
                (d != 0.0).then(|| Num::approx(a.to_f64() / d))
            }
        }
    }
}

/// A number in any accepted notation: `[+-]` then a decimal, `a/b`,
/// `\frac{a}{b}` (nested) or `{x}`. `None` for anything else.
fn parse_number(s: &str) -> Option<Num> {
    parse_number_at(s, 0)
}

fn parse_number_at(s: &str, depth: usize) -> Option<Num> {
    if depth > 8 {
        return None;
    }
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let value = if body.starts_with('{') {
        let (inner, end) = braced(body, 0)?;
        if end != body.len() {
            return None;
        }
        parse_number_at(inner, depth + 1)?
    } else if let Some(args) = body.strip_prefix("\\frac") {
        let (a, end_a) = braced(args, 0)?;
        let rest = &args[end_a..];
        let (b, end_b) = braced(rest, 0)?;
        if end_b != rest.len() {
            return None;
        }
        parse_number_at(a, depth + 1)?.div(parse_number_at(b, depth + 1)?)?
    } else if let Some((a, b)) = body.split_once('/') {
        if b.contains('/') {
            return None;
        }
        parse_decimal(a)?.div(parse_number_at(b, depth + 1)?)?
    } else {
        parse_decimal(body)?
    };
    Some(if neg { value.negate() } else { value })
}

/// Unsigned `12`, `12.5`, `12.`, `.5`.
fn parse_decimal(s: &str) -> Option<Num> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let int = int.trim_start_matches('0');
    let frac = frac.trim_end_matches('0');
    let digits = format!("{int}{frac}");
    let exact = u32::try_from(frac.len())
        .ok()
        .and_then(|places| 10u128.checked_pow(places))
        .zip(if digits.is_empty() {
            Some(0)
        } else {
            digits.parse::<u128>().ok()
        });
    match exact {
        Some((den, num)) => Ratio::new(false, num, den).map(Num::Exact),
        None => {
            let text = clean_decimal(&format!("{int}.{frac}"));
            let value = text.parse::<f64>().ok()?;
            Some(Num::Approx { value, text })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_canonical_forms() {
        let r = |neg, n, d| Ratio::new(neg, n, d).unwrap().canonical();
        assert_eq!(r(false, 3, 4), "0.75");
        assert_eq!(r(true, 1, 8), "-0.125");
        assert_eq!(r(false, 1, 3), "1/3");
        assert_eq!(r(false, 10, 4), "2.5");
        assert_eq!(r(true, 0, 5), "0");
        assert_eq!(r(false, 1, 40), "0.025");
        assert!(Ratio::new(false, 1, 0).is_none());
    }

    #[test]
    fn braced_skips_escapes() {
        assert_eq!(braced(r"{a\}b}c", 0), Some((r"a\}b", 6)));
        assert_eq!(braced("{a{b}", 0), None);
    }
}
