//! The trace data model: a problem, the steps of one response to it, and what
//! is known about each step (its span in the source text, label, score).

use serde::{Deserialize, Serialize};

/// A half-open range `[start, end)` of UTF-8 byte offsets into a trace's
/// `response`. Both ends always fall on char boundaries, so
/// `&response[span.start..span.end]` is the step's exact text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Who produced a step, for agent trajectories read from chat messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepRole {
    System,
    User,
    Assistant,
    ToolCall,
    ToolResult,
}

impl StepRole {
    pub fn as_str(&self) -> &'static str {
        match self {
            StepRole::System => "system",
            StepRole::User => "user",
            StepRole::Assistant => "assistant",
            StepRole::ToolCall => "tool_call",
            StepRole::ToolResult => "tool_result",
        }
    }
}

/// One step of a response.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Step {
    pub text: String,
    /// Where the step sits in the trace's `response`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<Span>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<StepRole>,
    /// The tool's name for tool calls and tool results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Ground truth: `Some(true)` correct, `Some(false)` wrong, `None` unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<bool>,
    /// A PRM's score for this step, usually a probability of being correct.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

impl Step {
    pub fn new(text: impl Into<String>) -> Self {
        Step {
            text: text.into(),
            ..Default::default()
        }
    }
}

/// A problem and one response to it, split into steps.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Trace {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub problem: String,
    /// The original response text the step spans point into, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    pub steps: Vec<Step>,
    /// The response's own final answer, when the source states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_answer: Option<String>,
    /// The gold answer to the problem, when known (for selection metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_answer: Option<String>,
    /// Anything else the source row carried, kept verbatim.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl Trace {
    /// The steps' scores, or `None` if any step lacks one.
    pub fn scores(&self) -> Option<Vec<f64>> {
        self.steps.iter().map(|s| s.score).collect()
    }

    /// The steps' labels, `None` for steps whose label is unknown.
    pub fn labels(&self) -> Vec<Option<bool>> {
        self.steps.iter().map(|s| s.label).collect()
    }

    /// ProcessBench's label: the index of the first wrong step, `Some(-1)` when
    /// every labelled step is correct, `None` when no step carries a label.
    pub fn first_error_label(&self) -> Option<i64> {
        if self.steps.iter().all(|s| s.label.is_none()) {
            return None;
        }
        Some(
            self.steps
                .iter()
                .position(|s| s.label == Some(false))
                .map_or(-1, |i| i as i64),
        )
    }

    /// Sets labels the ProcessBench way: steps before `first_error` correct,
    /// the step at it wrong, steps after it unknown; `-1` marks all correct.
    pub fn set_first_error_label(&mut self, first_error: i64) {
        for (i, step) in self.steps.iter_mut().enumerate() {
            let i = i as i64;
            step.label = if first_error < 0 || i < first_error {
                Some(true)
            } else if i == first_error {
                Some(false)
            } else {
                None
            };
        }
    }

    /// The answer this response arrives at: the stated final answer, else the
    /// one extracted from the last steps.
    pub fn answer(&self) -> Option<String> {
        if let Some(a) = &self.final_answer {
            return Some(a.clone());
        }
        match &self.response {
            Some(r) => crate::answer::extract_answer(r),
            None => {
                let joined: Vec<&str> = self.steps.iter().map(|s| s.text.as_str()).collect();
                crate::answer::extract_answer(&joined.join("\n\n"))
            }
        }
    }

    /// A metadata string field such as `split` or `group`, if present.
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).and_then(|v| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(n: usize) -> Trace {
        Trace {
            problem: "p".into(),
            steps: (0..n).map(|i| Step::new(format!("s{i}"))).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn first_error_label_round_trips() {
        let mut t = trace(4);
        assert_eq!(t.first_error_label(), None);
        t.set_first_error_label(2);
        assert_eq!(t.labels(), vec![Some(true), Some(true), Some(false), None]);
        assert_eq!(t.first_error_label(), Some(2));
        t.set_first_error_label(-1);
        assert_eq!(t.first_error_label(), Some(-1));
    }

    #[test]
    fn scores_need_every_step() {
        let mut t = trace(2);
        t.steps[0].score = Some(0.5);
        assert_eq!(t.scores(), None);
        t.steps[1].score = Some(0.25);
        assert_eq!(t.scores(), Some(vec![0.5, 0.25]));
    }
}
