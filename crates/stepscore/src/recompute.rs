//! What exact arithmetic says of the equations a step writes: each chain
//! `a = b = c` of plain arithmetic in the step's text (numbers, `+ - * /`,
//! `x`/`×`/`\times`/`\cdot`, `÷`/`\div`, `^`, `%`, parentheses,
//! `\frac{a}{b}`) is evaluated in exact rational arithmetic, so
//! "0.2 x 50 = 12" is false with certainty. A verifier can read it as a step
//! signal that needs no model.
//!
//! The reading is deliberately cautious, since a false "false" would flag a
//! right step: words end an expression (units, "of", variables), so only
//! what is written as arithmetic is read; a side that may be cut from a
//! longer phrase (a bare number right after a word, or a side starting with
//! an operator) is dropped; two adjacent sides are compared only when one of
//! them computes something; and a written result counts as right when it is
//! the exact value rounded to the places it shows (either rounding), a whole
//! number next to a non-whole value (150 / 7 = 21 buses), or a percentage
//! read either way (0.25 x 100 = 25%). `≈` allows 1% too. Equations with
//! "remainder" after them are skipped, a markdown bullet (`- `, `* `,
//! `+ ` first on its line) is not read as an operator, and a degree sign
//! on a number (`°`, `^\circ`) is read as a unit.

use serde::Serialize;

use crate::rational::Rational;

/// One comparison of two adjacent sides of a chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Equation {
    /// Byte span in the step text, from the left side's start to the
    /// right side's end.
    pub start: usize,
    pub end: usize,
    /// The two sides as written.
    pub left: String,
    pub right: String,
    /// The exact value of each side that computes something (`None` for a
    /// bare number), as [`Rational::to_decimal_string`] writes it.
    pub left_value: Option<String>,
    pub right_value: Option<String>,
    /// Written with `≈` (or `\approx`, `~=`) rather than `=`.
    pub approx: bool,
    pub holds: bool,
}

impl Equation {
    /// What a person reads: `"0.2 x 50 = 12" is false: 0.2 x 50 is 10`.
    pub fn explain(&self) -> String {
        let sign = if self.approx { "≈" } else { "=" };
        let verdict = if self.holds { "holds" } else { "is false" };
        let mut out = format!("\"{} {sign} {}\" {verdict}", self.left, self.right);
        let values: Vec<String> = [
            (&self.left, &self.left_value),
            (&self.right, &self.right_value),
        ]
        .into_iter()
        .filter_map(|(side, v)| v.as_ref().map(|v| format!("{side} is {v}")))
        .collect();
        if !self.holds && !values.is_empty() {
            out.push_str(": ");
            out.push_str(&values.join(", "));
        }
        out
    }
}

/// Every equation of a step that could be checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Recomputed {
    pub equations: Vec<Equation>,
}

impl Recomputed {
    /// The first equation that does not hold.
    pub fn first_false(&self) -> Option<&Equation> {
        self.equations.iter().find(|e| !e.holds)
    }

    pub(crate) fn false_count(&self) -> usize {
        self.equations.iter().filter(|e| !e.holds).count()
    }
}

/// Checks every equation `text` writes (see the module docs).
///
/// ```
/// use stepscore::recompute::recompute;
///
/// let r = recompute("20% of 50 is 0.2 x 50 = 12 apples.");
/// assert_eq!(r.equations.len(), 1);
/// assert!(!r.equations[0].holds);
/// assert_eq!(r.first_false().unwrap().left, "0.2 x 50");
/// assert!(recompute("150 / 7 = 21.43, so 22 buses.").first_false().is_none());
/// assert!(recompute("The answer is 12.").equations.is_empty());
/// ```
pub fn recompute(text: &str) -> Recomputed {
    let tokens = lex(text);
    let mut equations = Vec::new();
    for run in tokens.split(|t| matches!(t.kind, Kind::Break)) {
        check_run(text, run, &mut equations);
    }
    Recomputed { equations }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Num {
        value: Rational,
        /// Digits written after the decimal point.
        places: u32,
        percent: bool,
    },
    Op(char),
    Open,
    Close,
    Eq {
        approx: bool,
    },
    Break,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
    /// A letter comes right before this token (spaces aside).
    after_word: bool,
    /// That word is one of [`OPERATOR_WORDS`].
    after_operator_word: bool,
}

