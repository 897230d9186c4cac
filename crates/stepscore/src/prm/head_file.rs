//! A PRM head shipped as its own safetensors file, next to a backbone that
//! has none: the trained default PRM is SmolLM2's GGUF plus a few kilobytes
//! of `v_head.summary.*` (see stepscore-train), loaded as one model.

use std::io::Read;
use std::path::Path;

use safetensors::tensor::SafeTensors;

use super::family::Family;
use super::head::{HeadInput, MinWith, StepStat};
use crate::engine::open_regular;
use crate::engine::to_f32;
use crate::{Error, Result};

/// A parsed head file: the tensors it holds, by name.
#[derive(Debug, Clone)]
pub struct HeadFile {
    name: String,
    tensors: Vec<(String, Vec<usize>, Vec<f32>)>,
    metadata: Vec<(String, String)>,
}

/// Header metadata: the layer whose hidden state the head reads, or several
/// as a comma-separated ascending list whose states are joined (absent:
/// the final one; see `Transformer::forward_tapped`).
pub(crate) const META_LAYER: &str = "stepscore.layer";
/// Header metadata: `true` when the head's rows are the hidden state joined
/// with the four confidence statistics [`StepStat::CONFIDENCE`] (width h + 4);
/// the older spelling of [`META_STEP_STATS`].
pub(crate) const META_CONFIDENCE_FEATURES: &str = "stepscore.confidence_features";
/// Header metadata: the step statistics joined to the hidden state, in row
/// order, as comma-separated [`StepStat::name`]s.
pub(crate) const META_STEP_STATS: &str = "stepscore.step_stats";
/// Header metadata: `true` when the head reads the step statistics alone
/// (width = their number), not the hidden state.
pub(crate) const META_STATS_ONLY: &str = "stepscore.stats_only";
/// Header metadata: the first-error threshold shipped with the head (a
/// step whose score is below it is flagged), chosen on validation data.
pub(crate) const META_THRESHOLD: &str = "stepscore.threshold";
/// Header metadata: the solution threshold shipped with the head, for use
/// with the model's verdict ([`crate::prm::verdict::solution_score`]: a
/// solution scoring below it is flagged), chosen on model-written
/// validation solutions; any finite number (log-odds units).
pub(crate) const META_SOLUTION_THRESHOLD: &str = "stepscore.solution_threshold";

/// The built-in head a value head is capped by ([`HeadInput::min_with`]).
pub(crate) const META_MIN_WITH: &str = "stepscore.min_with";

/// The power of the head's own probability before the minimum
/// ([`crate::prm::MinWith::power`]), in (0, 1].
pub(crate) const META_MIN_POWER: &str = "stepscore.min_power";

/// The `stepscore.*` keys the engine reads.
const READ_KEYS: [&str; 8] = [
    META_LAYER,
    META_CONFIDENCE_FEATURES,
    META_STEP_STATS,
    META_STATS_ONLY,
    META_THRESHOLD,
    META_SOLUTION_THRESHOLD,
    META_MIN_WITH,
    META_MIN_POWER,
];

/// The `stepscore.*` keys written for the record (stepscore-train,
/// scripts/train/add_check_weight.py), which do not change scores.
const RECORD_KEYS: [&str; 8] = [
    "stepscore.head",
    "stepscore.width",
    "stepscore.seed",
    "stepscore.best_epoch",
    "stepscore.val_step_auroc",
    "stepscore.val_ece_before",
    "stepscore.val_ece_after",
    "stepscore.check_weight",
];

/// Heads are small (a value head is `hidden + 1` floats, a 2-class score
/// head `h² + 3h + 2`); this bound keeps a hostile file from making us
/// convert a backbone-sized blob.
const MAX_HEAD_BYTES: usize = 256 << 20;

/// The error for a head file over [`MAX_HEAD_BYTES`].
fn too_large(name: &str, len: u64) -> Error {
    Error::model(
        name,
        format!(
            "a head file of {len} bytes is larger than the {MAX_HEAD_BYTES}-byte limit for heads"
        ),
    )
}

