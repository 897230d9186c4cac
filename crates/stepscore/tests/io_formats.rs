//! Every row format and input layout on small hand-written examples.

use std::io::Cursor;

use stepscore::io::{open_traces, write_jsonl, InputFormat, ReadOptions, TraceReader};
use stepscore::segment::{segment_response, Segmenter};
use stepscore::{Span, StepRole, Trace};

fn read(input: &str, opts: ReadOptions) -> Vec<Trace> {
    TraceReader::new(Cursor::new(input.as_bytes().to_vec()), opts)
        .map(|r| r.unwrap_or_else(|e| panic!("unexpected error: {e}")))
        .collect()
}

fn read_auto(input: &str) -> Vec<Trace> {
    read(input, ReadOptions::default())
}

fn texts(t: &Trace) -> Vec<&str> {
    t.steps.iter().map(|s| s.text.as_str()).collect()
}

fn check_spans(t: &Trace) {
    let response = t.response.as_deref().expect("response");
    for s in &t.steps {
        let sp = s.span.expect("span");
        assert_eq!(&response[sp.start..sp.end], s.text);
    }
}

#[test]
fn processbench_rows() {
    let line = r#"{"id":"gsm8k-0","generator":"Qwen","problem":"1+1?","steps":["a","b","c"],"label":1,"final_answer_correct":false,"gold":"2"}"#;
    let t = &read_auto(line)[0];
    assert_eq!(t.id.as_deref(), Some("gsm8k-0"));
    assert_eq!(t.problem, "1+1?");
    assert_eq!(texts(t), ["a", "b", "c"]);
    // label 1: step 0 correct, step 1 the first error, step 2 unknown.
    assert_eq!(t.labels(), vec![Some(true), Some(false), None]);
    assert_eq!(t.first_error_label(), Some(1));
    assert_eq!(t.reference_answer.as_deref(), Some("2"));
    assert_eq!(t.meta_str("generator"), Some("Qwen"));
    assert_eq!(
        t.metadata.get("final_answer_correct"),
        Some(&serde_json::Value::Bool(false))
    );

    let all_ok = r#"{"problem":"p","steps":["a","b"],"label":-1,"scores":[0.9,null]}"#;
    let t = &read(
        all_ok,
        ReadOptions {
            format: InputFormat::ProcessBench,
            ..Default::default()
        },
    )[0];
    assert_eq!(t.first_error_label(), Some(-1));
    assert_eq!(t.steps[0].score, Some(0.9));
    assert_eq!(t.steps[1].score, None);
    // Unlabelled ProcessBench-shaped rows are fine for scoring.
    let t = &read_auto(r#"{"problem":"p","steps":["a"]}"#)[0];
    assert_eq!(t.first_error_label(), None);
}

#[test]
fn trl_rows() {
    let line = r#"{"prompt":"Q","completions":["s1","s2"],"labels":[true,false],"split":"test","answer":7}"#;
    let t = &read_auto(line)[0];
    assert_eq!(t.problem, "Q");
    assert_eq!(texts(t), ["s1", "s2"]);
    assert_eq!(t.labels(), vec![Some(true), Some(false)]);
    assert_eq!(t.final_answer.as_deref(), Some("7"));
    assert_eq!(t.meta_str("split"), Some("test"));
}

#[test]
fn raw_rows_are_segmented_with_spans() {
    let line =
        r#"{"question":"Q?","response":"Step 1: x\nStep 2: y","group":"g1","scores":[0.5,0.25]}"#;
    let opts = ReadOptions {
        segmenter: Segmenter::StepMarker,
        ..Default::default()
    };
    let t = &read(line, opts)[0];
    assert_eq!(t.problem, "Q?");
    assert_eq!(texts(t), ["Step 1: x", "Step 2: y"]);
    assert_eq!(t.steps[1].span, Some(Span::new(10, 19)));
    assert_eq!(t.scores(), Some(vec![0.5, 0.25]));
    assert_eq!(t.meta_str("group"), Some("g1"));
    check_spans(t);
    // Default segmenter: blank lines.
    let t = &read_auto(r#"{"prompt":"Q","response":"a\r\n\r\nb"}"#)[0];
    assert_eq!(texts(t), ["a", "b"]);
}

#[test]
fn native_rows_round_trip_through_write_jsonl() {
    let mut t = segment_response(
        "What is 6*7?",
        "Six sevens.\n\nThat is 42.",
        &Segmenter::BlankLine,
    );
    t.id = Some("n1".into());
    t.steps[0].score = Some(0.75);
    t.steps[1].score = Some(f64::NAN); // written as null, read back as no score
    t.steps[1].label = Some(true);
    t.reference_answer = Some("42".into());
    t.metadata.insert("split".into(), "dev".into());
    let mut out = Vec::new();
    write_jsonl(&mut out, &t).unwrap();
    write_jsonl(&mut out, &t).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 2);
    let back = read_auto(&text);
    assert_eq!(back.len(), 2);
    let mut expected = t.clone();
    expected.steps[1].score = None;
    assert_eq!(back[0], expected);
    check_spans(&back[0]);
}

#[test]
fn chat_rows_become_agent_steps() {
    let line = r#"{"id":7,"messages":[
        {"role":"system","content":"Be careful."},
        {"role":"user","content":[{"type":"text","text":"Find the weather"},{"type":"image_url","image_url":{"url":"x"}}]},
        {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Oslo\"}"}}]},
        {"role":"tool","tool_call_id":"c1","content":"  -3C, snow  "},
        {"role":"assistant","content":"It is -3C in Oslo."},
        {"role":"user","content":"Thanks!"},
        {"role":"assistant","content":""}
    ],"reference_answer":"-3C"}"#
        .replace('\n', "");
    let t = &read_auto(&line)[0];
    assert_eq!(t.id.as_deref(), Some("7"));
    assert_eq!(t.problem, "Be careful.\n\nFind the weather");
    let got: Vec<(&str, Option<StepRole>, Option<&str>)> = t
        .steps
        .iter()
        .map(|s| (s.text.as_str(), s.role, s.tool.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (
                r#"weather({"city":"Oslo"})"#,
                Some(StepRole::ToolCall),
                Some("weather")
            ),
            ("-3C, snow", Some(StepRole::ToolResult), Some("weather")),
            ("It is -3C in Oslo.", Some(StepRole::Assistant), None),
            ("Thanks!", Some(StepRole::User), None),
        ]
    );
    assert_eq!(t.reference_answer.as_deref(), Some("-3C"));
    check_spans(t);
    // The transcript segments back into the same steps with the chat segmenter.
    let again = Segmenter::ChatTurns.segment(t.response.as_deref().unwrap());
    assert_eq!(again, t.steps);
}

