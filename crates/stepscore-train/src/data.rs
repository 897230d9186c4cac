//! Step examples from `stepscore features` JSONL: one (feature row, label) per labelled step.
//!
//! Labels are the record's per-row `labels` when it has them (each row's step label; rows
//! without one are dropped), else they follow ProcessBench: with first-error index `L`,
//! steps before `L` are correct (positive, 1), step `L` is wrong (negative, 0), steps after
//! `L` carry no label and are dropped; `L = -1` makes every step correct. The head therefore
//! predicts P(step correct), the value-head convention (a low score flags an error).
//! PRM800K's neutral steps (`metadata.rating` 0, read as correct) are relabelled as
//! [`ReadOptions::neutral`] says.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use stepscore::prm::{DigitConfidence, StepConfidence, StepStat};

use crate::error::{Error, Result};

/// Widest feature row accepted (SmolLM2-135M is 576, 7B backbones ~4k); bounds allocation.
pub const MAX_WIDTH: usize = 1 << 16;

/// A dense, row-major design matrix with one boolean label per row.
#[derive(Debug, Clone, PartialEq)]
pub struct Examples {
    pub width: usize,
    /// `rows * width` values, row-major.
    pub x: Vec<f32>,
    /// `true` = the step is correct.
    pub y: Vec<bool>,
    /// Per labelled trace, its rows (consecutive) and its first-error label
    /// (-1: all correct), for trace-level metrics; empty when unknown.
    pub traces: Vec<(std::ops::Range<usize>, i64)>,
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
        Ok(Examples {
            width,
            x,
            y,
            traces: Vec::new(),
        })
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
struct Record {
    #[serde(default)]
    label: Option<i64>,
    #[serde(default)]
    features: Option<Vec<Vec<f32>>>,
    /// Rows as base64 of little-endian f32 (`--encoding base64`).
    #[serde(default)]
    features_b64: Option<Vec<String>>,
    /// The layers each row holds, joined in this order.
    #[serde(default)]
    layers: Option<Vec<usize>>,
    /// The step of the first row.
    #[serde(default)]
    first_step: usize,
    /// Each row's step label.
    #[serde(default)]
    labels: Option<Vec<Option<bool>>>,
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    confidence: Option<Vec<StepConfidence>>,
    #[serde(default)]
    digit_confidence: Option<Vec<DigitConfidence>>,
}

#[derive(Deserialize)]
struct Metadata {
    /// PRM800K's rating of the labelled step.
    #[serde(default)]
    rating: Option<i64>,
}

/// How PRM800K's neutral steps (rating 0: "reasonable but not clearly
/// helpful", which its reader labels correct) are trained on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Neutral {
    /// Correct, as read: a neutral step is no error.
    #[default]
    Good,
    /// Wrong.
    Bad,
    /// Left out.
    Drop,
}

impl std::str::FromStr for Neutral {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Neutral, String> {
        match s {
            "good" => Ok(Neutral::Good),
            "bad" => Ok(Neutral::Bad),
            "drop" => Ok(Neutral::Drop),
            _ => Err(format!("`{s}`: expected good, bad or drop")),
        }
    }
}

/// How a features file is read besides the row layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The layers every row holds when a record does not say (its `layers`);
    /// `None`: exactly the layout's.
    pub file_layers: Option<Vec<usize>>,
    pub neutral: Neutral,
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

/// Reads every labelled step of the features files at `paths`, in order,
/// as rows laid out by `layout`.
pub fn read_examples(
    paths: &[impl AsRef<Path>],
    layout: &RowLayout,
    options: &ReadOptions,
) -> Result<(Examples, ReadStats)> {
    let mut builder = ExamplesBuilder::new(layout);
    for path in paths {
        let path = path.as_ref();
        read_into(&mut builder, open(path)?, path, layout, options)?;
    }
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.as_ref().display().to_string())
        .collect();
    builder.finish(&names.join(", "))
}