/// The fast PRM's head (`stepscore-prm-smollm2`, issue 40): a linear value
/// head over SmolLM2-135M-Instruct's layer 12 and nine step statistics,
/// trained on human step labels of other models' solutions
/// (scripts/train/train-smollm2-real-errors-head.sh; docs/TRAINING.md).
pub const SMOLLM2_HEAD_NAME: &str = "smollm2-135m-real-errors-head.safetensors";
/// The browser-size PRM's head (`stepscore-prm-qwen0.5b`, issue 40): a linear
/// value head over Qwen2.5-Coder-0.5B-Instruct's layer 12 and nine step
/// statistics, trained on the same human step labels
/// (scripts/train/train-qwen0.5b-real-errors-head.sh; docs/TRAINING.md).
pub const QWEN05B_HEAD_NAME: &str = "qwen2.5-coder-0.5b-real-errors-head.safetensors";
/// Qwen2.5-Coder-1.5B-Instruct's arithmetic head: a calibrated value head over
/// the step's digit statistics (scripts/train/train-qwen-prm.sh; docs/TRAINING.md),
/// the default PRM's guard.
pub const QWEN15B_ARITHMETIC_HEAD_NAME: &str = "qwen2.5-coder-1.5b-digit-head.safetensors";
/// The default PRM's head (`stepscore-prm-qwen1.5b`, issue 40): a linear value
/// head over Qwen2.5-Coder-1.5B-Instruct's layer 20 and nine step statistics,
/// trained on human step labels of other models' solutions, guarded by the
/// arithmetic head (scripts/train/train-real-errors-head.sh; docs/TRAINING.md).
pub const QWEN15B_HEAD_NAME: &str = "qwen2.5-coder-1.5b-real-errors-head.safetensors";

/// The heads built into the crate (a few hundred bytes to a few KB each), so
/// every build (CLI, wasm, Python) has the catalog's PRMs once the backbone
/// GGUF is fetched.
const EMBEDDED: &[(&str, &[u8])] = &[
    (
        SMOLLM2_HEAD_NAME,
        include_bytes!("../../models/smollm2-135m-real-errors-head.safetensors"),
    ),
    (
        QWEN05B_HEAD_NAME,
        include_bytes!("../../models/qwen2.5-coder-0.5b-real-errors-head.safetensors"),
    ),
    (
        QWEN15B_ARITHMETIC_HEAD_NAME,
        include_bytes!("../../models/qwen2.5-coder-1.5b-digit-head.safetensors"),
    ),
    (
        QWEN15B_HEAD_NAME,
        include_bytes!("../../models/qwen2.5-coder-1.5b-real-errors-head.safetensors"),
    ),
];

impl HeadFile {
    /// A head embedded in the crate, by file name (the heads that catalog
    /// PRM entries name).
    pub fn embedded(name: &str) -> Result<HeadFile> {
        match EMBEDDED.iter().find(|(n, _)| *n == name) {
            Some((n, bytes)) => HeadFile::from_bytes(bytes, n),
            None => {
                let names: Vec<&str> = EMBEDDED.iter().map(|(n, _)| *n).collect();
                Err(Error::InvalidArgument(format!(
                    "no head named `{name}` is built in (built in: {})",
                    names.join(", ")
                )))
            }
        }
    }

