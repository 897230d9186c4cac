//! Span invariants of every segmenter on random Unicode text built from the
//! pieces segmenters care about (line ends, blank lines, markers, role
//! prefixes, multibyte chars).

use proptest::prelude::*;
use stepscore::segment::{segment_response, Segmenter};

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\n\n".to_string()),
        Just("\r\n \t\r\n".to_string()),
        Just("\r".to_string()),
        Just(" ".to_string()),
        Just("\u{3000}".to_string()), // ideographic space: Unicode whitespace, 3 bytes
        Just("Step 3:".to_string()),
        Just("**Step 12.**".to_string()),
        Just("1.".to_string()),
        Just("2) ".to_string()),
        Just("User:".to_string()),
        Just("Assistant: ".to_string()),
        Just("Tool (calc):".to_string()),
        Just("tool call (f):".to_string()),
        Just("é".to_string()),
        Just("日本".to_string()),
        Just("🦀".to_string()),
        Just(";".to_string()),
        "[a-z]{1,5}",
        any::<char>().prop_map(|c| c.to_string()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..40).prop_map(|v| v.concat())
}

fn segmenters() -> Vec<Segmenter> {
    vec![
        Segmenter::BlankLine,
        Segmenter::Newline,
        Segmenter::StepMarker,
        Segmenter::ChatTurns,
        "regex:;+".parse().unwrap(),
        "regex:\\n\\s*\\n".parse().unwrap(),
        // Matches the empty string everywhere (refused when parsed, so built
        // directly): must still never split a char.
        Segmenter::Regex(regex::Regex::new("x*").unwrap()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn spans_slice_back_ordered_nonempty(text in text()) {
        for seg in segmenters() {
            let steps = seg.segment(&text);
            let mut prev_end = 0;
            for step in &steps {
                let span = step.span.expect("every segmented step has a span");
                prop_assert!(span.start < span.end, "{seg}: empty span {span:?}");
                prop_assert!(span.start >= prev_end, "{seg}: overlapping or unordered spans");
                prop_assert!(text.is_char_boundary(span.start) && text.is_char_boundary(span.end));
                prop_assert_eq!(&text[span.start..span.end], step.text.as_str());
                prop_assert_eq!(step.text.trim(), step.text.as_str(), "{} left whitespace", seg);
                prop_assert!(!stepscore::validate::is_blank(&step.text), "{seg}: blank step");
                prev_end = span.end;
            }
        }
    }

    /// Segmenters that only cut (no prefix is dropped) lose no non-whitespace
    /// text: the steps' non-whitespace chars are exactly the input's.
    #[test]
    fn cutting_segmenters_keep_all_text(text in text()) {
        // Invisible chars (whitespace, zero-width) alone make no step.
        let squeeze = |s: &str| {
            s.chars()
                .filter(|c| !stepscore::validate::is_blank(c.encode_utf8(&mut [0; 4])))
                .collect::<String>()
        };
        for seg in [Segmenter::BlankLine, Segmenter::Newline, Segmenter::StepMarker] {
            let joined: String = seg.segment(&text).iter().map(|s| s.text.as_str()).collect();
            prop_assert_eq!(squeeze(&joined), squeeze(&text), "{}", seg);
        }
    }

    /// No step from the newline segmenter spans a line break, and blank-line
    /// steps contain no blank line.
    #[test]
    fn line_structure(text in text()) {
        for step in Segmenter::Newline.segment(&text) {
            prop_assert!(!step.text.contains('\n'));
        }
        for step in Segmenter::BlankLine.segment(&text) {
            for line in step.text.split('\n') {
                prop_assert!(!line.trim().is_empty(), "blank line inside {:?}", step.text);
            }
        }
    }

    #[test]
    fn segment_response_spans_point_into_response(text in text()) {
        let trace = segment_response("p", &text, &Segmenter::ChatTurns);
        let response = trace.response.as_deref().unwrap();
        for step in &trace.steps {
            let span = step.span.unwrap();
            prop_assert_eq!(&response[span.start..span.end], step.text.as_str());
        }
    }
}
