//! What a step's tokens say about its arithmetic: which tokens are digits
//! (of a result written after "=", of an operand, of the step's own
//! enumeration marker), which are a plus/minus or a times/divide sign, and
//! the log-prob statistics over each class ([`DigitConfidence`]), and how
//! likely the model found each operator's operation in any notation
//! ([`OperatorRows`]). Tokens are read through the step text they cover, so
//! every engine and every family classifies the same tokens the same way.

use std::sync::OnceLock;

use regex::Regex;

use super::template::Encoded;
use crate::engine::Tokenizer;
use crate::engine::{Kernels, Linear, Matrix, Transformer};
use crate::Result;

/// The log-probabilities of a step's digit tokens (tokens whose text,
/// without surrounding whitespace, is one or more ASCII digits) and of its
/// least likely sign tokens. A wrong result or operand is a number the model
/// did not expect, a wrong operation or sign an operator it did not expect,
/// so these separate wrong steps from right ones far better than the whole
/// step's statistics (docs/TRAINING.md, "backbone probes"). A step without
/// digits has `tokens` 0 and both digit log-probs 0.0, one without a plus or
/// minus `plus_minus_min_logprob` 0.0 (no evidence of surprise).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DigitConfidence {
    pub tokens: usize,
    pub min_logprob: f64,
    pub mean_logprob: f64,
    /// Absent from feature files written before it existed: read as 0.0.
    #[serde(default)]
    pub plus_minus_min_logprob: f64,
    /// Results, operands and times/divide signs; absent from feature files
    /// written before they existed (a head that reads them refuses those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arithmetic: Option<ArithmeticConfidence>,
    /// The least likely operation among the step's operator tokens: per
    /// operator, log P(its operation | some operation comes next), each
    /// operation's probability summed over its notations (so "x" where the
    /// model expected "×" costs nothing, "x" where it expected "/" much).
    /// 0.0 without operators; `None` where not computed (heads that do not
    /// read it, feature files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_min_logprob: Option<f64>,
    /// How many equations of the step's text are false in exact arithmetic
    /// ([`crate::recompute`]); `None` in feature files written before it
    /// existed (a head that reads it refuses those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_equations: Option<usize>,
}

/// The digit tokens of a step split by what their number is, and its
/// times/divide signs. Each is the least likely such token's log-prob, 0.0
/// when the step has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArithmeticConfidence {
    /// Digits of a number written right after "=" (whitespace between).
    pub result_min_logprob: f64,
    /// Digits of every other number, except the step's leading enumeration
    /// marker ("Step 2:", "3."), which says where the step is, not what it computes.
    pub operand_min_logprob: f64,
    /// "×", "*", "/", "÷", "·", "\times", "\cdot", "\div", or a letter "x"
    /// between two numbers ("2 x 3").
    pub times_divide_min_logprob: f64,
}

/// What a token is, by its text without surrounding whitespace alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// One or more ASCII digits.
    Digit,
    /// Exactly "+", "-" or the minus sign U+2212: the operations whose
    /// symbol a text cannot restyle.
    PlusMinus,
    /// A product or quotient sign (see [`ArithmeticConfidence::times_divide_min_logprob`]);
    /// the letter "x" is one only between numbers, which [`roles`] decides.
    TimesDivide,
    Other,
}

impl TokenKind {
    pub(crate) fn of_text(text: &str) -> TokenKind {
        let t = text.trim();
        if is_digit_text(t) {
            TokenKind::Digit
        } else if matches!(t, "+" | "-" | "\u{2212}") {
            TokenKind::PlusMinus
        } else if matches!(
            t,
            "\u{d7}" | "*" | "/" | "\u{f7}" | "\u{b7}" | "\\times" | "\\cdot" | "\\div"
        ) {
            TokenKind::TimesDivide
        } else {
            TokenKind::Other
        }
    }
}

/// The operation an operator token writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Plus,
    Minus,
    Times,
    Divide,
}

impl Operation {
    /// By trimmed text; the letter "x" is a product only between numbers,
    /// which the caller decides ([`roles`]), so it is one here.
    pub fn of_text(text: &str) -> Option<Operation> {
        match text.trim() {
            "+" => Some(Operation::Plus),
            "-" | "\u{2212}" => Some(Operation::Minus),
            "\u{d7}" | "*" | "\u{b7}" | "\\times" | "\\cdot" | "x" => Some(Operation::Times),
            "/" | "\u{f7}" | "\\div" => Some(Operation::Divide),
            _ => None,
        }
    }
}