    /// Reads and parses the head file at `path`: a regular file, its size
    /// checked by its metadata before a byte is read (issue 44, D4: a 1 GiB
    /// sparse file was read whole, 1.06 GB RSS, before the limit refused it).
    pub fn read(path: &Path) -> Result<HeadFile> {
        let name = path.display().to_string();
        let (file, len) = open_regular(path)?;
        if len > MAX_HEAD_BYTES as u64 {
            return Err(too_large(&name, len));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        // No further than the limit should the file grow meanwhile.
        file.take(MAX_HEAD_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io(name.clone(), e))?;
        HeadFile::from_bytes(&bytes, &name)
    }

    /// Parses safetensors bytes; `name` is used in error messages.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<HeadFile> {
        if bytes.len() > MAX_HEAD_BYTES {
            return Err(too_large(name, bytes.len() as u64));
        }
        let bad = |e: safetensors::SafeTensorError| {
            Error::model(name, format!("not a valid safetensors file: {e}"))
        };
        if let Some(message) = duplicate_in_header(bytes) {
            return Err(Error::model(name, message));
        }
        let st = SafeTensors::deserialize(bytes).map_err(bad)?;
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(bad)?;
        let mut metadata: Vec<(String, String)> = header
            .metadata()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        metadata.sort();
        let mut tensors = Vec::new();
        for (tensor_name, view) in st.tensors() {
            let data = to_f32(view.dtype(), view.data(), name, &tensor_name)?;
            tensors.push((tensor_name, view.shape().to_vec(), data));
        }
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(HeadFile {
            name: name.to_string(),
            tensors,
            metadata,
        })
    }

    /// A header metadata value.
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// What the head reads, from the header metadata ([`META_LAYER`],
    /// [`META_STEP_STATS`] or [`META_CONFIDENCE_FEATURES`], [`META_STATS_ONLY`],
    /// [`META_THRESHOLD`]).
    pub fn input(&self) -> Result<HeadInput> {
        // A key this engine does not know may change what a newer one scores
        // (a guard did): refused, not ignored.
        if let Some((k, _)) = self.metadata.iter().find(|(k, _)| {
            k.starts_with("stepscore.")
                && !READ_KEYS.contains(&k.as_str())
                && !RECORD_KEYS.contains(&k.as_str())
        }) {
            return Err(Error::model(
                &self.name,
                format!("metadata `{k}` is not a key this version of stepscore reads (the head file may need a newer one); the keys it reads: {}", READ_KEYS.join(", ")),
            ));
        }
        let layers = match self.metadata(META_LAYER) {
            None => Vec::new(),
            Some(v) => v
                .split(',')
                .map(|l| l.trim().parse::<usize>())
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|_| {
                    Error::model(
                        &self.name,
                        format!("metadata `{META_LAYER}` is `{v}`, not a layer number or a comma-separated list of them"),
                    )
                })?,
        };
        let four = self.flag(META_CONFIDENCE_FEATURES)?;
        let stats = match self.metadata(META_STEP_STATS) {
            None if four => StepStat::CONFIDENCE.to_vec(),
            None => Vec::new(),
            Some(list) => {
                let stats = parse_stats(list).map_err(|m| {
                    Error::model(&self.name, format!("metadata `{META_STEP_STATS}`: {m}"))
                })?;
                if four && stats != StepStat::CONFIDENCE {
                    return Err(Error::model(
                        &self.name,
                        format!("metadata `{META_CONFIDENCE_FEATURES}` = true names the four confidence statistics, but `{META_STEP_STATS}` says `{list}`"),
                    ));
                }
                stats
            }
        };
        Ok(HeadInput {
            layers,
            stats,
            stats_only: self.flag(META_STATS_ONLY)?,
            threshold: self.threshold()?,
            solution_threshold: self.solution_threshold()?,
            min_with: self.min_with()?,
        })
    }

    /// The guard ([`META_MIN_WITH`] and [`META_MIN_POWER`], both or neither).
    fn min_with(&self) -> Result<Option<MinWith>> {
        match (self.metadata(META_MIN_WITH), self.metadata(META_MIN_POWER)) {
            (None, None) => Ok(None),
            (Some(head), Some(p)) => match p.trim().parse::<f64>() {
                Ok(power) if power > 0.0 && power <= 1.0 => Ok(Some(MinWith {
                    head: head.to_string(),
                    power,
                })),
                _ => Err(Error::model(
                    &self.name,
                    format!("metadata `{META_MIN_POWER}` is `{p}`, not a number in (0, 1]"),
                )),
            },
            (Some(_), None) => Err(Error::model(
                &self.name,
                format!("metadata `{META_MIN_WITH}` needs `{META_MIN_POWER}`"),
            )),
            (None, Some(_)) => Err(Error::model(
                &self.name,
                format!("metadata `{META_MIN_POWER}` needs `{META_MIN_WITH}`"),
            )),
        }
    }

    /// The solution threshold the head ships with
    /// ([`META_SOLUTION_THRESHOLD`]), when it has one: a finite number.
    pub fn solution_threshold(&self) -> Result<Option<f64>> {
        match self.metadata(META_SOLUTION_THRESHOLD) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<f64>() {
                Ok(t) if t.is_finite() => Ok(Some(t)),
                _ => Err(Error::model(
                    &self.name,
                    format!("metadata `{META_SOLUTION_THRESHOLD}` is `{v}`, not a finite number"),
                )),
            },
        }
    }

    /// A `true`/`false` metadata value (absent: false).
    fn flag(&self, key: &str) -> Result<bool> {
        match self.metadata(key) {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(Error::model(
                &self.name,
                format!("metadata `{key}` is `{v}`, not true or false"),
            )),
        }
    }

    /// The first-error threshold the head ships with ([`META_THRESHOLD`]),
    /// when it has one: a probability in (0, 1).
    pub fn threshold(&self) -> Result<Option<f64>> {
        match self.metadata(META_THRESHOLD) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<f64>() {
                Ok(t) if t > 0.0 && t < 1.0 => Ok(Some(t)),
                _ => Err(Error::model(
                    &self.name,
                    format!("metadata `{META_THRESHOLD}` is `{v}`, not a number in (0, 1)"),
                )),
            },
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A tensor as (shape, values), or `None` when the file lacks it.
    pub fn tensor(&self, name: &str) -> Option<(Vec<usize>, Vec<f32>)> {
        self.tensors
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, s, d)| (s.clone(), d.clone()))
    }

    /// The family whose head tensors the file holds.
    pub fn family(&self) -> Result<Family> {
        Family::of_head_file(|t| self.tensor(t).is_some()).ok_or_else(|| {
            let names: Vec<&str> = self.tensors.iter().map(|(n, _, _)| n.as_str()).collect();
            Error::model(
                &self.name,
                format!(
                    "no head tensors: expected {}, found {names:?}",
                    Family::head_file_expectation()
                ),
            )
        })
    }
}