/// The record's rows, holding the layout's layers in its order.
fn rows_of(
    record: &Record,
    layout: &RowLayout,
    options: &ReadOptions,
) -> std::result::Result<Vec<Vec<f32>>, String> {
    let rows = match (&record.features, &record.features_b64) {
        (Some(f), None) => f.clone(),
        (None, Some(b)) => b
            .iter()
            .enumerate()
            .map(|(i, s)| {
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| format!("`features_b64[{i}]`: {e}"))?;
                if bytes.len() % 4 != 0 || bytes.len() > 4 * MAX_WIDTH {
                    return Err(format!(
                        "`features_b64[{i}]` holds {} bytes, not a row of at most {MAX_WIDTH} f32 values",
                        bytes.len()
                    ));
                }
                Ok(bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect())
            })
            .collect::<std::result::Result<_, _>>()?,
        (Some(_), Some(_)) => return Err("both `features` and `features_b64`: keep one".into()),
        (None, None) => return Err("no `features` or `features_b64`".into()),
    };
    let Some(held) = record.layers.as_ref().or(options.file_layers.as_ref()) else {
        return Ok(rows);
    };
    let want: &[usize] = &layout.layers;
    if held.as_slice() == want || (want.is_empty() && held.len() == 1) {
        return Ok(rows);
    }
    let at = want
        .iter()
        .map(|l| {
            held.iter().position(|h| h == l).ok_or_else(|| {
                format!("the rows hold layers {held:?}, not layer {l} the head reads")
            })
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if want.is_empty() {
        return Err(format!(
            "the rows hold layers {held:?}: say which the head reads (--layers)"
        ));
    }
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            if r.len() % held.len() != 0 {
                return Err(format!(
                    "row {i} of width {} does not split into {} layers",
                    r.len(),
                    held.len()
                ));
            }
            let h = r.len() / held.len();
            Ok(at
                .iter()
                .flat_map(|&k| r[k * h..(k + 1) * h].iter().copied())
                .collect())
        })
        .collect()
}

/// [`read_examples`] over any reader; `path` only names the source in errors.
pub fn read_examples_from(
    reader: impl BufRead,
    path: &Path,
    layout: &RowLayout,
    options: &ReadOptions,
) -> Result<(Examples, ReadStats)> {
    let mut builder = ExamplesBuilder::new(layout);
    read_into(&mut builder, reader, path, layout, options)?;
    builder.finish(&path.display().to_string())
}

fn read_into(
    builder: &mut ExamplesBuilder,
    reader: impl BufRead,
    path: &Path,
    layout: &RowLayout,
    options: &ReadOptions,
) -> Result<()> {
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
        let rows = rows_of(&record, layout, options).map_err(parse)?;
        let conf = record.confidence.as_deref();
        let digits = record.digit_confidence.as_deref();
        match &record.labels {
            Some(labels) => {
                let neutral = record.metadata.as_ref().and_then(|m| m.rating) == Some(0);
                let labels: Vec<Option<bool>> = labels
                    .iter()
                    .map(|&l| match (neutral, l, options.neutral) {
                        (true, Some(true), Neutral::Bad) => Some(false),
                        (true, Some(true), Neutral::Drop) => None,
                        _ => l,
                    })
                    .collect();
                // Whole traces also count for trace-level metrics.
                let whole = (record.first_step == 0).then_some(record.label).flatten();
                builder.push_rows(&labels, &rows, conf, digits, whole)
            }
            None => builder.push_trace(record.label, &rows, conf, digits),
        }
        .map_err(parse)?;
    }
    Ok(())
}

/// What a feature row holds: the hidden states of `layers` joined in order
/// (empty: the final one; absent with `stats_only`) joined with `stats`. The
/// head file records it (`stepscore.layer`, `.step_stats`, `.stats_only`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowLayout {
    pub layers: Vec<usize>,
    pub stats: Vec<StepStat>,
    pub stats_only: bool,
}

/// Accumulates labelled steps trace by trace: the one place the ProcessBench
/// labelling convention is applied, for feature files and for features the
/// engine extracts in memory (`stepscore train`).
#[derive(Debug, Default)]
pub struct ExamplesBuilder {
    layout: RowLayout,
    width: Option<usize>,
    x: Vec<f32>,
    y: Vec<bool>,
    traces: Vec<(std::ops::Range<usize>, i64)>,
    stats: ReadStats,
}