#[test]
fn chat_tool_name_from_message_and_legacy_function_call() {
    let line = r#"{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"Thinking.","function_call":{"name":"calc","arguments":{"x":1}}},{"role":"function","name":"calc","content":"1"}]}"#;
    let t = &read(
        line,
        ReadOptions {
            format: InputFormat::Chat,
            ..Default::default()
        },
    )[0];
    assert_eq!(texts(t), ["Thinking.", r#"calc({"x":1})"#, "1"]);
    assert_eq!(t.steps[2].tool.as_deref(), Some("calc"));
    assert_eq!(t.steps[2].role, Some(StepRole::ToolResult));
    check_spans(t);
}

#[test]
fn json_array_documents() {
    let input = "\u{feff}\n  [\n {\"problem\":\"p\",\"steps\":[\"a\"],\"label\":0},\n {\"prompt\":\"q\",\"completions\":[\"b\"],\"labels\":[true]}\n]\n";
    let ts = read_auto(input);
    assert_eq!(ts.len(), 2);
    assert_eq!(ts[0].first_error_label(), Some(0));
    assert_eq!(ts[1].problem, "q");
    assert!(read_auto("[]").is_empty());
    assert!(read_auto("").is_empty());
    assert!(read_auto(" \n\r\n ").is_empty());
}

#[test]
fn pretty_printed_objects() {
    let one = "{\n  \"problem\": \"p\",\n  \"steps\": [\n    \"a\",\n    \"b\"\n  ],\n  \"label\": -1\n}\n";
    let ts = read_auto(one);
    assert_eq!(ts.len(), 1);
    assert_eq!(texts(&ts[0]), ["a", "b"]);
    // Several pretty objects in a row work too.
    let two = format!("{one}{one}");
    assert_eq!(read_auto(&two).len(), 2);
}

#[test]
fn prm800k_rows_label_their_last_step() {
    // Three alternatives rated after one prefix, as PRM800K lays them out.
    let input = concat!(
        r#"{"problem":"7.8 min in s?","prefix":["7.8 min is 7 min and 0.8 min."],"step":"60 * 7 = 420.","rating":1,"preferred":true,"human_written":false,"is_solution":false,"answer":null}"#,
        "\n",
        r#"{"problem":"7.8 min in s?","prefix":["7.8 min is 7 min and 0.8 min."],"step":"60 * 7 = 430.","rating":-1,"preferred":false}"#,
        "\n",
        r#"{"problem":"7.8 min in s?","prefix":["7.8 min is 7 min and 0.8 min."],"step":"Let's convert.","rating":0}"#,
        "\n",
        r#"{"problem":"7.8 min in s?","prefix":[],"step":"Written by a person.","rating":null}"#,
    );
    let ts = read_auto(input);
    assert_eq!(
        texts(&ts[0]),
        ["7.8 min is 7 min and 0.8 min.", "60 * 7 = 420."]
    );
    assert_eq!(ts[0].labels(), vec![None, Some(true)]);
    assert_eq!(ts[1].labels(), vec![None, Some(false)]);
    assert_eq!(ts[1].first_error_label(), Some(1));
    // Neutral is no error; the rating stays for trainers that differ.
    assert_eq!(ts[2].labels(), vec![None, Some(true)]);
    assert_eq!(ts[2].metadata.get("rating"), Some(&serde_json::json!(0)));
    assert_eq!(
        ts[0].metadata.get("preferred"),
        Some(&serde_json::json!(true))
    );
    // A labeller's own step is not model text: unlabelled.
    assert_eq!(ts[3].labels(), vec![None]);

    for (row, field) in [
        (
            r#"{"problem":"p","prefix":[],"step":"s","rating":2}"#,
            "rating",
        ),
        (r#"{"problem":"p","prefix":[],"step":"s"}"#, "rating"),
        (
            r#"{"problem":"p","prefix":"a","step":"s","rating":1}"#,
            "prefix",
        ),
        (
            r#"{"problem":"p","prefix":[1],"step":"s","rating":1}"#,
            "prefix[0]",
        ),
    ] {
        let err = TraceReader::new(Cursor::new(row.as_bytes().to_vec()), ReadOptions::default())
            .next()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{row}: {err}");
    }
}

#[test]
fn jsonl_with_crlf_and_blank_lines() {
    let input = "\r\n{\"problem\":\"p\",\"steps\":[\"a\"]}\r\n\r\n   \n{\"problem\":\"q\",\"steps\":[\"b\"]}";
    let ts = read_auto(input);
    assert_eq!(
        ts.iter().map(|t| t.problem.as_str()).collect::<Vec<_>>(),
        ["p", "q"]
    );
}

#[test]
fn format_names() {
    for f in InputFormat::ALL {
        assert_eq!(f.to_string().parse::<InputFormat>().unwrap(), f);
    }
    assert_eq!(
        "process-bench".parse::<InputFormat>().unwrap(),
        InputFormat::ProcessBench
    );
    let err = "csv".parse::<InputFormat>().unwrap_err().to_string();
    assert!(err.contains("csv") && err.contains("processbench"), "{err}");
}

#[test]
fn open_traces_names_the_file() {
    let dir = std::env::temp_dir().join(format!("stepscore-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.jsonl");
    std::fs::write(&path, "{\"problem\":\"p\",\"steps\":[\"a\"]}\nnot json\n").unwrap();
    let results: Vec<_> = open_traces(&path, ReadOptions::default())
        .unwrap()
        .collect();
    assert!(results[0].is_ok());
    let err = results[1].as_ref().unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{} line 2", path.display())),
        "{err}"
    );
    let missing = open_traces(&dir.join("nope.jsonl"), ReadOptions::default());
    match missing {
        Err(e) => assert!(e.to_string().contains("nope.jsonl"), "{e}"),
        Ok(_) => panic!("opened a missing file"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
