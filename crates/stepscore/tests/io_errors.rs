//! Bad input: every error names source, line and field, and the reader goes
//! on to the next row.

use std::io::Cursor;

use stepscore::io::{InputFormat, ReadOptions, TraceReader};
use stepscore::{Error, Location, Result, Trace};

const GOOD: &str = r#"{"problem":"good","steps":["a","b"],"label":-1}"#;

fn read_bytes(input: &[u8], opts: ReadOptions) -> Vec<Result<Trace>> {
    TraceReader::new(Cursor::new(input.to_vec()), opts).collect()
}

fn opts() -> ReadOptions {
    ReadOptions {
        source_name: "data.jsonl".into(),
        ..Default::default()
    }
}

fn location(r: &Result<Trace>) -> (&Location, &str) {
    match r {
        Err(Error::Input { location, message }) => (location, message.as_str()),
        Err(e) => panic!("expected an input error, got {e}"),
        Ok(t) => panic!("expected an error, got a trace for {:?}", t.problem),
    }
}

/// `bad` sits on line 2 between two good lines: exactly one error at line 2
/// naming `field` and containing `needle`, and both good rows come out.
fn assert_bad_line(bad: &[u8], field: Option<&str>, needle: &str) {
    let mut input = Vec::new();
    input.extend_from_slice(GOOD.as_bytes());
    input.push(b'\n');
    input.extend_from_slice(bad);
    input.push(b'\n');
    input.extend_from_slice(GOOD.as_bytes());
    let results = read_bytes(&input, opts());
    assert_eq!(results.len(), 3, "input {:?}", String::from_utf8_lossy(bad));
    assert!(results[0].is_ok());
    let (loc, message) = location(&results[1]);
    assert_eq!(loc.source, "data.jsonl");
    assert_eq!(loc.line, 2, "{message}");
    assert_eq!(loc.field.as_deref(), field, "{message}");
    assert!(
        message.contains(needle),
        "message `{message}` lacks `{needle}`"
    );
    let shown = results[1].as_ref().unwrap_err().to_string();
    assert!(shown.starts_with("data.jsonl line 2"), "{shown}");
    assert_eq!(results[2].as_ref().unwrap().problem, "good");
}

