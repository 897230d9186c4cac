//! The trace readers, every row format (ProcessBench, TRL, raw, chat,
//! native, auto-detected) in every layout (JSONL, one JSON array,
//! pretty-printed objects): the first byte picks the format, the segmenter
//! for raw rows and the limits; the rest is the input document. Any record
//! may be refused; none may panic, hang or allocate without bound, and
//! every record that comes out must obey the validation rules.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use stepscore::io::{InputFormat, ReadOptions, TraceReader};
use stepscore::segment::Segmenter;
use stepscore::validate::{check_score, is_blank, scored_steps, Unscored};
use stepscore::Error;

fn segmenter(k: u8) -> Segmenter {
    match k % 6 {
        0 => Segmenter::BlankLine,
        1 => Segmenter::Newline,
        2 => Segmenter::StepMarker,
        3 => Segmenter::ChatTurns,
        4 => "regex:;+".parse().unwrap_or_default(),
        _ => "auto".parse().unwrap_or_default(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, doc)) = data.split_first() else {
        return;
    };
    // Bits 0-2: the format; 3-6: the segmenter; 7: small limits.
    let format = InputFormat::ALL[usize::from(sel & 7) % InputFormat::ALL.len()];
    // Small limits half the time, so the over-limit paths are reached.
    let small = sel & 0x80 != 0;
    let opts = ReadOptions {
        format,
        segmenter: segmenter((sel >> 3) & 15),
        max_line_bytes: if small { 256 } else { 1 << 20 },
        max_document_bytes: if small { 2048 } else { 1 << 22 },
        source_name: "fuzz".into(),
    };
    let mut records = 0usize;
    for item in TraceReader::new(Cursor::new(doc), opts).records() {
        records += 1;
        // One item per row or per line at most: the reader always advances.
        assert!(records <= doc.len() + 1);
        match item {
            Ok(r) => {
                assert!(r.at.line >= 1);
                let t = &r.trace;
                // What the reader lets through obeys the rules.
                // (`check_trace_scores` is crate-private since issue 25:
                // the same rule through the public `check_score`.)
                for step in &t.steps {
                    if let Some(score) = step.score {
                        assert!(check_score(score, "fuzz").is_ok(), "{:?}", t.steps);
                    }
                }
                for step in &t.steps {
                    if let (Some(span), Some(resp)) = (step.span, &t.response) {
                        assert_eq!(resp.get(span.start..span.end), Some(step.text.as_str()));
                    }
                }
                if format == InputFormat::Raw {
                    assert!(t.steps.iter().all(|s| !is_blank(&s.text)));
                }
                let _ = scored_steps(t, Unscored::Prefix);
                let _ = t.answer();
            }
            Err(Error::Input { location, message }) => {
                assert!(location.line >= 1 && !message.is_empty());
            }
            Err(e) => panic!("only input errors come out of an in-memory read: {e}"),
        }
    }
});