/// Whether a token's text is a digit token's: trimmed, non-empty, ASCII digits.
pub(crate) fn is_digit_text(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// What one token of a step is to [`DigitConfidence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Result,
    Operand,
    /// A digit of the step's leading enumeration marker.
    Marker,
    /// "+"/"-" or a times/divide sign, and the operation it writes.
    Operator(Operation),
    Other,
}

/// The role of each token of `text` covering the byte ranges `spans`.
fn roles(text: &str, spans: &[(usize, usize)]) -> Vec<Role> {
    let bytes = text.as_bytes();
    let piece = |&(s, e): &(usize, usize)| {
        let e = e.min(bytes.len());
        String::from_utf8_lossy(&bytes[s.min(e)..e])
            .trim()
            .to_string()
    };
    let pieces: Vec<String> = spans.iter().map(piece).collect();
    let marker_end = crate::segment::step_marker_len(text);
    let numbers: Vec<(usize, usize)> = number_regex()
        .find_iter(text)
        .map(|m| (m.start(), m.end()))
        .collect();
    let is_result = |at: usize| {
        numbers
            .iter()
            .find(|&&(s, e)| s <= at && at < e)
            .is_some_and(|&(s, _)| {
                text[..s]
                    .trim_end_matches(|c: char| c.is_ascii_whitespace())
                    .ends_with('=')
            })
    };
    spans
        .iter()
        .zip(&pieces)
        .enumerate()
        .map(|(i, (&(s, e), p))| match TokenKind::of_text(p) {
            TokenKind::Digit => {
                if e.min(bytes.len()) <= marker_end {
                    return Role::Marker;
                }
                let first_digit = (s..e.min(bytes.len()))
                    .find(|&k| bytes[k].is_ascii_digit())
                    .unwrap_or(s);
                if is_result(first_digit) {
                    Role::Result
                } else {
                    Role::Operand
                }
            }
            TokenKind::PlusMinus | TokenKind::TimesDivide => {
                Operation::of_text(p).map_or(Role::Other, Role::Operator)
            }
            TokenKind::Other if p == "x" => {
                let before = pieces[..i].iter().rev().find(|p| !p.is_empty());
                let after = pieces[i + 1..].iter().find(|p| !p.is_empty());
                let ends_digit = before.is_some_and(|b| b.ends_with(|c: char| c.is_ascii_digit()));
                let starts_digit =
                    after.is_some_and(|a| a.starts_with(|c: char| c.is_ascii_digit()));
                if ends_digit && starts_digit {
                    Role::Operator(Operation::Times)
                } else {
                    Role::Other
                }
            }
            TokenKind::Other => Role::Other,
        })
        .collect()
}

/// A number as the result/operand split reads it: digits, optionally a
/// decimal point and more digits.
fn number_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"[0-9]+(?:\.[0-9]+)?").expect("static regex"))
}

impl DigitConfidence {
    /// From a step's text, its tokens' byte ranges in it and their
    /// `(log-prob, entropy)`, in order; `operations` (from
    /// [`operation_logprobs`]) when the operation statistic is wanted.
    pub(crate) fn of(
        text: &str,
        spans: &[(usize, usize)],
        per_token: &[(f64, f64)],
        operations: Option<&[Option<f64>]>,
    ) -> DigitConfidence {
        let (mut n, mut sum, mut min) = (0usize, 0.0f64, 0.0f64);
        let mut plus_minus = 0.0f64;
        let mut a = ArithmeticConfidence::default();
        for (role, &(lp, _)) in roles(text, spans).into_iter().zip(per_token) {
            if matches!(role, Role::Result | Role::Operand | Role::Marker) {
                min = if n == 0 { lp } else { min.min(lp) };
                sum += lp;
                n += 1;
            }
            match role {
                Role::Result => a.result_min_logprob = a.result_min_logprob.min(lp),
                Role::Operand => a.operand_min_logprob = a.operand_min_logprob.min(lp),
                Role::Operator(Operation::Plus | Operation::Minus) => {
                    plus_minus = plus_minus.min(lp)
                }
                Role::Operator(Operation::Times | Operation::Divide) => {
                    a.times_divide_min_logprob = a.times_divide_min_logprob.min(lp)
                }
                Role::Marker | Role::Other => {}
            }
        }
        DigitConfidence {
            tokens: n,
            min_logprob: min,
            mean_logprob: if n == 0 { 0.0 } else { sum / n as f64 },
            plus_minus_min_logprob: plus_minus,
            arithmetic: Some(a),
            operation_min_logprob: operations
                .map(|o| o.iter().flatten().fold(0.0f64, |m, &v| m.min(v))),
            false_equations: Some(crate::recompute::recompute(text).false_count()),
        }
    }
}

