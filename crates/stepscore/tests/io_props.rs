//! The reader never panics and never loses a row: on random line soup, every
//! non-blank line yields exactly one result, and every good line its trace.

use std::io::Cursor;

use proptest::prelude::*;
use stepscore::io::{ReadOptions, TraceReader};

const GOOD: &str = r#"{"problem":"good","steps":["a"],"label":0}"#;

fn junk_line() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just("[".to_string()),
        Just("\"problem\":".to_string()),
        Just("\"steps\":[\"a\"]".to_string()),
        Just("\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]".to_string()),
        Just("\"response\":\"a\\n\\nb\"".to_string()),
        Just("\"completions\":[\"c\"],\"labels\":[true, null]".to_string()),
        Just("\"label\":-3".to_string()),
        Just(",".to_string()),
        Just("null".to_string()),
        Just("\r".to_string()),
        "\\PC{0,6}",
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat().replace('\n', " "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn one_result_per_nonblank_line(lines in prop::collection::vec(prop::option::of(junk_line()), 0..20), cap in 8usize..200) {
        // Start with a good line so the layout is JSONL (no pretty-document probe).
        let mut input = format!("{GOOD}\n");
        let mut expected: Vec<Option<bool>> = vec![Some(GOOD.len() <= cap)];
        for l in &lines {
            match l {
                None => { input.push_str(GOOD); expected.push(Some(GOOD.len() <= cap)); }
                Some(j) => { input.push_str(j); if !j.trim().is_empty() { expected.push(None); } }
            }
            input.push('\n');
        }
        let opts = ReadOptions { max_line_bytes: cap, ..Default::default() };
        let results: Vec<_> = TraceReader::new(Cursor::new(input.into_bytes()), opts).collect();
        prop_assert_eq!(results.len(), expected.len());
        for (r, want_ok) in results.iter().zip(&expected) {
            if let Some(ok) = want_ok {
                prop_assert_eq!(r.is_ok(), *ok, "{:?}", r);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let opts = ReadOptions { max_line_bytes: 64, max_document_bytes: 256, ..Default::default() };
        for r in TraceReader::new(Cursor::new(bytes), opts) {
            let _ = r;
        }
    }
}