#[test]
fn broken_json() {
    assert_bad_line(br#"{"problem": "p", "steps": ["a"]"#, None, "invalid JSON");
    assert_bad_line(br#"{"problem": "p"} trailing"#, None, "trailing");
    assert_bad_line(b"not json at all", None, "invalid JSON");
}

#[test]
fn missing_fields_are_named() {
    assert_bad_line(
        br#"{"steps":["a"],"label":0}"#,
        Some("problem"),
        "missing field `problem`",
    );
    assert_bad_line(
        br#"{"completions":["a"],"labels":[true]}"#,
        Some("prompt"),
        "missing field `prompt`",
    );
    assert_bad_line(
        br#"{"response":"text"}"#,
        Some("problem"),
        "missing field `problem`",
    );
    assert_bad_line(
        br#"{"messages":[{"content":"hi"}]}"#,
        Some("messages[0].role"),
        "missing field `role`",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":[{"score":0.5}]}"#,
        Some("steps[0]"),
        "text",
    );
    assert_bad_line(br#"{"problem":"p"}"#, None, "cannot tell the row format");
    let pb = ReadOptions {
        format: InputFormat::ProcessBench,
        ..opts()
    };
    let r = read_bytes(br#"{"problem":"p"}"#, pb);
    assert_eq!(location(&r[0]).0.field.as_deref(), Some("steps"));
}

#[test]
fn wrong_types_are_named() {
    assert_bad_line(
        br#"{"problem":3,"steps":["a"]}"#,
        Some("problem"),
        "expected a string, found a number",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a",2]}"#,
        Some("steps[1]"),
        "expected a string",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":"a"}"#,
        Some("steps"),
        "expected an array",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"label":"0"}"#,
        Some("label"),
        "integer",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"label":0.5}"#,
        Some("label"),
        "integer",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a","b"],"label":2}"#,
        Some("label"),
        "outside",
    );
    assert_bad_line(
        br#"{"prompt":"p","completions":["a"],"labels":["yes"]}"#,
        Some("labels[0]"),
        "expected a boolean",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"scores":["x"]}"#,
        Some("scores[0]"),
        "number",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"id":[1]}"#,
        Some("id"),
        "string or number",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":[{"text":"a","label":"yes"}]}"#,
        Some("steps[0]"),
        "invalid type",
    );
    assert_bad_line(
        br#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":5}]}"#,
        Some("messages[1].content"),
        "found a number",
    );
    assert_bad_line(
        br#"{"messages":[{"role":"wizard","content":"q"}]}"#,
        Some("messages[0].role"),
        "unknown role `wizard`",
    );
    assert_bad_line(br#"[1, 2]"#, None, "expected a JSON object, found an array");
}

#[test]
fn non_utf8_names_byte_offset() {
    // The bad byte 0xFF sits at offset 14 of the line.
    let mut bad = br#"{"problem":"ab"#.to_vec();
    assert_eq!(bad.len(), 14);
    bad.push(0xFF);
    bad.extend_from_slice(br#"","steps":["a"]}"#);
    assert_bad_line(&bad, None, "invalid UTF-8 at byte offset 14");
}

#[test]
fn empty_steps_and_length_mismatches() {
    assert_bad_line(
        br#"{"problem":"p","steps":[],"label":-1}"#,
        Some("steps"),
        "empty step list",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":[]}"#,
        Some("steps"),
        "empty step list",
    );
    assert_bad_line(
        br#"{"prompt":"p","completions":[],"labels":[]}"#,
        Some("completions"),
        "empty step list",
    );
    assert_bad_line(
        br#"{"prompt":"p","completions":["a","b"],"labels":[true]}"#,
        Some("labels"),
        "1 labels for 2 steps",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"scores":[0.1,0.2]}"#,
        Some("scores"),
        "2 scores for 1 steps",
    );
    assert_bad_line(
        br#"{"problem":"p","response":"  \n\n "}"#,
        Some("response"),
        "no steps",
    );
    assert_bad_line(
        br#"{"messages":[{"role":"user","content":"only a question"}]}"#,
        Some("messages"),
        "no assistant message",
    );
    assert_bad_line(
        br#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"  "}]}"#,
        Some("messages"),
        "empty step list",
    );
}

#[test]
fn native_spans_are_checked() {
    assert_bad_line(
        br#"{"problem":"p","response":"abc","steps":[{"text":"xy","span":{"start":0,"end":2}}]}"#,
        Some("steps[0].span"),
        "differs",
    );
    assert_bad_line(
        br#"{"problem":"p","response":"abc","steps":[{"text":"c","span":{"start":2,"end":9}}]}"#,
        Some("steps[0].span"),
        "3-byte response",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":[{"text":"c","span":{"start":0,"end":1}}]}"#,
        Some("steps[0].span"),
        "response",
    );
    // "é" is 2 bytes: a span ending inside it is rejected, not a panic.
    assert_bad_line(
        r#"{"problem":"p","response":"é","steps":[{"text":"é","span":{"start":0,"end":1}}]}"#
            .as_bytes(),
        Some("steps[0].span"),
        "char-aligned",
    );
}

#[test]
fn non_finite_scores_are_none() {
    // 1e999 overflows f64: serde_json rejects it as a number out of range.
    assert_bad_line(
        br#"{"problem":"p","steps":["a"],"scores":[1e999]}"#,
        None,
        "invalid JSON",
    );
    let r = read_bytes(
        br#"{"problem":"p","steps":["a","b"],"scores":[null,0.5]}"#,
        opts(),
    );
    let t = r[0].as_ref().unwrap();
    assert_eq!(t.steps[0].score, None);
    assert_eq!(t.steps[1].score, Some(0.5));
}

#[test]
fn overlong_line_is_skipped() {
    let long = format!(r#"{{"problem":"{}","steps":["a"]}}"#, "x".repeat(200));
    let small = ReadOptions {
        max_line_bytes: 100,
        ..opts()
    };
    let input = format!("{GOOD}\n{long}\n{GOOD}\n");
    let results = read_bytes(input.as_bytes(), small);
    assert_eq!(results.len(), 3);
    let (loc, message) = location(&results[1]);
    assert_eq!(loc.line, 2);
    assert!(
        message.contains("longer than the 100-byte limit"),
        "{message}"
    );
    assert!(results[2].is_ok());
}

#[test]
fn line_numbers_count_blank_lines() {
    let input = format!("\n\n{GOOD}\n\n   \nbroken\n{GOOD}");
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 3);
    assert_eq!(location(&results[1]).0.line, 6);
}

#[test]
fn array_items_are_numbered() {
    let input = format!("[{GOOD},\n{{\"problem\":\"p\",\"steps\":[]}},\n{GOOD}]");
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 3);
    let (loc, _) = location(&results[1]);
    assert_eq!(
        (loc.line, loc.item, loc.field.as_deref()),
        (2, Some(2), Some("steps"))
    );
    assert!(results[2].is_ok());
}