/// The vocabulary rows of every token that writes an operation (by
/// [`Operation::of_text`]), cut from the model's vocabulary projection, and
/// each row's operation: their logits where an operator was written give
/// each operation's probability summed over all its notations.
#[derive(Debug, Clone)]
pub struct OperatorRows<W = Matrix> {
    rows: W,
    operations: Vec<Operation>,
}

impl OperatorRows {
    /// Scans `tok`'s vocabulary once (what a head load or the first feature
    /// extraction pays).
    pub(crate) fn load(model: &Transformer, tok: &Tokenizer) -> Result<OperatorRows> {
        let vocab = model.config().vocab_size.min(tok.vocab_size());
        let (mut ids, mut operations) = (Vec::new(), Vec::new());
        for id in 0..vocab as u32 {
            if let Some(op) = Operation::of_text(&tok.decode(&[id], false)?) {
                ids.push(id);
                operations.push(op);
            }
        }
        Ok(OperatorRows {
            rows: model.vocab_projection()?.select_rows(&ids)?,
            operations,
        })
    }

    #[cfg(feature = "gpu")]
    pub(crate) fn upload<K: Kernels>(&self, k: &K) -> Result<OperatorRows<K::Weights>> {
        Ok(OperatorRows {
            rows: k.upload(&self.rows)?,
            operations: self.operations.clone(),
        })
    }
}

/// Per step, per token of `enc`: for operator tokens, log P(the operation it
/// writes | some operation), from the operator rows' logits at the position
/// that predicts it; `None` for every other token (and for an operation the
/// vocabulary has no token of).
pub(crate) async fn operation_logprobs<K: Kernels>(
    k: &K,
    last: &K::Hidden,
    ops: &OperatorRows<K::Weights>,
    enc: &Encoded,
) -> Result<Vec<Vec<Option<f64>>>> {
    let mut out = Vec::with_capacity(enc.step_tokens.len());
    let mut positions = Vec::new();
    let mut wanted = Vec::new();
    for (s, ((text, spans), range)) in enc
        .step_texts
        .iter()
        .zip(&enc.step_spans)
        .zip(&enc.step_tokens)
        .enumerate()
    {
        out.push(vec![None; spans.len()]);
        for (i, role) in roles(text, spans).into_iter().enumerate() {
            if let (Role::Operator(op), Some(p)) = (role, (range.start + i).checked_sub(1)) {
                positions.push(p);
                wanted.push((s, i, op));
            }
        }
    }
    if positions.is_empty() || ops.operations.is_empty() {
        return Ok(out);
    }
    let layers = [Linear {
        weight: &ops.rows,
        bias: None,
        relu: false,
    }];
    let logits = k.rows(last, &positions, &layers).await?;
    let r = ops.operations.len();
    for ((s, i, op), row) in wanted.into_iter().zip(logits.chunks_exact(r)) {
        let all: Vec<f64> = row.iter().map(|&v| v as f64).collect();
        let mine: Vec<f64> = all
            .iter()
            .zip(&ops.operations)
            .filter(|(_, o)| **o == op)
            .map(|(&v, _)| v)
            .collect();
        out[s][i] = log_sum_exp(&mine)
            .zip(log_sum_exp(&all))
            .map(|(m, a)| m - a);
    }
    Ok(out)
}