/// The operator of a fraction written tight (`1/2`).
const FRACTION_BAR: char = '|';

/// Words after which a number may be an operand of arithmetic written in
/// words (`pages x 3 / 4`, `half of 10 = 5`): a side starting there is cut.
const OPERATOR_WORDS: &[&str] = &[
    "x", "times", "of", "by", "plus", "minus", "over", "per", "into",
];

/// LaTeX commands read as operators or dropped; any other command breaks.
const COMMANDS: &[(&str, Option<char>)] = &[
    ("times", Some('*')),
    ("cdot", Some('*')),
    ("div", Some('/')),
    ("left", None),
    ("right", None),
    ("$", None),
    ("%", None),
    (",", None),
    ("!", None),
    (";", None),
    ("(", None),
    (")", None),
    ("[", None),
    ("]", None),
];

fn lex(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    lex_into(text, 0, text.len(), &mut out, 0);
    out
}

fn push(out: &mut Vec<Token>, text: &str, kind: Kind, start: usize, end: usize) {
    let before = text[..start].trim_end();
    let after_word = before.chars().next_back().is_some_and(char::is_alphabetic);
    let word = before
        .rsplit(|c: char| !c.is_alphabetic())
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    out.push(Token {
        kind,
        start,
        end,
        after_word,
        after_operator_word: after_word && OPERATOR_WORDS.contains(&word.as_str()),
    });
}

/// The byte index of the `}` closing the `{` at `open`.
fn closing_brace(text: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn lex_into(text: &str, from: usize, to: usize, out: &mut Vec<Token>, depth: usize) {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < to {
        if let Some(n) = degree_sign(text, i, out) {
            i += n;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        let len = c.len_utf8();
        match c {
            ' ' | '\t' | '$' => i += len,
            '0'..='9' => i = lex_number(text, i, to, out),
            '.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = lex_number(text, i, to, out)
            }
            // A markdown list marker (`- `, `* `, `+ ` first on its line) is not
            // an operator: `- 14 - 3 = 11` reads `14 - 3 = 11`.
            '-' | '*' | '+' if is_list_marker(text, i) => i += len,
            '+' | '-' | '−' | '*' | '×' | '·' | '⋅' | '/' | '÷' | '^' => {
                let op = match c {
                    // `1/2` written tight between digits is a fraction: it binds
                    // before other operators (12÷1/2 = 24, as its writer means).
                    '/' if i > 0
                        && bytes[i - 1].is_ascii_digit()
                        && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) =>
                    {
                        FRACTION_BAR
                    }
                    '−' | '-' => '-',
                    '*' if bytes.get(i + 1) == Some(&b'*') => {
                        push(out, text, Kind::Op('^'), i, i + 2);
                        i += 2;
                        continue;
                    }
                    '*' | '×' | '·' | '⋅' => '*',
                    '/' | '÷' => '/',
                    other => other,
                };
                push(out, text, Kind::Op(op), i, i + len);
                i += len;
            }
            'x' | 'X' if is_times_x(text, i, out) => {
                push(out, text, Kind::Op('*'), i, i + 1);
                i += 1;
            }
            '(' | '[' | '{' => {
                push(out, text, Kind::Open, i, i + 1);
                i += 1;
            }
            ')' | ']' | '}' => {
                push(out, text, Kind::Close, i, i + 1);
                i += 1;
            }
            '=' => {
                push(out, text, Kind::Eq { approx: false }, i, i + 1);
                i += 1;
            }
            '≈' => {
                push(out, text, Kind::Eq { approx: true }, i, i + len);
                i += len;
            }
            '~' if bytes.get(i + 1) == Some(&b'=') => {
                push(out, text, Kind::Eq { approx: true }, i, i + 2);
                i += 2;
            }
            '\\' => i = lex_command(text, i, to, out, depth),
            '_' => {
                // A subscript (`a_1`, `\theta_{3}`) is part of the name
                // before it, not a number.
                let end = subscript_end(text, i + 1, to);
                if out.last().is_none_or(|t| t.kind != Kind::Break) {
                    push(out, text, Kind::Break, i, end);
                }
                i = end;
            }
            _ => {
                // A word (or any other sign) ends the expression.
                let end = i + len;
                if out.last().is_none_or(|t| t.kind != Kind::Break) {
                    push(out, text, Kind::Break, i, end);
                }
                i = end;
            }
        }
    }
}

