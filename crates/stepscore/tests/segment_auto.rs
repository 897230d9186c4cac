//! The `auto` segmenter: step markers when the response has them, else
//! blank-line paragraphs, else single lines; the choice is reported.

use stepscore::segment::{segment_response, Segmenter};

fn texts(seg: &Segmenter, text: &str) -> Vec<String> {
    seg.segment(text).into_iter().map(|s| s.text).collect()
}

#[test]
fn step_markers_win_when_two_lines_start_with_one() {
    let text = "Step 1: Betty has 100 / 2 = 50 dollars.\nStep 2: Her grandparents give 15 x 2 = 30 dollars.\n\
                Step 3: In total she has 50 + 15 + 30 = 95 dollars.\nStep 4: She needs 100 - 95 = 5 more dollars.";
    assert_eq!(Segmenter::Auto.choose(text).to_string(), "step-marker");
    let steps = texts(&Segmenter::Auto, text);
    assert_eq!(steps.len(), 4);
    assert!(steps[3].starts_with("Step 4:"));
    // Numbered lists count as markers too, across blank lines.
    let list = "1. First, 3 + 4 = 7.\n\n2. Then 7 x 2 = 14.\n\n3. So the answer is 14.";
    assert_eq!(Segmenter::Auto.choose(list).to_string(), "step-marker");
    assert_eq!(texts(&Segmenter::Auto, list).len(), 3);
}

#[test]
fn paragraphs_then_lines() {
    let paras =
        "In April she sold 48 clips.\nThat is a lot.\n\nIn May she sold 24.\n\nThe answer is 72.";
    assert_eq!(Segmenter::Auto.choose(paras).to_string(), "blank-line");
    assert_eq!(
        texts(&Segmenter::Auto, paras),
        texts(&Segmenter::BlankLine, paras)
    );
    let lines = "48 / 2 = 24\n48 + 24 = 72\nThe answer is 72.";
    assert_eq!(Segmenter::Auto.choose(lines).to_string(), "newline");
    assert_eq!(texts(&Segmenter::Auto, lines).len(), 3);
    // One marker alone is not a layout: "Step 1:" once, in paragraphs.
    let one = "Step 1: add 2 and 3.\n\nThat gives 5.";
    assert_eq!(Segmenter::Auto.choose(one).to_string(), "blank-line");
    // A single line stays one step.
    assert_eq!(texts(&Segmenter::Auto, "2 + 2 = 4").len(), 1);
}

#[test]
fn the_choice_is_parsed_reported_and_explicit_segmenters_are_kept() {
    assert!(matches!(
        "auto".parse::<Segmenter>().unwrap(),
        Segmenter::Auto
    ));
    assert!(matches!(Segmenter::default(), Segmenter::Auto));
    let trace = segment_response("q", "a = 1\nb = 2", &Segmenter::Auto);
    assert_eq!(trace.meta_str("segmenter"), Some("newline"));
    assert_eq!(trace.steps.len(), 2);
    let trace = segment_response("q", "a = 1\nb = 2", &Segmenter::BlankLine);
    assert_eq!(trace.meta_str("segmenter"), Some("blank-line"));
    assert_eq!(trace.steps.len(), 1);
    for step in Segmenter::Auto.segment("Step 1: x\nStep 2: y") {
        let span = step.span.unwrap();
        assert_eq!(&"Step 1: x\nStep 2: y"[span.start..span.end], step.text);
    }
}