/// ln Σ exp(v), stable; `None` for no values.
fn log_sum_exp(v: &[f64]) -> Option<f64> {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m > f64::NEG_INFINITY).then(|| m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spans of `pieces` laid end to end, and the text they make.
    fn tokens(pieces: &[&str]) -> (String, Vec<(usize, usize)>) {
        let mut text = String::new();
        let mut spans = Vec::new();
        for p in pieces {
            spans.push((text.len(), text.len() + p.len()));
            text.push_str(p);
        }
        (text, spans)
    }

    #[test]
    fn roles_split_results_operands_markers_and_signs() {
        let (text, spans) = tokens(&[
            "2", ".", " Half", ":", " ", "1", "2", " x", " ", "3", " /", " ", "4", " =", " ", "9",
            ".", "5", " -", "1", " box", " x", " y",
        ]);
        use Role::*;
        assert_eq!(
            roles(&text, &spans),
            [
                Marker,
                Other,
                Other,
                Other,
                Other,
                Operand,
                Operand,
                Operator(Operation::Times),
                Other,
                Operand,
                Operator(Operation::Divide),
                Other,
                Operand,
                Other,
                Other,
                Result,
                Other,
                Result,
                Operator(Operation::Minus),
                Operand,
                Other,
                Other,
                Other
            ]
        );
    }

    #[test]
    fn statistics_take_each_class_minimum() {
        let (text, spans) = tokens(&[
            "Step 3:", " 4", " \u{d7}", " 5", " =", " 2", "0", " +", " 1",
        ]);
        let lps: Vec<(f64, f64)> = [-9.0, -1.0, -2.5, -3.0, -0.2, -7.0, -0.5, -1.5, -4.0]
            .iter()
            .map(|&lp| (lp, 0.0))
            .collect();
        let d = DigitConfidence::of(&text, &spans, &lps, None);
        // "Step 3:" is not a digit token (it holds letters); " 1" after "+" is an operand.
        assert_eq!((d.tokens, d.min_logprob), (5, -7.0));
        assert!((d.mean_logprob - (-1.0 - 3.0 - 7.0 - 0.5 - 4.0) / 5.0).abs() < 1e-12);
        assert_eq!(d.plus_minus_min_logprob, -1.5);
        assert_eq!(
            d.arithmetic,
            Some(ArithmeticConfidence {
                result_min_logprob: -7.0,
                operand_min_logprob: -4.0,
                times_divide_min_logprob: -2.5,
            })
        );
        let none = DigitConfidence::of(
            "Words only.",
            &[(0, 5), (5, 11)],
            &[(-3.0, 0.0), (-1.0, 0.0)],
            None,
        );
        assert_eq!(
            (none.tokens, none.min_logprob, none.plus_minus_min_logprob),
            (0, 0.0, 0.0)
        );
        assert_eq!(none.arithmetic, Some(ArithmeticConfidence::default()));
    }

    #[test]
    fn marker_digits_count_as_digits_but_not_as_operands() {
        let (text, spans) = tokens(&["3", ".", " ", "7"]);
        let lps = [(-8.0, 0.0), (-0.1, 0.0), (-0.1, 0.0), (-1.0, 0.0)];
        let d = DigitConfidence::of(&text, &spans, &lps, None);
        assert_eq!((d.tokens, d.min_logprob), (2, -8.0));
        assert_eq!(d.arithmetic.unwrap().operand_min_logprob, -1.0);
        // "1.5 cm" is a number, not a marker.
        let (text, spans) = tokens(&["1", ".", "5", " cm"]);
        assert_eq!(roles(&text, &spans)[0], Role::Operand);
    }

    #[test]
    fn token_kinds_by_trimmed_text() {
        for (text, kind) in [
            (" 12", TokenKind::Digit),
            ("+", TokenKind::PlusMinus),
            (" -", TokenKind::PlusMinus),
            ("\u{2212}", TokenKind::PlusMinus),
            (" \u{d7}", TokenKind::TimesDivide),
            (" \\times", TokenKind::TimesDivide),
            ("x", TokenKind::Other),
            ("+=", TokenKind::Other),
            ("-1", TokenKind::Other),
            (" ", TokenKind::Other),
        ] {
            assert_eq!(TokenKind::of_text(text), kind, "{text:?}");
        }
    }

    #[test]
    fn spans_off_char_boundaries_or_past_the_text_do_not_panic() {
        // A byte-level token may end inside "é"; a span may run past the end.
        let text = "é = 5";
        let spans = [(0, 1), (1, 2), (2, 4), (4, 6), (6, 9)];
        let lps = [(-1.0, 0.0); 5];
        let d = DigitConfidence::of(text, &spans, &lps, None);
        assert_eq!(d.arithmetic.unwrap().result_min_logprob, -1.0);
    }
}