/// Where the subscript starting at `j` ends: after its `{...}` group, or
/// after its run of letters and digits.
fn subscript_end(text: &str, j: usize, to: usize) -> usize {
    if text[j..to].starts_with('{') {
        return closing_brace(text, j).map_or(to, |c| (c + 1).min(to));
    }
    text[j..to]
        .char_indices()
        .find(|(_, c)| !c.is_ascii_alphanumeric())
        .map_or(to, |(k, _)| j + k)
}

/// The byte length of a degree sign (`°`, `^\circ`, `^{\circ}`) at `i`
/// right after a number: a unit, read as nothing (`155° + 26° = 181°`).
fn degree_sign(text: &str, i: usize, out: &[Token]) -> Option<usize> {
    let rest = &text[i..];
    let n = ["°", "^\\circ", "^{\\circ}"]
        .iter()
        .find(|sign| rest.starts_with(**sign))?
        .len();
    let after_number = out
        .last()
        .is_some_and(|t| matches!(t.kind, Kind::Num { .. }) && text[t.end..i].trim().is_empty());
    let word_goes_on = rest[n..].chars().next().is_some_and(char::is_alphabetic);
    (after_number && !word_goes_on).then_some(n)
}

/// The ASCII `-`, `*` or `+` at `i` is first on its line (indentation
/// aside) and followed by a space or tab: a markdown bullet.
fn is_list_marker(text: &str, i: usize) -> bool {
    let line_start = text[..i].rfind('\n').map_or(0, |n| n + 1);
    text[line_start..i].chars().all(|c| c == ' ' || c == '\t')
        && matches!(text.as_bytes().get(i + 1), Some(b' ' | b'\t'))
}

/// `x` is a times sign between a number (or `)`) and a number (or `(`),
/// spaced on both sides or on neither (`3 x 4`, `3x4`); `2x + 1` is algebra.
fn is_times_x(text: &str, i: usize, out: &[Token]) -> bool {
    let prev_ok = out
        .last()
        .is_some_and(|t| matches!(t.kind, Kind::Num { .. } | Kind::Close));
    let before_space = text[..i].ends_with(' ');
    let rest = &text[i + 1..];
    let after_space = rest.starts_with(' ');
    let next = rest.trim_start().chars().next();
    let next_ok = next.is_some_and(|c| c.is_ascii_digit() || c == '(' || c == '$');
    prev_ok && next_ok && before_space == after_space
}

fn lex_command(text: &str, i: usize, to: usize, out: &mut Vec<Token>, depth: usize) -> usize {
    let rest = &text[i + 1..to];
    let name_len = rest
        .char_indices()
        .find(|(_, c)| !c.is_ascii_alphabetic())
        .map_or(rest.len(), |(k, _)| k);
    let (name, after) = if name_len == 0 {
        // A one-sign command (\$ \% \, \( ...), or a backslash at the end.
        let Some(c) = rest.chars().next() else {
            return to;
        };
        (&rest[..c.len_utf8()], i + 1 + c.len_utf8())
    } else {
        (&rest[..name_len], i + 1 + name_len)
    };
    if matches!(name, "frac" | "dfrac" | "tfrac") && depth < 8 {
        let num_open = after;
        if let Some(num_close) = text
            .get(num_open..)
            .filter(|s| s.starts_with('{'))
            .and_then(|_| closing_brace(text, num_open))
        {
            let den_open = num_close + 1;
            if let Some(den_close) = text
                .get(den_open..)
                .filter(|s| s.starts_with('{'))
                .and_then(|_| closing_brace(text, den_open))
            {
                push(out, text, Kind::Open, i, num_open + 1);
                lex_into(text, num_open + 1, num_close, out, depth + 1);
                push(out, text, Kind::Close, num_close, num_close + 1);
                push(out, text, Kind::Op('/'), num_close, den_open);
                push(out, text, Kind::Open, den_open, den_open + 1);
                lex_into(text, den_open + 1, den_close, out, depth + 1);
                push(out, text, Kind::Close, den_close, den_close + 1);
                return den_close + 1;
            }
        }
    }
    if name == "approx" {
        push(out, text, Kind::Eq { approx: true }, i, after);
        return after;
    }
    match COMMANDS.iter().find(|(n, _)| *n == name) {
        Some((_, Some(op))) => push(out, text, Kind::Op(*op), i, after),
        Some((_, None)) => {}
        None => {
            if out.last().is_none_or(|t| t.kind != Kind::Break) {
                push(out, text, Kind::Break, i, after);
            }
        }
    }
    after
}

