//! Splitting a response text into steps.
//!
//! Every segmenter returns steps whose `span` is a half-open range of UTF-8
//! byte offsets into the segmented text, on char boundaries, with
//! `&text[span.start..span.end] == step.text` exactly. Steps are trimmed of
//! surrounding (Unicode) whitespace and empty steps are dropped, so spans are
//! ordered, non-overlapping and never empty. A piece that is blank in the
//! sense of [`crate::validate::is_blank`] (whitespace or zero-width
//! characters only) is dropped like an empty one.
//!
//! Lines end at `\n`; a `\r` right before it belongs to the terminator, so
//! CRLF text segments the same way as LF text.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use regex::Regex;

use crate::trace::{Span, Step, StepRole, Trace};
use crate::{Error, Result};

/// How a response is cut into steps.
#[derive(Debug, Clone, Default)]
pub enum Segmenter {
    /// The layout the text itself shows ([`Segmenter::choose`]): step
    /// markers when at least two lines start with one, else blank-line
    /// paragraphs when there are at least two, else single lines.
    #[default]
    Auto,
    /// Paragraphs: steps are separated by one or more blank (empty or
    /// whitespace-only) lines. The convention of most PRMs ("\n\n").
    BlankLine,
    /// Every non-blank line is a step.
    Newline,
    /// A step starts at each line that begins with `Step k:` / `Step k.` or a
    /// numbered-list marker `k.` / `k)`, optionally after whitespace and
    /// markdown (`**`, `#`, `>`, `_`). Text before the first marker is a step
    /// of its own; a text without markers is one step.
    StepMarker,
    /// The regex's matches are the delimiters between steps. Parsing refuses
    /// a pattern that can match the empty string; empty matches of one built
    /// directly are not delimiters.
    Regex(Regex),
    /// A step starts at each line that begins with a role prefix (`User:`,
    /// `Assistant:`, `System:`, `Tool:`, `Tool (name):`, `Tool call (name):`,
    /// `Tool result (name):`, case-insensitive). The step's text is what
    /// follows the prefix; it carries the role and tool name. Text before the
    /// first prefix is a step without a role.
    ChatTurns,
}

impl Segmenter {
    /// The concrete segmenter used for `text`: itself, or for
    /// [`Segmenter::Auto`] the one the text's layout calls for. A marker
    /// line counts only at the start of a line, so "Step 1:" inside a
    /// paragraph leaves the text to the paragraph rule.
    pub fn choose(&self, text: &str) -> Segmenter {
        if !matches!(self, Segmenter::Auto) {
            return self.clone();
        }
        let re = step_marker_regex();
        let markers = lines(text)
            .filter(|&(s, e)| text.get(s..e).is_some_and(|l| re.is_match(l)))
            .count();
        if markers >= 2 {
            return Segmenter::StepMarker;
        }
        if Segmenter::BlankLine.segment(text).len() >= 2 {
            Segmenter::BlankLine
        } else {
            Segmenter::Newline
        }
    }

