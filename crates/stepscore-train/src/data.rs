//! Step examples from `stepscore features` JSONL: one (feature row, label) per labelled step.
//!
//! Labels follow ProcessBench: with first-error index `L`, steps before `L` are correct
//! (positive, 1), step `L` is wrong (negative, 0), steps after `L` carry no label and are
//! dropped; `L = -1` makes every step correct. The head therefore predicts P(step correct),
//! the value-head convention (a low score flags an error).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Widest feature row accepted (SmolLM2-135M is 576, 7B backbones ~4k); bounds allocation.
pub const MAX_WIDTH: usize = 1 << 16;
/// Number of confidence statistics appended per step with `with_confidence`.
pub const CONFIDENCE_FEATURES: usize = 4;

/// A dense, row-major design matrix with one boolean label per row.
#[derive(Debug, Clone, PartialEq)]
pub struct Examples {
    pub width: usize,
    /// `rows * width` values, row-major.
    pub x: Vec<f32>,
    /// `true` = the step is correct.
    pub y: Vec<bool>,
}

/// What reading a features file found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadStats {
    pub traces: usize,
    /// Traces without a label (skipped).
    pub unlabelled: usize,
    /// Steps after the first error (unlabelled by the convention, dropped).
    pub dropped_steps: usize,
}

impl Examples {
    pub fn new(width: usize, x: Vec<f32>, y: Vec<bool>) -> Result<Examples> {
        if width == 0 || width > MAX_WIDTH {
            return Err(Error::Data(format!(
                "feature width {width} is outside 1..={MAX_WIDTH}"
            )));
        }
        if x.len() != y.len() * width {
            return Err(Error::Data(format!(
                "{} feature values for {} labels of width {width}",
                x.len(),
                y.len()
            )));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(Error::Data(format!(
                "feature value {} of row {} is not finite",
                i % width,
                i / width
            )));
        }
        Ok(Examples { width, x, y })
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    pub fn row(&self, i: usize) -> Option<&[f32]> {
        self.x.get(i * self.width..(i + 1) * self.width)
    }

    pub fn positives(&self) -> usize {
        self.y.iter().filter(|&&b| b).count()
    }
}

#[derive(Deserialize)]
struct Confidence {
    tokens: f64,
    mean_logprob: f64,
    min_logprob: f64,
    mean_entropy: f64,
}

#[derive(Deserialize)]
struct Record {
    #[serde(default)]
    label: Option<i64>,
    features: Vec<Vec<f32>>,
    #[serde(default)]
    confidence: Option<Vec<Confidence>>,
}

/// Opens `path`, decompressing when it ends in `.gz`.
fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::MultiGzDecoder::new(file))
    } else {
        Box::new(file)
    };
    Ok(Box::new(BufReader::new(reader)))
}

/// Reads every labelled step of the features file at `path`; with `with_confidence` each row
/// gets the step's `[ln(1 + tokens), mean_logprob, min_logprob, mean_entropy]` appended.
pub fn read_examples(path: &Path, with_confidence: bool) -> Result<(Examples, ReadStats)> {
    read_examples_from(open(path)?, path, with_confidence)
}

/// [`read_examples`] over any reader; `path` only names the source in errors.
pub fn read_examples_from(
    reader: impl BufRead,
    path: &Path,
    with_confidence: bool,
) -> Result<(Examples, ReadStats)> {
    let mut builder = ExamplesBuilder::new(with_confidence);
    for (n, line) in reader.lines().enumerate() {
        let parse = |message: String| Error::Parse {
            path: path.to_path_buf(),
            line: n + 1,
            message,
        };
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(&line).map_err(|e| parse(e.to_string()))?;
        let confidence: Option<Vec<[f64; CONFIDENCE_FEATURES]>> = record.confidence.map(|c| {
            c.iter()
                .map(|c| [c.tokens, c.mean_logprob, c.min_logprob, c.mean_entropy])
                .collect()
        });
        builder
            .push_trace(record.label, &record.features, confidence.as_deref())
            .map_err(parse)?;
    }
    builder.finish(&path.display().to_string())
}

/// Accumulates labelled steps trace by trace: the one place the ProcessBench
/// labelling convention is applied, for feature files and for features the
/// engine extracts in memory (`stepscore train`).
#[derive(Debug, Default)]
pub struct ExamplesBuilder {
    with_confidence: bool,
    width: Option<usize>,
    x: Vec<f32>,
    y: Vec<bool>,
    stats: ReadStats,
}

impl ExamplesBuilder {
    pub fn new(with_confidence: bool) -> Self {
        ExamplesBuilder {
            with_confidence,
            ..Default::default()
        }
    }