/// A number at `i`: digits with thousands commas (`1,234`), a decimal
/// part, and a `%` (or `\%`) after it.
fn lex_number(text: &str, i: usize, to: usize, out: &mut Vec<Token>) -> usize {
    let b = text.as_bytes();
    let mut j = i;
    let mut digits = String::new();
    while j < to && b[j].is_ascii_digit() {
        digits.push(b[j] as char);
        j += 1;
        // A comma between three-digit groups is a thousands separator.
        if j + 4 <= to
            && b[j] == b','
            && b[j + 1..j + 4].iter().all(u8::is_ascii_digit)
            && !(j + 4 < to && b[j + 4].is_ascii_digit())
        {
            j += 1;
        }
    }
    let mut places = 0u32;
    if j + 1 < to && b[j] == b'.' && b[j + 1].is_ascii_digit() {
        j += 1;
        while j < to && b[j].is_ascii_digit() {
            digits.push(b[j] as char);
            places += 1;
            j += 1;
        }
    }
    let mut percent = false;
    let after = &text[j..to];
    if after.starts_with('%') {
        percent = true;
        j += 1;
    } else if after.starts_with("\\%") {
        percent = true;
        j += 2;
    }
    let value = digits
        .parse::<i128>()
        .ok()
        .zip(10i128.checked_pow(places))
        .and_then(|(n, scale)| Rational::new(n, scale));
    match value {
        Some(value) if digits.len() <= 30 => push(
            out,
            text,
            Kind::Num {
                value,
                places,
                percent,
            },
            i,
            j,
        ),
        // Too long to be arithmetic (an id, a hash): not read.
        _ => push(out, text, Kind::Break, i, j),
    }
    j
}

/// A parsed side: its value, and whether it computes (has an operator).
#[derive(Debug, Clone, Copy)]
struct Side {
    value: Rational,
    computes: bool,
    start: usize,
    end: usize,
    /// For a bare number: the places it shows and whether it is a percent.
    bare: Option<(u32, bool)>,
}

fn check_run(text: &str, run: &[Token], out: &mut Vec<Equation>) {
    let parts: Vec<&[Token]> = run.split(|t| matches!(t.kind, Kind::Eq { .. })).collect();
    if parts.len() < 2 {
        return;
    }
    let relations: Vec<bool> = run
        .iter()
        .filter_map(|t| match t.kind {
            Kind::Eq { approx } => Some(approx),
            _ => None,
        })
        .collect();
    let last = parts.len() - 1;
    let sides: Vec<Option<Side>> = parts
        .iter()
        .enumerate()
        .map(|(k, part)| match k {
            0 => first_side(part),
            k if k == last => last_side(text, part),
            _ => parse_side(part),
        })
        .collect();
    for k in 0..last {
        let (Some(a), Some(b)) = (sides[k], sides[k + 1]) else {
            continue;
        };
        if !(a.computes || b.computes) {
            continue;
        }
        let approx = relations[k];
        out.push(Equation {
            start: a.start,
            end: b.end,
            left: text[a.start..a.end].trim().to_string(),
            right: text[b.start..b.end].trim().to_string(),
            left_value: a.computes.then(|| a.value.to_decimal_string()),
            right_value: b.computes.then(|| b.value.to_decimal_string()),
            approx,
            holds: agree(a, b, approx),
        });
    }
}