    /// The steps of `text`, with spans into `text`.
    pub fn segment(&self, text: &str) -> Vec<Step> {
        let mut steps = Vec::new();
        match self {
            Segmenter::Auto => return self.choose(text).segment(text),
            Segmenter::BlankLine => {
                // Runs of non-blank lines; `run` is the byte range of the current run.
                let mut run: Option<(usize, usize)> = None;
                for (start, end) in lines(text) {
                    if is_blank(text, start, end) {
                        if let Some((s, e)) = run.take() {
                            push_trimmed(text, s, e, None, None, &mut steps);
                        }
                    } else {
                        run = Some((run.map_or(start, |(s, _)| s), end));
                    }
                }
                if let Some((s, e)) = run {
                    push_trimmed(text, s, e, None, None, &mut steps);
                }
            }
            Segmenter::Newline => {
                for (start, end) in lines(text) {
                    push_trimmed(text, start, end, None, None, &mut steps);
                }
            }
            Segmenter::StepMarker => {
                let re = step_marker_regex();
                let mut start = 0;
                for (ls, le) in lines(text) {
                    let line = text.get(ls..le).unwrap_or("");
                    if ls > start && re.is_match(line) {
                        push_trimmed(text, start, ls, None, None, &mut steps);
                        start = ls;
                    }
                }
                push_trimmed(text, start, text.len(), None, None, &mut steps);
            }
            Segmenter::Regex(re) => {
                let mut start = 0;
                for m in re.find_iter(text).filter(|m| !m.is_empty()) {
                    push_trimmed(text, start, m.start(), None, None, &mut steps);
                    start = m.end();
                }
                push_trimmed(text, start, text.len(), None, None, &mut steps);
            }
            Segmenter::ChatTurns => {
                // The current turn: where its text starts, its role and tool.
                let mut cur: (usize, Option<StepRole>, Option<String>) = (0, None, None);
                for (ls, le) in lines(text) {
                    let line = text.get(ls..le).unwrap_or("");
                    if let Some((prefix_len, role, tool)) = parse_role_prefix(line) {
                        let (s, r, t) =
                            std::mem::replace(&mut cur, (ls + prefix_len, Some(role), tool));
                        push_trimmed(text, s, ls, r, t, &mut steps);
                    }
                }
                let (s, r, t) = cur;
                push_trimmed(text, s, text.len(), r, t, &mut steps);
            }
        }
        steps
    }

    /// The name `FromStr` reads (`regex` without its pattern).
    pub fn name(&self) -> &'static str {
        match self {
            Segmenter::Auto => "auto",
            Segmenter::BlankLine => "blank-line",
            Segmenter::Newline => "newline",
            Segmenter::StepMarker => "step-marker",
            Segmenter::Regex(_) => "regex",
            Segmenter::ChatTurns => "chat",
        }
    }
}

/// Where the first step of `text` is known to be complete under the
/// blank-line rule: the byte offset just past the first blank line (its
/// `\n` included) that follows a non-blank line. `None` while the text could
/// still grow its first step: no such line yet, or the blank line is not
/// terminated (`"  "` may become `"  more"`). Generation stops here
/// (`stop_at_step`) and the stream verifier cuts here, so both end a step
/// exactly where [`Segmenter::BlankLine`] would: its steps of
/// `text[..end]` are the finished ones.
pub fn first_step_end(text: &str) -> Option<usize> {
    let mut seen_text = false;
    let mut pos = 0;
    while let Some(i) = text[pos..].find('\n') {
        let line = &text[pos..pos + i];
        pos += i + 1;
        if line.trim().is_empty() {
            if seen_text {
                return Some(pos);
            }
        } else {
            seen_text = true;
        }
    }
    None
}

/// A trace for `problem` whose steps are `response` cut by `seg`; the
/// response is kept so the step spans have something to point into, and
/// the segmenter used (after [`Segmenter::choose`]) is recorded in the
/// metadata as `segmenter`.
pub fn segment_response(problem: &str, response: &str, seg: &Segmenter) -> Trace {
    let chosen = seg.choose(response);
    let mut trace = Trace {
        problem: problem.to_string(),
        steps: chosen.segment(response),
        response: Some(response.to_string()),
        ..Default::default()
    };
    trace
        .metadata
        .insert("segmenter".into(), chosen.to_string().into());
    trace
}

impl fmt::Display for Segmenter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segmenter::Regex(re) => write!(f, "regex:{}", re.as_str()),
            other => f.write_str(other.name()),
        }
    }
}

impl FromStr for Segmenter {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        if let Some(pattern) = s.strip_prefix("regex:") {
            let re = Regex::new(pattern)
                .map_err(|e| Error::InvalidArgument(format!("segmenter `{s}`: bad regex: {e}")))?;
            // A delimiter that can be empty would cut between every character.
            let min_len = regex_syntax::parse(pattern)
                .ok()
                .and_then(|hir| hir.properties().minimum_len());
            if min_len == Some(0) {
                return Err(Error::InvalidArgument(format!(
                    "segmenter `{s}`: the pattern can match the empty string, so it would split \
                     between every character; make the delimiter match at least one character \
                     (e.g. `x+` instead of `x*`)"
                )));
            }
            return Ok(Segmenter::Regex(re));
        }
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "auto" => Ok(Segmenter::Auto),
            "blank-line" | "blankline" | "paragraph" => Ok(Segmenter::BlankLine),
            "newline" | "line" => Ok(Segmenter::Newline),
            "step-marker" | "stepmarker" | "step" => Ok(Segmenter::StepMarker),
            "chat" | "chat-turns" => Ok(Segmenter::ChatTurns),
            _ => Err(Error::InvalidArgument(format!(
                "unknown segmenter `{s}` (expected one of auto, blank-line, newline, step-marker, regex:<pattern>, chat)"
            ))),
        }
    }
}

