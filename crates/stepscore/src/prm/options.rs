//! How a scorer is loaded: [`ScorerOptions`], the one options structure of
//! every front end, and the values of its fields.

use serde::{Deserialize, Serialize};

use super::backend::Backend;
use super::family::Family;
use crate::engine::GgmlType;
use crate::{Error, Result};

/// What to do with a trace longer than the token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Truncation {
    /// Refuse it with [`Error::TraceTooLong`].
    #[default]
    Error,
    /// Score only the leading steps that fit; the rest get no score and the
    /// result says how many were dropped.
    DropSteps,
}

impl Truncation {
    pub const ALL: [Truncation; 2] = [Truncation::Error, Truncation::DropSteps];

    pub fn name(self) -> &'static str {
        match self {
            Truncation::Error => "error",
            Truncation::DropSteps => "drop-steps",
        }
    }
}

impl std::str::FromStr for Truncation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Truncation> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "error" => Ok(Truncation::Error),
            "drop-steps" => Ok(Truncation::DropSteps),
            _ => Err(Error::InvalidArgument(format!(
                "unknown truncation `{s}` (expected error or drop-steps)"
            ))),
        }
    }
}

impl TryFrom<String> for Truncation {
    type Error = String;

    /// serde reads it by name; the message names the bad value, serde the option.
    fn try_from(s: String) -> std::result::Result<Truncation, String> {
        s.parse().map_err(|e: Error| e.detail())
    }
}

/// How to load a scorer: the one options structure of every front end (the
/// CLI's flags, Python's keyword arguments and the npm load options are
/// this, by these names, with these defaults; serde reads it with unknown
/// names refused, so each front end's messages name the option).
///
/// | option | default | values |
/// |---|---|---|
/// | `family` | detected from the checkpoint | `score-head`, `value-head`, `math-shepherd`, `rlhflow`, `confidence`, `outcome`, `generative` (never detected: name it) |
/// | `backend` | `auto` | `auto` (a hardware GPU, else the CPU), `gpu` (also `webgpu`), `cpu` |
/// | `threads` | 0: this process's share of the CPUs | CPU engine worker threads |
/// | `max_tokens` | the model's context length | token limit per trace, 1 to the context length |
/// | `truncation` | `error` | `error`, `drop-steps` (score the leading steps that fit) |
/// | `quantize` | none | `q8_0` (`q8`), `q4_0` (`q4`): Hugging Face checkpoints only |
///
/// ```
/// use stepscore::prm::{Backend, ScorerOptions, Truncation};
///
/// let options: ScorerOptions =
///     serde_json::from_str(r#"{"max_tokens": 2048, "truncation": "drop-steps"}"#).unwrap();
/// assert_eq!(options.truncation, Truncation::DropSteps);
/// assert_eq!(options.backend, Backend::Auto);
/// assert_eq!(options.threads, 0); // stepscore::engine::thread_count(0, None)
/// assert!(serde_json::from_str::<ScorerOptions>(r#"{"max_token": 1}"#).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScorerOptions {
    /// The PRM family; detected from the checkpoint when `None`.
    pub family: Option<Family>,
    /// The engine (see [`Backend`]).
    pub backend: Backend,
    /// Worker threads for the CPU engine; 0 means [`crate::engine::thread_count`]'s share
    /// (the CPUs this process may use, capped by `OMP_NUM_THREADS`).
    pub threads: usize,
    /// Token limit per trace, 1 to the model's context length (more is
    /// refused); the context length when `None`.
    #[serde(deserialize_with = "at_least_one")]
    pub max_tokens: Option<usize>,
    pub truncation: Truncation,
    /// Quantize a Hugging Face checkpoint's weights at load (Q8_0 or Q4_0);
    /// refused for GGUF files, which keep the types they were written with.
    #[serde(with = "quantize_name")]
    pub quantize: Option<GgmlType>,
}

/// `max_tokens`: a limit of 0 is refused as it is read.
fn at_least_one<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<usize>, D::Error> {
    match Option::<usize>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(n),
    }
}

/// `quantize` by the names [`parse_quantize`] reads.
mod quantize_name {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::engine::GgmlType;

    pub fn serialize<S: Serializer>(q: &Option<GgmlType>, s: S) -> Result<S::Ok, S::Error> {
        match q {
            Some(t) => s.serialize_str(&t.name().to_ascii_lowercase()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<GgmlType>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|name| {
                super::parse_quantize(&name).map_err(|e| serde::de::Error::custom(e.detail()))
            })
            .transpose()
    }
}

/// Every name [`parse_quantize`] reads.
pub const QUANTIZE_NAMES: [&str; 4] = ["q8_0", "q8", "q4_0", "q4"];

/// The load-time quantization a name asks for ([`ScorerOptions::quantize`]):
/// `q8_0` (or `q8`) and `q4_0` (or `q4`), any case; the one vocabulary of the
/// CLI's `--quantize`, the wasm load options and the Python `quantize=`.
///
/// ```
/// use stepscore::engine::GgmlType;
/// use stepscore::prm::parse_quantize;
///
/// assert_eq!(parse_quantize("Q8").unwrap(), GgmlType::Q8_0);
/// assert_eq!(parse_quantize("q4_0").unwrap(), GgmlType::Q4_0);
/// assert!(parse_quantize("q5_0").is_err());
/// ```
pub fn parse_quantize(name: &str) -> Result<GgmlType> {
    // QUANTIZE_NAMES lists these.
    match name.to_ascii_lowercase().as_str() {
        "q8_0" | "q8" => Ok(GgmlType::Q8_0),
        "q4_0" | "q4" => Ok(GgmlType::Q4_0),
        _ => Err(Error::InvalidArgument(format!(
            "quantize `{name}`: load-time quantization supports q8_0 (q8) and q4_0 (q4)"
        ))),
    }
}
