//! Where a person should look in a step: the stretch of its text around the
//! token the LM found least likely. One rule for every front end (the CLI's
//! table, the npm package, Python, the demo), so they all point at the same
//! number.

use super::scorer::TokenLogprob;
use super::token_classes::is_digit_text;

/// A byte range of a step's text and the log-prob of the token that led to it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeastLikely {
    pub start: usize,
    pub end: usize,
    pub logprob: f64,
}

/// The least likely digit token of a step (any token with visible text when
/// the step has no digits), widened to the whole number it is part of
/// (digits, `.` and `,`, without a trailing `.` or `,`), so in "16+8=240"
/// a wrong "4" shows as "240". `tokens` are the step's [`TokenLogprob`]s with
/// byte spans into `text`; `None` when no token covers visible text.
pub fn least_likely(tokens: &[TokenLogprob], text: &str) -> Option<LeastLikely> {
    let piece = |t: &TokenLogprob| text.get(t.start..t.end);
    let is_digits = |t: &TokenLogprob| piece(t).is_some_and(is_digit_text);
    let visible = |t: &TokenLogprob| piece(t).is_some_and(|p| !p.trim().is_empty());
    let least = |digits_only: bool| {
        tokens
            .iter()
            .filter(|t| {
                if digits_only {
                    is_digits(t)
                } else {
                    visible(t)
                }
            })
            .min_by(|a, b| a.logprob.total_cmp(&b.logprob))
    };
    let t = least(true).or_else(|| least(false))?;
    let (mut a, mut b) = (t.start, t.end);
    if is_digits(t) {
        let bytes = text.as_bytes();
        let number = |c: u8| c.is_ascii_digit() || c == b'.' || c == b',';
        while a > 0 && number(bytes[a - 1]) {
            a -= 1;
        }
        while b < bytes.len() && number(bytes[b]) {
            b += 1;
        }
    }
    // Trim what the token carries besides its text (a leading space, a
    // sentence's full stop); only ASCII bytes move the ends, so both stay on
    // char boundaries.
    let shown = text.get(a..b)?;
    let start = a + (shown.len() - shown.trim_start().len());
    let end = start + shown.trim().trim_end_matches(['.', ',']).len();
    (end > start).then_some(LeastLikely {
        start,
        end,
        logprob: t.logprob,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(start: usize, end: usize, logprob: f64) -> TokenLogprob {
        TokenLogprob {
            start,
            end,
            logprob,
            entropy: 1.0,
        }
    }

    fn shown(tokens: &[TokenLogprob], text: &str) -> Option<(String, f64)> {
        least_likely(tokens, text).map(|l| (text[l.start..l.end].to_string(), l.logprob))
    }

    #[test]
    fn a_digit_widens_to_its_number() {
        // "16+8=240." tokenized digit by digit, the "4" least likely of the digits;
        // "+" is less likely still, but a digit wins over any other token.
        let text = "16+8=240.";
        let tokens = [
            tok(0, 1, -0.1),
            tok(1, 2, -0.2),
            tok(2, 3, -9.0),
            tok(3, 4, -0.3),
            tok(4, 5, -0.1),
            tok(5, 6, -0.5),
            tok(6, 7, -7.5),
            tok(7, 8, -0.4),
            tok(8, 9, -0.1),
        ];
        assert_eq!(shown(&tokens, text), Some(("240".into(), -7.5)));
    }

    #[test]
    fn decimals_and_thousands_stay_whole_and_spaces_are_trimmed() {
        // " 1" with its leading space least likely, then ",", "250", ".", "5", " kg."
        let text = "It weighs 1,250.5 kg.";
        let tokens = [
            tok(0, 2, -0.1),
            tok(2, 9, -0.2),
            tok(9, 11, -3.0),
            tok(11, 12, -0.1),
            tok(12, 15, -0.2),
            tok(15, 16, -0.3),
            tok(16, 17, -0.2),
            tok(17, 21, -5.0),
        ];
        assert_eq!(shown(&tokens, text), Some(("1,250.5".into(), -3.0)));
    }

    #[test]
    fn without_digits_the_least_likely_visible_token() {
        // The whitespace-only token is the least likely but shows nothing.
        let text = "so  then é";
        let tokens = [
            tok(0, 2, -1.0),
            tok(2, 3, -8.0),
            tok(3, 8, -2.0),
            tok(8, 11, -4.0),
        ];
        assert_eq!(shown(&tokens, text), Some(("é".into(), -4.0)));
    }

    #[test]
    fn non_ascii_before_the_number_keeps_byte_spans() {
        // "×" is 2 bytes: "54" is bytes 9..11.
        let text = "7 × 8 = 54";
        let tokens = [
            tok(0, 1, -0.1),
            tok(1, 4, -0.1),
            tok(4, 6, -0.2),
            tok(6, 8, -0.3),
            tok(8, 10, -0.4),
            tok(10, 11, -6.0),
        ];
        let l = least_likely(&tokens, text).unwrap();
        assert_eq!((l.start, l.end, &text[l.start..l.end]), (9, 11, "54"));
    }

    #[test]
    fn nothing_to_show() {
        assert_eq!(least_likely(&[], "abc"), None);
        assert_eq!(least_likely(&[tok(0, 1, -1.0)], " "), None);
        // A span past the text is ignored, not a panic.
        assert_eq!(least_likely(&[tok(2, 9, -1.0)], "abc"), None);
    }
}