/// The first side: the whole part, unless it may be cut from a phrase.
fn first_side(part: &[Token]) -> Option<Side> {
    let first = part.first()?;
    // `+ 5 = 8` after "apples", `- 33 + 33` after the variable in `75*r`,
    // `3 / 4` after "pages x": the start of the side is elsewhere.
    let cut = match first.kind {
        Kind::Op(op) => op != '-' || first.after_word,
        _ => first.after_operator_word,
    };
    if cut {
        return None;
    }
    let side = parse_side(part)?;
    (side.computes || !first.after_word).then_some(side)
}

/// The last side: its longest leading part that parses (a result followed
/// by more arithmetic-free text), unless a remainder follows.
fn last_side(text: &str, part: &[Token]) -> Option<Side> {
    let side = (1..=part.len())
        .rev()
        .find_map(|n| parse_side(&part[..n]))?;
    let after = text[side.end..].trim_start().to_ascii_lowercase();
    (!after.starts_with("remainder") && !after.starts_with("with a remainder")).then_some(side)
}

fn parse_side(part: &[Token]) -> Option<Side> {
    let mut p = Parser {
        tokens: part,
        at: 0,
        ops: 0,
    };
    let value = p.expr(0)?;
    if p.at != part.len() {
        return None;
    }
    let bare = match part {
        [Token {
            kind: Kind::Num {
                places, percent, ..
            },
            ..
        }] => Some((*places, *percent)),
        _ => None,
    };
    Some(Side {
        value,
        computes: p.ops > 0,
        start: part.first()?.start,
        end: part.last()?.end,
        bare,
    })
}

/// Whether the written sides agree (see the module docs for what counts).
fn agree(a: Side, b: Side, approx: bool) -> bool {
    if a.value == b.value {
        return true;
    }
    // A percentage written as the number of percent: 0.25 x 100 = 25%.
    for (x, y) in [(a, b), (b, a)] {
        if let Some((_, true)) = y.bare {
            if x.value
                == y.value
                    .mul(Rational::integer(100))
                    .unwrap_or(Rational::ZERO)
            {
                return true;
            }
        }
    }
    // A written value rounded to the places it shows, or a whole number next
    // to a non-whole value.
    for (exact, shown) in [(a, b), (b, a)] {
        let Some((places, _)) = shown.bare else {
            continue;
        };
        if places > 0 {
            if exact
                .value
                .rounded(places)
                .is_some_and(|(r, t)| r == shown.value || t == shown.value)
            {
                return true;
            }
        } else if !exact.value.is_integer() && shown.value.is_integer() {
            let (f, c) = exact.value.floor_ceil();
            if shown.value.num() == f || shown.value.num() == c {
                return true;
            }
        }
    }
    if approx {
        let (x, y) = (a.value.to_f64(), b.value.to_f64());
        return (x - y).abs() <= 0.01 * x.abs().max(y.abs());
    }
    false
}