/// The byte ranges of the lines of `text`, without their `\n` / `\r\n`
/// terminators. A text ending in `\n` has no empty last line.
fn lines(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= bytes.len() {
            return None;
        }
        let start = pos;
        let (end, next) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(i) => (start + i, start + i + 1),
            None => (bytes.len(), bytes.len()),
        };
        pos = next;
        // `\r` is ASCII, so dropping it keeps `end` on a char boundary.
        let end = if end > start && bytes[end - 1] == b'\r' && next > end {
            end - 1
        } else {
            end
        };
        Some((start, end))
    })
}

fn is_blank(text: &str, start: usize, end: usize) -> bool {
    text.get(start..end).is_none_or(|l| l.trim().is_empty())
}

/// Pushes `text[start..end]`, trimmed, as a step unless it is empty.
fn push_trimmed(
    text: &str,
    start: usize,
    end: usize,
    role: Option<StepRole>,
    tool: Option<String>,
    out: &mut Vec<Step>,
) {
    let Some(piece) = text.get(start..end) else {
        return;
    };
    let trimmed_front = piece.trim_start();
    let s = start + (piece.len() - trimmed_front.len());
    let body = trimmed_front.trim_end();
    if crate::validate::is_blank(body) {
        return;
    }
    out.push(Step {
        text: body.to_string(),
        span: Some(Span::new(s, s + body.len())),
        role,
        tool,
        ..Default::default()
    });
}

/// The length in bytes of the enumeration marker ("Step 2:", "3.", "### Step 1:")
/// that opens `text` (and the whitespace after it), 0 when there is none.
pub(crate) fn step_marker_len(text: &str) -> usize {
    step_marker_regex().find(text).map_or(0, |m| m.end())
}

fn step_marker_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        // `1.` must be followed by whitespace or the line's end so "1.5 cm" is not a marker.
        Regex::new(r"(?i)^[\s*#>_]*(?:step\s*\d+\s*[:.]|\d+[.)](?:\s|$))").expect("static regex")
    })
}

fn role_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)^[ \t]*[*#>_]*[ \t]*(system|user|human|assistant|tool(?:[ \t_-]*(call|result|output|response))?)(?:[ \t]*\(([^()\n]*)\))?[ \t]*(?:\*\*)?:(?:\*\*)?",
        )
        .expect("static regex")
    })
}

/// The role prefix a line starts with: its byte length, role and tool name.
fn parse_role_prefix(line: &str) -> Option<(usize, StepRole, Option<String>)> {
    let caps = role_regex().captures(line)?;
    let whole = caps.get(0)?;
    let word = caps.get(1)?.as_str().to_ascii_lowercase();
    let role = if word.starts_with("system") {
        StepRole::System
    } else if word.starts_with("user") || word.starts_with("human") {
        StepRole::User
    } else if word.starts_with("assistant") {
        StepRole::Assistant
    } else if caps
        .get(2)
        .is_some_and(|k| k.as_str().eq_ignore_ascii_case("call"))
    {
        StepRole::ToolCall
    } else {
        StepRole::ToolResult
    };
    let tool = caps
        .get(3)
        .map(|m| m.as_str().trim().to_string())
        .filter(|t| !t.is_empty());
    Some((whole.end(), role, tool))
}