impl ExamplesBuilder {
    /// Rows laid out as `layout` says.
    pub fn new(layout: &RowLayout) -> Self {
        ExamplesBuilder {
            layout: layout.clone(),
            ..Default::default()
        }
    }

    /// Adds one trace: its first-error label (`None`: unlabelled, skipped),
    /// one feature row per scored step, and per step its confidence and
    /// digit statistics (needed when the rows join statistics that read
    /// them). The error message names the offending field.
    pub fn push_trace(
        &mut self,
        label: Option<i64>,
        features: &[Vec<f32>],
        confidence: Option<&[StepConfidence]>,
        digits: Option<&[DigitConfidence]>,
    ) -> std::result::Result<(), String> {
        let Some(label) = label else {
            self.stats.traces += 1;
            self.stats.unlabelled += 1;
            return Ok(());
        };
        if label < -1 {
            return Err(format!("`label` {label} is not -1 or a step index"));
        }
        // Truncated traces have fewer feature rows than steps: an error step past the last row
        // leaves only correct steps.
        let labels: Vec<Option<bool>> = (0..features.len() as i64)
            .map(|i| match label {
                l if l < 0 || i < l => Some(true),
                l if i == l => Some(false),
                _ => None,
            })
            .collect();
        self.push_rows(&labels, features, confidence, digits, Some(label))
    }

    /// Adds one record's rows with a label each (`None`: dropped), and per
    /// row its statistics as [`ExamplesBuilder::push_trace`] takes them;
    /// `trace_label` is the first-error label when the rows are a whole
    /// trace (for trace-level metrics).
    pub fn push_rows(
        &mut self,
        labels: &[Option<bool>],
        features: &[Vec<f32>],
        confidence: Option<&[StepConfidence]>,
        digits: Option<&[DigitConfidence]>,
        trace_label: Option<i64>,
    ) -> std::result::Result<(), String> {
        self.stats.traces += 1;
        let steps = features.len();
        if labels.len() != steps {
            return Err(format!(
                "`labels` has {} entries for {steps} feature rows",
                labels.len()
            ));
        }
        if labels.iter().all(Option::is_none) {
            self.stats.unlabelled += 1;
            return Ok(());
        }
        let needs = |digit: bool| {
            self.layout
                .stats
                .iter()
                .any(|s| s.reads_digit_confidence() == digit)
        };
        let per_step = |name: &str, n: Option<usize>, needed: bool| match (needed, n) {
            (false, _) => Ok(()),
            (true, None) => Err(format!("`{name}` missing (extract with --confidence)")),
            (true, Some(n)) if n != steps => {
                Err(format!("`{name}` has {n} entries for {steps} feature rows"))
            }
            (true, Some(_)) => Ok(()),
        };
        per_step("confidence", confidence.map(<[_]>::len), needs(false))?;
        per_step("digit_confidence", digits.map(<[_]>::len), needs(true))?;
        for stat in &self.layout.stats {
            let missing = digits
                .into_iter()
                .flatten()
                .enumerate()
                .find_map(|(i, d)| stat.missing_field(d).map(|f| (i, f)));
            if let Some((i, field)) = missing {
                return Err(format!(
                    "`digit_confidence[{i}].{field}` missing (features written before `{}` existed: extract again)",
                    stat.name()
                ));
            }
        }
        let first_row = self.y.len();
        for (i, (row, label)) in features.iter().zip(labels).enumerate() {
            let Some(label) = *label else {
                self.stats.dropped_steps += 1;
                continue;
            };
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
            if !self.layout.stats_only {
                self.x.extend_from_slice(row);
            }
            // Presence was checked above for every statistic in use.
            let conf = confidence
                .and_then(|c| c.get(i))
                .copied()
                .unwrap_or_default();
            let digit = digits.and_then(|d| d.get(i)).copied().unwrap_or_default();
            for stat in &self.layout.stats {
                let v = stat.value(&conf, &digit);
                if !v.is_finite() {
                    return Err(format!("step {i}'s `{}` is not finite", stat.name()));
                }
                self.x.push(v);
            }
            self.y.push(label);
        }
        if let Some(label) = trace_label {
            if self.y.len() > first_row {
                self.traces.push((first_row..self.y.len(), label));
            }
        }
        Ok(())
    }

