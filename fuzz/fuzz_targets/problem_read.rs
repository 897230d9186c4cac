//! The problem rows `generate` and `search` read (`TraceReader::problems`):
//! the same layouts (JSONL, one JSON array, pretty-printed objects), limits
//! and strict parser as traces. The first byte picks small limits (bit 7)
//! so the over-limit paths are reached; the rest is the document. Any row
//! may be refused; none may panic, hang or allocate without bound; every
//! error is a located input error and the reader always advances.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use stepscore::io::{ReadOptions, TraceReader};
use stepscore::Error;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, doc)) = data.split_first() else {
        return;
    };
    let small = sel & 0x80 != 0;
    let opts = ReadOptions {
        max_line_bytes: if small { 256 } else { 1 << 20 },
        max_document_bytes: if small { 2048 } else { 1 << 22 },
        source_name: "fuzz".into(),
        ..Default::default()
    };
    let mut rows = 0usize;
    for item in TraceReader::new(Cursor::new(doc), opts).problems() {
        rows += 1;
        // One item per row or per line at most: the reader always advances.
        assert!(rows <= doc.len() + 1);
        match item {
            Ok(p) => {
                assert!(p.at.line >= 1);
                // What came out fits in what went in.
                assert!(p.problem.len() <= doc.len());
            }
            Err(Error::Input { location, message }) => {
                assert!(location.line >= 1 && !message.is_empty());
            }
            Err(e) => panic!("only input errors come out of an in-memory read: {e}"),
        }
    }
});