#[test]
fn broken_and_oversized_arrays() {
    let results = read_bytes(format!("[{GOOD},\n{GOOD}\n{GOOD}]").as_bytes(), opts());
    assert_eq!(results.len(), 1);
    let (loc, message) = location(&results[0]);
    assert_eq!(loc.line, 3, "{message}");
    assert!(message.contains("invalid JSON array"), "{message}");

    let small = ReadOptions {
        max_document_bytes: 64,
        ..opts()
    };
    let results = read_bytes(format!("[{GOOD},{GOOD}]").as_bytes(), small);
    assert_eq!(results.len(), 1);
    assert!(location(&results[0]).1.contains("64-byte document limit"));

    let results = read_bytes(b"[\"a\xff\"]", opts());
    assert!(location(&results[0])
        .1
        .contains("invalid UTF-8 at byte offset 3"));
}

/// A JSON array line followed by JSONL lines (issue 23, item 11): the
/// array's rows and the good lines are kept, the bad line is reported at its
/// own line; an array right after an array is read as one too.
#[test]
fn input_after_an_array_is_read_on() {
    let bad = r#"{"problem":"p","steps":[]}"#;
    let input = format!("[{GOOD},{GOOD}]\n{GOOD}\n{bad}\n\n{GOOD}\n");
    let results = read_bytes(input.as_bytes(), opts());
    let shape: Vec<bool> = results.iter().map(|r| r.is_ok()).collect();
    assert_eq!(shape, [true, true, true, false, true], "{results:?}");
    let (loc, message) = location(&results[3]);
    assert_eq!((loc.line, loc.item), (3, None), "{message}");
    assert!(message.contains("empty step list"), "{message}");

    let input = format!("[{GOOD}]\n[{GOOD},\n{bad}] {GOOD}");
    let results = read_bytes(input.as_bytes(), opts());
    let shape: Vec<bool> = results.iter().map(|r| r.is_ok()).collect();
    assert_eq!(shape, [true, true, false, true], "{results:?}");
    let (loc, message) = location(&results[2]);
    assert_eq!((loc.line, loc.item), (3, Some(2)), "{message}");

    // Something that is no row after the array: one error at its line.
    let results = read_bytes(format!("[{GOOD}]\n\n]\n{GOOD}\n").as_bytes(), opts());
    let shape: Vec<bool> = results.iter().map(|r| r.is_ok()).collect();
    assert_eq!(shape, [true, false, true], "{results:?}");
    let (loc, message) = location(&results[1]);
    assert_eq!(loc.line, 3, "{message}");
    assert!(message.contains("invalid JSON"), "{message}");
}

/// A first line that opens an object it never closes is not mistaken for a
/// pretty-printed document: its error is reported and later lines survive.
#[test]
fn truncated_first_line_does_not_swallow_the_rest() {
    let input = format!("{{\"problem\": \"p\", \"steps\": [\n{GOOD}\n{GOOD}\n");
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 3);
    let (loc, message) = location(&results[0]);
    assert_eq!(loc.line, 1);
    assert!(message.contains("invalid JSON"), "{message}");
    assert!(results[1].is_ok() && results[2].is_ok());
    // Same when the document is over the whole-document limit.
    let small = ReadOptions {
        max_document_bytes: 40,
        ..opts()
    };
    let results = read_bytes(input.as_bytes(), small);
    assert_eq!(results.len(), 3);
    assert_eq!(location(&results[0]).0.line, 1);
    assert!(results[1].is_ok() && results[2].is_ok());
}

#[test]
fn pretty_objects_report_their_start_line() {
    let input = "{\n \"problem\": \"p\",\n \"steps\": [\"a\"]\n}\n{\n \"problem\": \"q\",\n \"steps\": []\n}\n";
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    let (loc, _) = location(&results[1]);
    assert_eq!((loc.line, loc.field.as_deref()), (5, Some("steps")));
}

#[test]
fn io_errors_end_the_stream() {
    struct Failing;
    impl std::io::Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }
    let mut r = TraceReader::new(std::io::BufReader::new(Failing), opts());
    match r.next() {
        Some(Err(Error::Io { path, source })) => {
            assert_eq!(path, "data.jsonl");
            assert!(source.to_string().contains("disk on fire"));
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
    assert!(r.next().is_none());
}

/// Items of an array are parsed one at a time: tricky strings do not confuse
/// the item boundaries, and a bad item does not stop the next.
#[test]
fn array_items_with_tricky_strings() {
    let input = r#"[{"problem":"a,]}\"[","steps":["x"]}, {"problem":"\\","steps":5}, {"problem":"c","steps":["y"]}]"#;
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap().problem, "a,]}\"[");
    // All on line 1: the element is item 2 of line 1, not "line 2".
    let (loc, _) = location(&results[1]);
    assert_eq!(
        (loc.line, loc.item, loc.field.as_deref()),
        (1, Some(2), Some("steps"))
    );
    assert_eq!(
        results[1].as_ref().unwrap_err().to_string(),
        "data.jsonl line 1, item 2, field `steps`: expected an array, found a number"
    );
    assert_eq!(results[2].as_ref().unwrap().problem, "c");
}