/// A name given twice in a safetensors header: a tensor, or a key of its
/// `__metadata__`. The safetensors crate reads the header into a map, where
/// the last of two entries wins silently (issue 44: a head file naming
/// `v_head.summary.weight` twice was accepted). `None` when every name is
/// unique or the header is not readable JSON (the safetensors parser then
/// says what is wrong).
pub(crate) fn duplicate_in_header(bytes: &[u8]) -> Option<String> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};

    /// A JSON object's keys in order; `__metadata__`'s own keys too.
    #[derive(Default)]
    struct Keys {
        keys: Vec<String>,
        metadata: Vec<Keys>,
    }
    struct KeysVisitor;
    impl<'de> Visitor<'de> for KeysVisitor {
        type Value = Keys;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Keys, A::Error> {
            let mut out = Keys::default();
            while let Some(key) = map.next_key::<String>()? {
                if key == "__metadata__" {
                    out.metadata.push(map.next_value::<Keys>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
                out.keys.push(key);
            }
            Ok(out)
        }
    }
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Keys, D::Error> {
            d.deserialize_map(KeysVisitor)
        }
    }
    fn twice(keys: &[String]) -> Option<&str> {
        let mut seen = std::collections::HashSet::new();
        keys.iter()
            .find(|k| !seen.insert(k.as_str()))
            .map(String::as_str)
    }

    let len = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let header = bytes.get(8..8usize.checked_add(usize::try_from(len).ok()?)?)?;
    let keys = serde_json::Deserializer::from_slice(header)
        .deserialize_map(KeysVisitor)
        .ok()?;
    if let Some(k) = twice(&keys.keys) {
        return Some(if k == "__metadata__" {
            "the header holds `__metadata__` twice".to_string()
        } else {
            format!("the header names tensor `{k}` twice (a duplicate tensor name)")
        });
    }
    keys.metadata
        .iter()
        .find_map(|m| twice(&m.keys))
        .map(|k| format!("the header's `__metadata__` names `{k}` twice"))
}