/// The line prefix [`Segmenter::ChatTurns`] reads back as `role` and `tool`;
/// used to render chat transcripts.
pub(crate) fn role_prefix(role: Option<StepRole>, tool: Option<&str>) -> String {
    let base = match role {
        None => return String::new(),
        Some(StepRole::System) => "System",
        Some(StepRole::User) => "User",
        Some(StepRole::Assistant) => "Assistant",
        Some(StepRole::ToolCall) => "Tool call",
        Some(StepRole::ToolResult) => "Tool result",
    };
    match tool {
        // Parentheses in a name would end the `(name)` group early.
        Some(t) if !t.is_empty() && !t.contains(['(', ')', '\n']) => format!("{base} ({t}): "),
        _ => format!("{base}: "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(seg: &Segmenter, text: &str) -> Vec<String> {
        seg.segment(text).into_iter().map(|s| s.text).collect()
    }

    fn check_spans(text: &str, steps: &[Step]) {
        for s in steps {
            let sp = s.span.unwrap();
            assert_eq!(&text[sp.start..sp.end], s.text);
        }
    }

    #[test]
    fn blank_line_splits_paragraphs() {
        let text = "  First step.\nstill first\n\n \t \r\nSecond\r\n\r\n\r\nThird  \n";
        let steps = Segmenter::BlankLine.segment(text);
        check_spans(text, &steps);
        let t: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(t, ["First step.\nstill first", "Second", "Third"]);
        // "  First" starts at byte 2.
        assert_eq!(steps[0].span, Some(Span::new(2, 25)));
        assert!(Segmenter::BlankLine.segment("\n \n\r\n").is_empty());
        assert!(Segmenter::BlankLine.segment("").is_empty());
    }

    #[test]
    fn first_step_end_is_where_the_blank_line_rule_finishes_a_step() {
        assert_eq!(first_step_end(""), None);
        assert_eq!(first_step_end("\n\n \n"), None);
        assert_eq!(first_step_end("First, 2 + 2 = 4.\n"), None);
        assert_eq!(first_step_end("First.\n  "), None);
        assert_eq!(first_step_end("First.\n\n"), Some(8));
        assert_eq!(first_step_end("\n\nFirst.\n\nSecond"), Some(10));
        assert_eq!(first_step_end("First.\r\n\r\nSecond"), Some(10));
        assert_eq!(first_step_end("First.\n \t\nSecond"), Some(10));
        // Every prefix cut there segments into the whole text's first steps.
        let text = "  a b\nc\n\n\r\n é \n\n\nlast";
        let mut rest = text;
        let mut got = Vec::new();
        while let Some(end) = first_step_end(rest) {
            got.extend(texts(&Segmenter::BlankLine, &rest[..end]));
            rest = &rest[end..];
        }
        got.extend(texts(&Segmenter::BlankLine, rest));
        assert_eq!(got, texts(&Segmenter::BlankLine, text));
    }

    #[test]
    fn newline_gives_each_line() {
        let text = "a\r\n\r\n b é\n\nc";
        assert_eq!(texts(&Segmenter::Newline, text), ["a", "b é", "c"]);
        check_spans(text, &Segmenter::Newline.segment(text));
    }

    #[test]
    fn step_markers() {
        let text = "Let's solve it.\nStep 1: add\nmore of step 1\n\n**Step 2.** multiply\n## step 3: done\n1.5 is not a marker";
        assert_eq!(
            texts(&Segmenter::StepMarker, text),
            [
                "Let's solve it.",
                "Step 1: add\nmore of step 1",
                "**Step 2.** multiply",
                "## step 3: done\n1.5 is not a marker"
            ]
        );
        let list = "1. one\n2) two\n   3. three\n10.\n";
        assert_eq!(
            texts(&Segmenter::StepMarker, list),
            ["1. one", "2) two", "3. three", "10."]
        );
        assert_eq!(
            texts(&Segmenter::StepMarker, "no markers\n\nat all"),
            ["no markers\n\nat all"]
        );
        check_spans(text, &Segmenter::StepMarker.segment(text));
    }

    #[test]
    fn regex_delimiters() {
        let seg: Segmenter = "regex:\\s*;\\s*".parse().unwrap();
        assert_eq!(texts(&seg, "a; b;;c ;"), ["a", "b", "c"]);
        // A pattern that matches the empty string is refused when parsed and,
        // built directly, its empty matches do not split between chars.
        assert!("regex:x*".parse::<Segmenter>().is_err());
        let seg = Segmenter::Regex(Regex::new("x*").unwrap());
        let steps = seg.segment("aé🦀");
        check_spans("aé🦀", &steps);
        assert_eq!(texts(&seg, "aé🦀"), ["aé🦀"]);
    }

    #[test]
    fn chat_turns() {
        let text = "preamble\nUser: What is 2+2?\nAssistant: Let me compute.\nIt is 4.\nTool call (calc): calc(2+2)\n\
                    Tool (calc): 4\ntool result: bare\n**Assistant:** Final: 4\nSystem:\nUSER:   ";
        let steps = Segmenter::ChatTurns.segment(text);
        check_spans(text, &steps);
        let got: Vec<(&str, Option<StepRole>, Option<&str>)> = steps
            .iter()
            .map(|s| (s.text.as_str(), s.role, s.tool.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("preamble", None, None),
                ("What is 2+2?", Some(StepRole::User), None),
                ("Let me compute.\nIt is 4.", Some(StepRole::Assistant), None),
                ("calc(2+2)", Some(StepRole::ToolCall), Some("calc")),
                ("4", Some(StepRole::ToolResult), Some("calc")),
                ("bare", Some(StepRole::ToolResult), None),
                ("Final: 4", Some(StepRole::Assistant), None),
            ]
        );
    }

    #[test]
    fn role_prefix_reads_back() {
        for (role, tool) in [
            (StepRole::System, None),
            (StepRole::User, None),
            (StepRole::Assistant, None),
            (StepRole::ToolCall, Some("search")),
            (StepRole::ToolResult, Some("search")),
            (StepRole::ToolResult, None),
        ] {
            let line = format!("{}body", role_prefix(Some(role), tool));
            let (len, r, t) = parse_role_prefix(&line).unwrap();
            assert_eq!(line[len..].trim_start(), "body");
            assert_eq!(r, role);
            assert_eq!(t.as_deref(), tool);
        }
    }

    #[test]
    fn names_parse_and_display() {
        for name in [
            "auto",
            "blank-line",
            "newline",
            "step-marker",
            "chat",
            "regex:\\n\\n+",
        ] {
            let seg: Segmenter = name.parse().unwrap();
            assert_eq!(seg.to_string(), name);
        }
        assert!(
            matches!("sentences".parse::<Segmenter>(), Err(Error::InvalidArgument(m)) if m.contains("sentences"))
        );
        assert!(
            matches!("regex:(".parse::<Segmenter>(), Err(Error::InvalidArgument(m)) if m.contains("bad regex"))
        );
        for empty in [
            "regex:",
            "regex:x*",
            "regex:a|",
            r"regex:\b",
            "regex:(?m)^",
            "regex:(x?)",
        ] {
            assert!(
                matches!(empty.parse::<Segmenter>(), Err(Error::InvalidArgument(m)) if m.contains("empty string")),
                "{empty}"
            );
        }
        assert!("regex:x+".parse::<Segmenter>().is_ok());
        assert!(matches!(Segmenter::default(), Segmenter::Auto));
    }

    #[test]
    fn empty_matches_are_not_delimiters() {
        // Built directly (not parsed), a pattern matching "" still does not
        // cut between characters.
        let seg = Segmenter::Regex(Regex::new("x*").unwrap());
        let steps = seg.segment("abxxcd");
        let texts: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["ab", "cd"]);
    }

    #[test]
    fn zero_width_pieces_are_dropped_like_empty_ones() {
        let text = "a\n\n\u{200B}\n\n \u{FEFF} \n\nb";
        let steps = Segmenter::BlankLine.segment(text);
        let texts: Vec<&str> = steps.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(texts, ["a", "b"]);
    }

    #[test]
    fn segment_response_keeps_response() {
        let t = segment_response("p", "a\n\nb", &Segmenter::BlankLine);
        assert_eq!(t.response.as_deref(), Some("a\n\nb"));
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.problem, "p");
    }
}