/// Precedence climbing over one side's tokens.
struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    /// Operators applied (a side that computes has at least one).
    ops: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<Kind> {
        self.tokens.get(self.at).map(|t| t.kind)
    }

    fn expr(&mut self, depth: usize) -> Option<Rational> {
        if depth > 32 {
            return None;
        }
        let mut v = self.term(depth)?;
        while let Some(Kind::Op(op @ ('+' | '-'))) = self.peek() {
            self.at += 1;
            let r = self.term(depth)?;
            v = if op == '+' { v.add(r)? } else { v.sub(r)? };
            self.ops += 1;
        }
        Some(v)
    }

    fn term(&mut self, depth: usize) -> Option<Rational> {
        let mut v = self.unary(depth)?;
        while let Some(Kind::Op(op @ ('*' | '/'))) = self.peek() {
            self.at += 1;
            let r = self.unary(depth)?;
            v = if op == '*' { v.mul(r)? } else { v.div(r)? };
            self.ops += 1;
        }
        Some(v)
    }

    fn unary(&mut self, depth: usize) -> Option<Rational> {
        if let Some(Kind::Op('-')) = self.peek() {
            self.at += 1;
            return self.unary(depth)?.neg();
        }
        let base = self.atom(depth)?;
        if let Some(Kind::Op('^')) = self.peek() {
            self.at += 1;
            let exp = self.unary(depth)?;
            self.ops += 1;
            if !exp.is_integer() {
                return None;
            }
            return base.pow(exp.num());
        }
        Some(base)
    }

    fn number(&mut self) -> Option<Rational> {
        match self.peek()? {
            Kind::Num { value, percent, .. } => {
                self.at += 1;
                if percent {
                    value.div(Rational::integer(100))
                } else {
                    Some(value)
                }
            }
            _ => None,
        }
    }

    fn atom(&mut self, depth: usize) -> Option<Rational> {
        match self.peek()? {
            Kind::Num { .. } => {
                let mut v = self.number()?;
                while let Some(Kind::Op(FRACTION_BAR)) = self.peek() {
                    self.at += 1;
                    v = v.div(self.number()?)?;
                    self.ops += 1;
                }
                Some(v)
            }
            Kind::Open => {
                self.at += 1;
                let v = self.expr(depth + 1)?;
                match self.peek()? {
                    Kind::Close => {
                        self.at += 1;
                        Some(v)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdicts(text: &str) -> Vec<(String, String, bool)> {
        recompute(text)
            .equations
            .into_iter()
            .map(|e| (e.left, e.right, e.holds))
            .collect()
    }

    fn holds(text: &str) -> Vec<bool> {
        verdicts(text).into_iter().map(|v| v.2).collect()
    }

    #[test]
    fn false_arithmetic_is_caught() {
        assert_eq!(holds("0.2 x 50 = 12"), [false]);
        assert_eq!(holds("Cost: 30 x 16 = 480 dollars."), [true]);
        assert_eq!(holds("So 7 * 8 + 5 = 61."), [true]);
        assert_eq!(holds("So 7 * 8 + 5 = 62."), [false]);
        assert_eq!(holds("12 + 7 \\times 3 = 57"), [false]);
        assert_eq!(holds("$\\frac{3}{4} \\cdot 12 = 9$"), [true]);
        assert_eq!(holds("\\dfrac{1}{3} + \\frac{1}{6} = 0.5"), [true]);
        assert_eq!(holds("(3 + 4)^2 = 49"), [true]);
        assert_eq!(holds("2**10 = 1000"), [false]);
        assert_eq!(holds("He pays $1,250 - $250 = $1,000."), [true]);
        assert_eq!(holds("1,000 / 8 = 125"), [true]);
        assert_eq!(holds("15% of 80 is 0.15 × 80 = 12"), [true]);
        assert_eq!(holds("20% × 50 = 10"), [true]);
        assert_eq!(holds("36 ÷ 4 − 2 = 7"), [true]);
        assert_eq!(holds("it takes her 12÷1/2=24 minutes"), [true]);
        assert_eq!(holds("10÷2/5=25"), [true]);
        assert_eq!(holds("10 ÷ 2 / 5 = 1"), [true]);
        assert_eq!(holds("3/4 = 0.6"), [false]);
        // Markdown bullets are list markers, not minus signs or products.
        assert_eq!(
            holds("Differences:\n- 14 - 3 = 11\n- 36 - 14 = 22"),
            [true, true]
        );
        assert_eq!(holds("  * 12 + 4 = 16\n+ 3 x 5 = 15"), [true, true]);
        assert_eq!(holds("- 14 - 3 = 12"), [false]);
        // A minus sign written tight is still one.
        assert_eq!(holds("-3 + 5 = 2"), [true]);
        // Degrees are a unit on a number.
        assert_eq!(holds("155.0° + 26.0° + 75.0° = 306.0°"), [false]);
        assert_eq!(holds("$155^\\circ + 26^\\circ = 181^\\circ$"), [true]);
        assert_eq!(
            holds("\\[ 360^{\\circ} - 256^{\\circ} = 94^{\\circ} \\]"),
            [false]
        );
        assert_eq!(holds("2^3 = 8"), [true]);
        // A chain: each adjacent pair that computes something.
        assert_eq!(
            verdicts("3 + 4 = 7 = 2 * 4"),
            [
                ("3 + 4".to_string(), "7".to_string(), true),
                ("7".to_string(), "2 * 4".to_string(), false)
            ]
        );
    }

    #[test]
    fn roundings_and_percents_written_either_way_hold() {
        assert_eq!(holds("1/3 = 0.33"), [true]);
        assert_eq!(holds("2/3 = 0.66"), [true]);
        assert_eq!(holds("2/3 = 0.67"), [true]);
        assert_eq!(holds("2/3 = 0.68"), [false]);
        assert_eq!(holds("150 / 7 = 21 buses"), [true]);
        assert_eq!(holds("150 / 7 = 23 buses"), [false]);
        assert_eq!(holds("0.25 x 100 = 25%"), [true]);
        assert_eq!(holds("25 / 100 = 25%"), [true]);
        assert_eq!(holds("22 / 7 ≈ 3.14"), [true]);
        assert_eq!(holds("22 / 7 \\approx 3.1"), [true]);
        assert_eq!(holds("22 / 7 ≈ 3.3"), [false]);
    }

    #[test]
    fn what_is_not_arithmetic_is_not_read() {
        for text in [
            "The answer is 12.",
            "20% of 50 = 10",
            "He has 3 apples + 5 = 8",
            "x = 5",
            "2x + 3 = 7",
            "Step 1: 150 = 150",
            "13 / 4 = 3 remainder 1",
            "13 / 4 = 3 with a remainder of 1",
            "Let y = 3 + 4",
            "3 apples x 4 = 12",
            "f(3) = 9",
            "2(3 + 4) = 14",
            "75*r - 33 + 33 = 3792 + 33",
            "which is 228 pages x 3 / 4 = 171 pages",
            "half of 10 / 2 = 2.5",
            "The date 2023-10-05 is a Thursday.",
            "a_1 = 2 + 3",
            "x_{12} = 5 \\times 2",
            "\\theta_3 = \\frac{(3-2) \\times 180^\\circ}{3}",
        ] {
            let r = recompute(text);
            assert_eq!(r.false_count(), 0, "{text}: {:?}", r.equations);
        }
        assert!(recompute("").equations.is_empty());
        assert!(recompute("= = 3 + = (").equations.is_empty());
        assert!(
            recompute("1 / 0 = 5").equations.is_empty(),
            "division by zero is not read"
        );
        assert!(recompute(&"9".repeat(60)).equations.is_empty());
        assert!(recompute(&format!("{} = 1", "(".repeat(100)))
            .equations
            .is_empty());
    }

    /// Any text, however broken: no panic, and spans inside the text.
    #[test]
    fn arbitrary_text_never_panics() {
        let alphabet: Vec<char> = "0123456789 .,%$\\{}()[]=≈~+-−*×·/÷^xX\nabcfrtimesdv\u{e9}"
            .chars()
            .collect();
        let mut seed = 0x9e3779b97f4a7c15u64;
        for _ in 0..20_000 {
            let len = (seed % 24) as usize;
            let text: String = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    alphabet[(seed % alphabet.len() as u64) as usize]
                })
                .collect();
            for e in recompute(&text).equations {
                assert!(
                    e.start <= e.end && text.get(e.start..e.end).is_some(),
                    "{text:?}"
                );
            }
        }
        for text in [
            "\\",
            "\\frac",
            "\\frac{",
            "\\frac{1}{",
            "\\frac{1}{2",
            "1,00",
            "1,",
            "5\\",
            "3 x",
            "x 3",
            "1.",
            ".5 = 0.5",
        ] {
            recompute(text);
        }
    }

    #[test]
    fn spans_point_at_the_equation() {
        let text = "First, 12 + 30 = 45 cookies.";
        let r = recompute(text);
        let e = &r.equations[0];
        assert_eq!(&text[e.start..e.end], "12 + 30 = 45");
        assert!(!e.holds && !e.approx);
        assert_eq!(e.explain(), "\"12 + 30 = 45\" is false: 12 + 30 is 42");
        let both = &recompute("2 * 3 = 1 + 4").equations[0];
        assert_eq!(
            both.explain(),
            "\"2 * 3 = 1 + 4\" is false: 2 * 3 is 6, 1 + 4 is 5"
        );
        assert_eq!(
            recompute("1/3 + 1/3 = 2/3").equations[0].explain(),
            "\"1/3 + 1/3 = 2/3\" holds"
        );
        let frac = recompute("so \\frac{6}{4} = 1.5");
        assert_eq!(frac.equations[0].left, "\\frac{6}{4}");
    }
}