    /// The examples gathered so far; `source` names them in the error when
    /// no labelled step was seen.
    pub fn finish(self, source: &str) -> Result<(Examples, ReadStats)> {
        let base = self
            .width
            .ok_or_else(|| Error::Data(format!("{source}: no labelled step features")))?;
        let width = if self.layout.stats_only { 0 } else { base } + self.layout.stats.len();
        let mut examples = Examples::new(width, self.x, self.y)?;
        examples.traces = self.traces;
        Ok((examples, self.stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str, conf: bool) -> Result<(Examples, ReadStats)> {
        let layout = RowLayout {
            stats: if conf {
                StepStat::CONFIDENCE.to_vec()
            } else {
                vec![]
            },
            ..RowLayout::default()
        };
        read_examples_from(
            text.as_bytes(),
            Path::new("t.jsonl"),
            &layout,
            &ReadOptions::default(),
        )
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
        assert_eq!(ex.width, 2 + StepStat::CONFIDENCE.len());
        let ln4 = 4f64.ln() as f32;
        assert_eq!(ex.x, vec![1.0, 2.0, ln4, -0.5, -2.0, 1.5]);
        assert_eq!(ex.y, vec![false]);
    }

    #[test]
    fn digit_statistics_and_stats_only_rows_and_trace_groups() {
        let text = r#"{"label": 1, "features": [[1,2],[3,4],[5,6]], "confidence": [{"tokens": 3, "mean_logprob": -0.5, "min_logprob": -2.0, "mean_entropy": 1.5}, {"tokens": 1, "mean_logprob": -1.0, "min_logprob": -1.0, "mean_entropy": 0.5}, {"tokens": 1, "mean_logprob": -1.0, "min_logprob": -1.0, "mean_entropy": 0.5}], "digit_confidence": [{"tokens": 0, "min_logprob": 0.0, "mean_logprob": 0.0}, {"tokens": 2, "min_logprob": -9.0, "mean_logprob": -4.5}, {"tokens": 2, "min_logprob": -1.0, "mean_logprob": -1.0}]}
{"label": -1, "features": [[7,8]], "confidence": [{"tokens": 3, "mean_logprob": -0.5, "min_logprob": -2.0, "mean_entropy": 1.5}], "digit_confidence": [{"tokens": 0, "min_logprob": 0.0, "mean_logprob": 0.0}]}"#;
        let layout = RowLayout {
            stats: vec![StepStat::DigitMinLogprob, StepStat::MinLogprob],
            stats_only: true,
            layers: Vec::new(),
        };
        let (ex, _) = read_examples_from(
            text.as_bytes(),
            Path::new("t.jsonl"),
            &layout,
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(ex.width, 2);
        assert_eq!(ex.x, vec![0.0, -2.0, -9.0, -1.0, 0.0, -2.0]);
        assert_eq!(ex.y, vec![true, false, true]);
        assert_eq!(ex.traces, vec![(0..2, 1), (2..3, -1)]);
        let with_hidden = RowLayout {
            stats_only: false,
            ..layout
        };
        let (ex, _) = read_examples_from(
            text.as_bytes(),
            Path::new("t.jsonl"),
            &with_hidden,
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(ex.width, 4);
        assert_eq!(&ex.x[..4], &[1.0, 2.0, 0.0, -2.0]);
        // Digit statistics need `digit_confidence`.
        let no_digits = r#"{"label": -1, "features": [[7,8]], "confidence": [{"tokens": 3, "mean_logprob": -0.5, "min_logprob": -2.0, "mean_entropy": 1.5}]}"#;
        let msg = read_examples_from(
            no_digits.as_bytes(),
            Path::new("t.jsonl"),
            &with_hidden,
            &ReadOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("digit_confidence") && msg.contains("t.jsonl:1"),
            "{msg}"
        );
    }

    #[test]
    fn optional_statistics_are_read_or_refused_by_name() {
        let layout = RowLayout {
            stats: vec![StepStat::FalseEquation, StepStat::OperationMinLogprob],
            stats_only: true,
            layers: Vec::new(),
        };
        let row = |digits: &str| {
            format!(
                r#"{{"label": 1, "features": [[0],[0]], "digit_confidence": [{{"tokens": 1, "min_logprob": -1.0, "mean_logprob": -1.0, "operation_min_logprob": -0.5, "false_equations": 0}}, {digits}]}}"#
            )
        };
        let both = row(
            r#"{"tokens": 2, "min_logprob": -3.0, "mean_logprob": -2.0, "operation_min_logprob": -4.0, "false_equations": 2}"#,
        );
        let (ex, _) = read_examples_from(
            both.as_bytes(),
            Path::new("t.jsonl"),
            &layout,
            &ReadOptions::default(),
        )
        .unwrap();
        assert_eq!(ex.x, vec![0.0, -0.5, 1.0, -4.0]);
        // Written before the check existed: refused, naming the step and field.
        let old = row(
            r#"{"tokens": 2, "min_logprob": -3.0, "mean_logprob": -2.0, "operation_min_logprob": -4.0}"#,
        );
        let msg = read_examples_from(
            old.as_bytes(),
            Path::new("t.jsonl"),
            &layout,
            &ReadOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("t.jsonl:1")
                && msg.contains("`digit_confidence[1].false_equations` missing")
                && msg.contains("false_equation"),
            "{msg}"
        );
    }

    /// A base64 row of little-endian f32 values.
    fn b64(v: &[f32]) -> String {
        use base64::Engine as _;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn base64_rows_per_row_labels_and_layer_selection() {
        // Rows of layers [4, 8] (two values each); a PRM800K record whose last
        // step alone is labelled, then a whole first-error trace.
        let text = format!(
            "{}\n{}\n{}\n",
            serde_json::json!({"label": -1, "layers": [4, 8], "first_step": 2,
                "labels": [true], "metadata": {"rating": 0},
                "features_b64": [b64(&[1.0, 2.0, 3.0, 4.0])]}),
            serde_json::json!({"label": 1, "layers": [4, 8], "first_step": 2,
                "labels": [false], "metadata": {"rating": -1},
                "features_b64": [b64(&[5.0, 6.0, 7.0, 8.0])]}),
            serde_json::json!({"label": 0, "layers": [4, 8], "first_step": 0,
                "labels": [false, null], "features_b64": [b64(&[9.0, 9.5, 10.0, 10.5]), b64(&[0.0; 4])]}),
        );
        let layout = |layers: Vec<usize>| RowLayout {
            layers,
            ..RowLayout::default()
        };
        let opts = |neutral| ReadOptions {
            file_layers: None,
            neutral,
        };
        let read = |l: Vec<usize>, n: Neutral| {
            read_examples_from(text.as_bytes(), Path::new("t.jsonl"), &layout(l), &opts(n))
        };
        let (ex, stats) = read(vec![4, 8], Neutral::Good).unwrap();
        assert_eq!(ex.width, 4);
        assert_eq!(ex.y, vec![true, false, false]);
        assert_eq!(stats.dropped_steps, 1);
        // Only the whole trace counts for trace-level metrics.
        assert_eq!(ex.traces, vec![(2..3, 0)]);
        // One layer of the two.
        let (ex, _) = read(vec![8], Neutral::Good).unwrap();
        assert_eq!(ex.x, vec![3.0, 4.0, 7.0, 8.0, 10.0, 10.5]);
        // Neutral steps trained as errors, or left out.
        assert_eq!(
            read(vec![4, 8], Neutral::Bad).unwrap().0.y,
            vec![false, false, false]
        );
        assert_eq!(
            read(vec![4, 8], Neutral::Drop).unwrap().0.y,
            vec![false, false]
        );
        // A layer the rows do not hold is named.
        let msg = read(vec![12], Neutral::Good).unwrap_err().to_string();
        assert!(
            msg.contains("t.jsonl:1") && msg.contains("layer 12"),
            "{msg}"
        );
        // Bad base64 is named by its row.
        let bad = r#"{"label": -1, "features_b64": ["%%%"]}"#;
        let msg = read_examples_from(
            bad.as_bytes(),
            Path::new("t.jsonl"),
            &layout(vec![]),
            &opts(Neutral::Good),
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("features_b64[0]"), "{msg}");
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