/// `"a,b,c"` as statistics, each named once.
fn parse_stats(list: &str) -> std::result::Result<Vec<StepStat>, String> {
    let mut out: Vec<StepStat> = Vec::new();
    for name in list.split(',').map(str::trim) {
        let stat: StepStat = name.parse()?;
        if out.contains(&stat) {
            return Err(format!("`{name}` is named twice"));
        }
        out.push(stat);
    }
    Ok(out)
}

impl HeadInput {
    /// The header metadata that says this input and threshold, as
    /// [`HeadFile::input`] reads it back: what a trainer writes (the one
    /// spelling of the `stepscore.*` keys the engine reads).
    pub fn metadata(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !self.stats.is_empty() {
            let names: Vec<&str> = self.stats.iter().map(|s| s.name()).collect();
            out.push((META_STEP_STATS.to_string(), names.join(",")));
        }
        if self.stats_only {
            out.push((META_STATS_ONLY.to_string(), "true".to_string()));
        }
        if !self.layers.is_empty() {
            let list: Vec<String> = self.layers.iter().map(usize::to_string).collect();
            out.push((META_LAYER.to_string(), list.join(",")));
        }
        if let Some(t) = self.threshold {
            out.push((META_THRESHOLD.to_string(), format!("{t:.6}")));
        }
        if let Some(t) = self.solution_threshold {
            out.push((META_SOLUTION_THRESHOLD.to_string(), format!("{t:.6}")));
        }
        if let Some(m) = &self.min_with {
            out.push((META_MIN_WITH.to_string(), m.head.clone()));
            out.push((META_MIN_POWER.to_string(), m.power.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prm::head::V_HEAD_WEIGHT;
    use safetensors::tensor::{serialize, Dtype, TensorView};

    fn file(tensors: &[(&str, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let bytes: Vec<Vec<u8>> = tensors
            .iter()
            .map(|(_, _, d)| d.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let views: Vec<(&str, TensorView<'_>)> = tensors
            .iter()
            .zip(&bytes)
            .map(|((n, s, _), b)| (*n, TensorView::new(Dtype::F32, s.clone(), b).unwrap()))
            .collect();
        serialize(views, None).unwrap()
    }

    #[test]
    fn reads_a_value_head_and_names_its_family() {
        let bytes = file(&[
            (V_HEAD_WEIGHT, vec![1, 3], vec![0.5, -1.0, 2.0]),
            ("v_head.summary.bias", vec![1], vec![0.25]),
        ]);
        let head = HeadFile::from_bytes(&bytes, "head.safetensors").unwrap();
        assert_eq!(head.family().unwrap(), Family::ValueHead);
        assert_eq!(
            head.tensor(V_HEAD_WEIGHT),
            Some((vec![1, 3], vec![0.5, -1.0, 2.0]))
        );
        assert_eq!(head.tensor("missing"), None);
    }

    #[test]
    fn a_file_without_head_tensors_is_named_in_the_error() {
        let bytes = file(&[("model.norm.weight", vec![2], vec![1.0, 1.0])]);
        let err = HeadFile::from_bytes(&bytes, "wrong.safetensors")
            .unwrap()
            .family()
            .unwrap_err()
            .to_string();
        assert!(err.contains("wrong.safetensors"), "{err}");
        assert!(err.contains("model.norm.weight"), "{err}");
    }

    fn with_metadata(meta: &[(&str, &str)]) -> HeadFile {
        let bytes = file(&[(V_HEAD_WEIGHT, vec![1, 2], vec![1.0, 2.0])]);
        let mut head = HeadFile::from_bytes(&bytes, "h.safetensors").unwrap();
        head.metadata = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        head
    }

    #[test]
    fn step_statistics_are_read_by_name_and_the_old_flag_still_means_four() {
        let old = with_metadata(&[(META_CONFIDENCE_FEATURES, "true")]);
        assert_eq!(old.input().unwrap().stats, StepStat::CONFIDENCE);
        let named = with_metadata(&[(META_STEP_STATS, "digit_min_logprob, mean_logprob")]);
        assert_eq!(
            named.input().unwrap().stats,
            [StepStat::DigitMinLogprob, StepStat::MeanLogprob]
        );
        assert!(with_metadata(&[]).input().unwrap().stats.is_empty());
        for (meta, needle) in [
            (vec![(META_STEP_STATS, "mean_logprob,bogus")], "bogus"),
            (vec![(META_STEP_STATS, "min_logprob,min_logprob")], "twice"),
            (
                vec![
                    (META_CONFIDENCE_FEATURES, "true"),
                    (META_STEP_STATS, "min_logprob"),
                ],
                "four",
            ),
        ] {
            let err = with_metadata(&meta).input().unwrap_err().to_string();
            assert!(
                err.contains(needle) && err.contains("h.safetensors"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_shipped_threshold_must_be_a_probability() {
        assert_eq!(with_metadata(&[]).threshold().unwrap(), None);
        assert_eq!(
            with_metadata(&[(META_THRESHOLD, "0.42")])
                .threshold()
                .unwrap(),
            Some(0.42)
        );
        for bad in ["0", "1", "-0.1", "nan", "x"] {
            let err = with_metadata(&[(META_THRESHOLD, bad)])
                .threshold()
                .unwrap_err();
            assert!(err.to_string().contains(META_THRESHOLD), "{err}");
        }
    }

    /// The default PRM's head ships its step threshold, the solution
    /// threshold fitted with the verdict (scripts/train/add_solution_threshold.py)
    /// and its guard (scripts/eval/guard_choice.py).
    #[test]
    fn the_default_head_ships_both_thresholds() {
        let head = HeadFile::embedded(QWEN15B_HEAD_NAME).unwrap();
        let input = head.input().unwrap();
        assert_eq!(input.threshold, Some(0.75));
        let t = input.solution_threshold.expect("a solution threshold");
        assert!((t - 3.873555).abs() < 1e-9, "{t}");
        let guard = input.min_with.expect("the arithmetic head as its guard");
        assert_eq!(guard.head, QWEN15B_ARITHMETIC_HEAD_NAME);
        assert!((guard.power - 0.281585).abs() < 1e-9, "{}", guard.power);
    }

    #[test]
    fn the_solution_threshold_must_be_finite() {
        assert_eq!(with_metadata(&[]).solution_threshold().unwrap(), None);
        assert_eq!(
            with_metadata(&[(META_SOLUTION_THRESHOLD, "-1.5")])
                .solution_threshold()
                .unwrap(),
            Some(-1.5)
        );
        for bad in ["inf", "nan", "x", ""] {
            let err = with_metadata(&[(META_SOLUTION_THRESHOLD, bad)])
                .solution_threshold()
                .unwrap_err();
            assert!(err.to_string().contains(META_SOLUTION_THRESHOLD), "{err}");
        }
    }

    /// Issue 44 (minor): a tensor named twice in the header was accepted
    /// (the last entry won); a metadata key named twice as well.
    #[test]
    fn a_duplicate_tensor_name_is_refused_naming_file_and_tensor() {
        let entry = r#""v_head.summary.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}"#;
        let build = |header: String| {
            let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
            bytes.extend_from_slice(header.as_bytes());
            bytes.extend_from_slice(&[0u8; 8]);
            bytes
        };
        let twice = build(format!("{{{entry},{entry}}}"));
        match HeadFile::from_bytes(&twice, "dup.safetensors") {
            Err(Error::Model { file, message }) => {
                assert_eq!(file, "dup.safetensors");
                assert!(
                    message.contains("tensor `v_head.summary.weight` twice"),
                    "{message}"
                );
            }
            other => panic!("a duplicate tensor name was accepted: {other:?}"),
        }
        let meta = build(format!(
            r#"{{"__metadata__":{{"stepscore.threshold":"0.3","stepscore.threshold":"0.9"}},{entry}}}"#
        ));
        match HeadFile::from_bytes(&meta, "meta.safetensors") {
            Err(Error::Model { file, message }) => {
                assert_eq!(file, "meta.safetensors");
                assert!(message.contains("`stepscore.threshold` twice"), "{message}");
            }
            other => panic!("a duplicate metadata key was accepted: {other:?}"),
        }
        // Each name once: read as before.
        let once = build(format!("{{{entry}}}"));
        assert!(HeadFile::from_bytes(&once, "once.safetensors").is_ok());
    }

    #[test]
    fn truncated_and_garbage_bytes_are_model_errors() {
        let bytes = file(&[(V_HEAD_WEIGHT, vec![1, 2], vec![1.0, 2.0])]);
        for bad in [
            &bytes[..bytes.len() - 3],
            &bytes[..5],
            b"not safetensors at all".as_slice(),
        ] {
            match HeadFile::from_bytes(bad, "h.safetensors") {
                Err(Error::Model { file, .. }) => assert_eq!(file, "h.safetensors"),
                other => panic!("expected a model error, got {other:?}"),
            }
        }
    }

    /// What a trainer writes through `HeadInput::metadata` reads back the same.
    #[test]
    fn head_input_metadata_round_trips() {
        let input = HeadInput {
            layers: vec![7],
            stats: vec![StepStat::DigitMinLogprob, StepStat::PlusMinusMinLogprob],
            stats_only: true,
            threshold: Some(0.602855),
            solution_threshold: Some(4.25),
            min_with: Some(MinWith {
                head: QWEN15B_ARITHMETIC_HEAD_NAME.to_string(),
                power: 0.25,
            }),
        };
        let w = vec![0.5f32, -0.25];
        let bytes: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        let views = vec![(
            "v_head.summary.weight",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 2], &bytes)
                .unwrap(),
        )];
        let file =
            safetensors::serialize(views, Some(input.metadata().into_iter().collect())).unwrap();
        let head = HeadFile::from_bytes(&file, "round-trip.safetensors").unwrap();
        assert_eq!(head.input().unwrap(), input);
        assert!(HeadInput::default().metadata().is_empty());
    }

    /// An unknown `stepscore.*` key is refused, naming it; other keys are not ours.
    #[test]
    fn an_unknown_stepscore_key_is_refused_not_ignored() {
        let e = with_metadata(&[("stepscore.min_whith", "x")])
            .input()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("metadata `stepscore.min_whith` is not a key"),
            "{e}"
        );
        assert!(with_metadata(&[("format", "pt"), ("stepscore.seed", "7")])
            .input()
            .is_ok());
    }

    /// A guard needs both keys and a power in (0, 1].
    #[test]
    fn a_guard_names_its_head_and_a_power_in_zero_to_one() {
        let ok = with_metadata(&[
            (META_MIN_WITH, QWEN15B_ARITHMETIC_HEAD_NAME),
            (META_MIN_POWER, "0.3"),
        ]);
        assert_eq!(
            ok.input().unwrap().min_with,
            Some(MinWith {
                head: QWEN15B_ARITHMETIC_HEAD_NAME.into(),
                power: 0.3
            })
        );
        for (meta, says) in [
            (
                vec![(META_MIN_WITH, QWEN15B_ARITHMETIC_HEAD_NAME)],
                "needs `stepscore.min_power`",
            ),
            (vec![(META_MIN_POWER, "0.3")], "needs `stepscore.min_with`"),
            (
                vec![
                    (META_MIN_WITH, QWEN15B_ARITHMETIC_HEAD_NAME),
                    (META_MIN_POWER, "0"),
                ],
                "not a number in (0, 1]",
            ),
            (
                vec![
                    (META_MIN_WITH, QWEN15B_ARITHMETIC_HEAD_NAME),
                    (META_MIN_POWER, "nan"),
                ],
                "not a number in (0, 1]",
            ),
        ] {
            let e = with_metadata(&meta).input().unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
    }
}