/// Scores are probabilities: anything outside [0, 1] is refused where it
/// is read, naming the field, in every format that carries scores.
#[test]
fn scores_outside_the_unit_interval_are_refused() {
    for (row, field) in [
        (
            r#"{"problem":"p","steps":["a","b"],"scores":[0.5,1.5]}"#,
            "scores[1]",
        ),
        (
            r#"{"problem":"p","steps":["a"],"scores":[-0.25]}"#,
            "scores[0]",
        ),
        (
            r#"{"problem":"p","steps":["a"],"scores":[1e308]}"#,
            "scores[0]",
        ),
        (
            r#"{"prompt":"p","completions":["a","b"],"labels":[true,false],"scores":[7.5,0.1]}"#,
            "scores[0]",
        ),
        (
            r#"{"problem":"p","steps":[{"text":"x","score":0.9},{"text":"y","score":-7}]}"#,
            "steps[1].score",
        ),
        (
            r#"{"problem":"p","response":"a\n\nb","scores":[0.5,2]}"#,
            "scores[1]",
        ),
    ] {
        assert_bad_line(row.as_bytes(), Some(field), "outside [0, 1]");
    }
    // The ends of the interval are fine.
    let r = read_bytes(
        br#"{"problem":"p","steps":["a","b"],"scores":[0,1]}"#,
        opts(),
    );
    assert_eq!(r[0].as_ref().unwrap().scores(), Some(vec![0.0, 1.0]));
}

/// serde_json keeps the last of two equal keys; the reader refuses them.
#[test]
fn duplicate_keys_are_refused_by_path() {
    assert_bad_line(
        br#"{"problem":"p","steps":["a","b"],"label":-1,"label":1}"#,
        Some("label"),
        "duplicate key `label`",
    );
    assert_bad_line(
        br#"{"problem":"p","steps":[{"text":"a","score":0.1,"score":0.9}]}"#,
        Some("steps[0].score"),
        "duplicate key",
    );
    // In an array document too, and the next item is still read.
    let input = format!(r#"[{{"problem":"p","problem":"q","steps":["a"]}}, {GOOD}]"#);
    let results = read_bytes(input.as_bytes(), opts());
    assert_eq!(results.len(), 2);
    let (loc, message) = location(&results[0]);
    assert_eq!((loc.item, loc.field.as_deref()), (Some(1), Some("problem")));
    assert!(message.contains("duplicate key"), "{message}");
    assert!(results[1].is_ok());
}

/// Errors name the record's id when it has one.
#[test]
fn errors_name_the_id() {
    let input = format!("{GOOD}\n{}\n", r#"{"id":7,"problem":"p","steps":[]}"#);
    let results = read_bytes(input.as_bytes(), opts());
    let shown = results[1].as_ref().unwrap_err().to_string();
    assert_eq!(
        shown,
        "data.jsonl line 2, id `7`, field `steps`: empty step list"
    );
}

/// An element of a JSON array obeys the record limit like a JSONL line;
/// the elements around it are kept.
#[test]
fn array_items_obey_the_record_limit() {
    let long = format!(r#"{{"problem":"{}","steps":["a"]}}"#, "x".repeat(200));
    let small = ReadOptions {
        max_line_bytes: 100,
        ..opts()
    };
    let input = format!("[{GOOD},\n{long},\n{GOOD}]");
    let results = read_bytes(input.as_bytes(), small);
    assert_eq!(results.len(), 3);
    let (loc, message) = location(&results[1]);
    assert_eq!((loc.line, loc.item), (2, Some(2)));
    assert!(message.contains("array item of 228 bytes"), "{message}");
    assert!(message.contains("100-byte limit"), "{message}");
    assert!(results[0].is_ok() && results[2].is_ok());
}

/// A stream without line breaks ends with an error once the skip cap is
/// passed, instead of being read forever (`stepscore segment /dev/zero`).
#[test]
fn endless_line_ends_the_read() {
    let small = ReadOptions {
        max_line_bytes: 64,
        max_document_bytes: 1 << 20,
        ..opts()
    };
    let endless = std::io::BufReader::new(std::io::repeat(b'x'));
    let mut reader = TraceReader::new(endless, small);
    let (loc, message) = match reader.next() {
        Some(Err(Error::Input { location, message })) => (location, message),
        other => panic!("expected an input error, got {other:?}"),
    };
    assert_eq!(loc.line, 1);
    assert!(message.contains("no line break"), "{message}");
    assert!(message.contains("stopped reading"), "{message}");
    assert!(reader.next().is_none());
}