    /// Adds one trace: its first-error label (`None`: unlabelled, skipped),
    /// one feature row per scored step, and with confidence features
    /// `[tokens, mean_logprob, min_logprob, mean_entropy]` per step. The
    /// error message names the offending field.
    pub fn push_trace(
        &mut self,
        label: Option<i64>,
        features: &[Vec<f32>],
        confidence: Option<&[[f64; CONFIDENCE_FEATURES]]>,
    ) -> std::result::Result<(), String> {
        self.stats.traces += 1;
        let Some(label) = label else {
            self.stats.unlabelled += 1;
            return Ok(());
        };
        let steps = features.len();
        if label < -1 {
            return Err(format!("`label` {label} is not -1 or a step index"));
        }
        // Truncated traces have fewer feature rows than steps: an error step past the last row
        // leaves only correct steps.
        let labelled = usize::try_from(label).map_or(steps, |l| steps.min(l.saturating_add(1)));
        self.stats.dropped_steps += steps - labelled;
        let confidence = match (self.with_confidence, confidence) {
            (false, _) => None,
            (true, None) => return Err("`confidence` missing (extract with --confidence)".into()),
            (true, Some(c)) if c.len() != steps => {
                return Err(format!(
                    "`confidence` has {} entries for {steps} feature rows",
                    c.len()
                ))
            }
            (true, Some(c)) => Some(c),
        };
        for (i, row) in features.iter().take(labelled).enumerate() {
            let w = *self.width.get_or_insert(row.len());
            if row.len() != w {
                return Err(format!(
                    "`features[{i}]` has width {}, earlier rows {w}",
                    row.len()
                ));
            }
            if w == 0 || w > MAX_WIDTH {
                return Err(format!(
                    "`features[{i}]` width {w} is outside 1..={MAX_WIDTH}"
                ));
            }
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                return Err(format!("`features[{i}][{j}]` is not finite"));
            }
            self.x.extend_from_slice(row);
            if let Some(c) = confidence.and_then(|c| c.get(i)) {
                let extra = [c[0].ln_1p(), c[1], c[2], c[3]];
                if extra.iter().any(|v| !v.is_finite()) {
                    return Err(format!("`confidence[{i}]` has a non-finite value"));
                }
                self.x.extend(extra.iter().map(|&v| v as f32));
            }
            self.y.push(label < 0 || (i as i64) < label);
        }
        Ok(())
    }

    /// The examples gathered so far; `source` names them in the error when
    /// no labelled step was seen.
    pub fn finish(self, source: &str) -> Result<(Examples, ReadStats)> {
        let base = self
            .width
            .ok_or_else(|| Error::Data(format!("{source}: no labelled step features")))?;
        let width = base
            + if self.with_confidence {
                CONFIDENCE_FEATURES
            } else {
                0
            };
        Ok((Examples::new(width, self.x, self.y)?, self.stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, conf: bool) -> Result<(Examples, ReadStats)> {
        read_examples_from(text.as_bytes(), Path::new("t.jsonl"), conf)
    }

    #[test]
    fn processbench_convention_drops_steps_after_the_error() {
        let text = r#"{"label": 1, "features": [[1,0],[2,0],[3,0]], "tokens": 5, "truncated_steps": 0}
{"label": -1, "features": [[4,0],[5,0]], "tokens": 5, "truncated_steps": 0}
{"features": [[9,9]], "tokens": 1, "truncated_steps": 0}
"#;
        let (ex, stats) = read(text, false).unwrap();
        assert_eq!(ex.width, 2);
        assert_eq!(ex.y, vec![true, false, true, true]);
        assert_eq!(ex.x, vec![1.0, 0.0, 2.0, 0.0, 4.0, 0.0, 5.0, 0.0]);
        assert_eq!(
            stats,
            ReadStats {
                traces: 3,
                unlabelled: 1,
                dropped_steps: 1
            }
        );
    }

    #[test]
    fn error_step_lost_to_truncation_leaves_correct_steps() {
        let (ex, _) = read(
            r#"{"label": 5, "features": [[1],[2]], "tokens": 5, "truncated_steps": 4}"#,
            false,
        )
        .unwrap();
        assert_eq!(ex.y, vec![true, true]);
    }

    #[test]
    fn confidence_is_appended() {
        let text = r#"{"label": 0, "features": [[1,2]], "confidence": [{"tokens": 3, "mean_logprob": -0.5, "min_logprob": -2.0, "mean_entropy": 1.5}], "tokens": 5, "truncated_steps": 0}"#;
        let (ex, _) = read(text, true).unwrap();
        assert_eq!(ex.width, 2 + CONFIDENCE_FEATURES);
        let ln4 = 4f64.ln() as f32;
        assert_eq!(ex.x, vec![1.0, 2.0, ln4, -0.5, -2.0, 1.5]);
        assert_eq!(ex.y, vec![false]);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let text = "{\"label\": -1, \"features\": [[1,2]], \"tokens\": 1, \"truncated_steps\": 0}\n{\"label\": -1, \"features\": [[1]], \"tokens\": 1, \"truncated_steps\": 0}";
        let msg = read(text, false).unwrap_err().to_string();
        assert!(
            msg.contains("t.jsonl:2") && msg.contains("features[0]"),
            "{msg}"
        );
        let msg = read("{\"label\": -1, \"features\": [[1]]}", true)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("confidence"), "{msg}");
        let msg = read("{\"label\": -3, \"features\": [[1]]}", false)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("label"), "{msg}");
        assert!(read("", false).is_err());
        assert!(read("not json", false)
            .unwrap_err()
            .to_string()
            .contains("t.jsonl:1"));
    }
}
