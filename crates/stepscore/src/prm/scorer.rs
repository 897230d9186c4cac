//! The `Scorer`: load a PRM checkpoint once, then score traces.
//!
//! A scorer holds one engine ([`Engine`], chosen at load or by
//! [`Scorer::set_backend_async`]); every forward pass goes through it, so
//! nothing here knows which engine runs.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::backend::{Backend, BackendReport};
use super::blocking::ASYNC_ONLY;
use super::chat::ChatFormat;
use super::engine::{block_on, Engine, EngineCache};
use super::family::Family;
use super::family::{encode, Protocol};
use super::features::{self, FeatureCache, FeatureJob, FeatureOptions, StepFeatures};
use super::head::{Head, HeadInput, HeadOutput, TensorLookup, TokensRead};
use super::head_file::HeadFile;
use super::template::Encoded;
use super::token_classes::OperatorRows;
use crate::error::{Error, Result};
use crate::format::storage::{read_regular, SIDE_FILE_LIMIT};
use crate::format::ModelBytes;
use crate::ggml::GgmlType;
use crate::model::{GgufModel, HfCheckpoint, Hidden, Transformer};
use crate::tokenizer::Tokenizer;

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
/// assert_eq!(options.threads, 0); // stepscore::par::thread_count(0, None)
/// assert!(serde_json::from_str::<ScorerOptions>(r#"{"max_token": 1}"#).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScorerOptions {
    /// The PRM family; detected from the checkpoint when `None`.
    pub family: Option<Family>,
    /// The engine (see [`Backend`]).
    pub backend: Backend,
    /// Worker threads for the CPU engine; 0 means [`crate::par::thread_count`]'s share
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

    use crate::ggml::GgmlType;

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
/// use stepscore::ggml::GgmlType;
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

/// One token of a step: `start..end` bytes of the step's text, its
/// log-probability given everything before it, and the entropy (nats) of
/// the distribution that predicted it: a token far less likely than that
/// distribution's typical one (`-logprob` well above `entropy`) is one the
/// model was confident against.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub start: usize,
    pub end: usize,
    pub logprob: f64,
    pub entropy: f64,
}

impl TokenLogprob {
    /// A step's tokens' `(log-prob, entropy)` paired with their spans
    /// (`Encoded.step_spans`).
    pub(crate) fn with_spans(stats: &[(f64, f64)], spans: &[(usize, usize)]) -> Vec<TokenLogprob> {
        stats
            .iter()
            .zip(spans)
            .map(|(&(logprob, entropy), &(start, end))| TokenLogprob {
                start,
                end,
                logprob,
                entropy,
            })
            .collect()
    }
}

/// A loaded PRM: decoder, tokenizer, prompt protocol and head.
#[derive(Debug)]
pub struct Scorer {
    tokenizer: Tokenizer,
    protocol: Protocol,
    /// The operator tokens' vocabulary rows, built at the first feature
    /// extraction with confidence statistics.
    operators: std::sync::OnceLock<OperatorRows>,
    max_tokens: usize,
    truncation: Truncation,
    /// The engine, with the decoder's weights and the head it runs.
    engine: Engine,
    /// False when the blocks after the head's layer were dropped at load
    /// (the model can then not generate).
    all_layers: bool,
}

/// Where a scorer's PRM head comes from: the one argument of every
/// constructor ([`Scorer::open_with`], [`Scorer::from_gguf`],
/// [`Scorer::from_hf`]) and of `catalog::open`.
#[derive(Debug, Clone, Default)]
pub enum HeadSource {
    /// The checkpoint's own head tensors (`v_head.*`, `score.*`), for the
    /// families that read one; `catalog::open` puts a catalog PRM's built-in
    /// head file here instead.
    #[default]
    Checkpoint,
    /// A head in its own safetensors file (e.g. from `stepscore train`),
    /// applied to the backbone; the family comes from its tensors unless
    /// the options name one.
    File(PathBuf),
    /// A head file already read (bytes from a browser, or one embedded in
    /// the crate: [`HeadFile::embedded`]).
    Loaded(HeadFile),
    /// No head: a backbone for feature extraction, which cannot score.
    Backbone,
}

impl HeadSource {
    /// Whether head tensors load, and the head file (read now for `File`).
    fn read(&self) -> Result<(HeadMode, Option<Cow<'_, HeadFile>>)> {
        Ok(match self {
            HeadSource::Checkpoint => (HeadMode::Load, None),
            HeadSource::File(path) => (HeadMode::Load, Some(Cow::Owned(HeadFile::read(path)?))),
            HeadSource::Loaded(file) => (HeadMode::Load, Some(Cow::Borrowed(file))),
            HeadSource::Backbone => (HeadMode::Skip, None),
        })
    }
}

/// Whether loading reads the family's head tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadMode {
    Load,
    /// Backbone only (feature extraction): no head tensors needed, and the
    /// vocabulary projection is kept when the checkpoint has one.
    Skip,
}

/// The parts of `tokenizer_config.json` the prompt layout uses.
#[derive(Debug, Default, Deserialize)]
struct TokenizerConfig {
    #[serde(default)]
    bos_token: Option<TokenText>,
    #[serde(default)]
    eos_token: Option<TokenText>,
    #[serde(default)]
    chat_template: Option<ChatTemplate>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum TokenText {
    Plain(String),
    Added { content: String },
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ChatTemplate {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Debug, Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

impl TokenizerConfig {
    fn parse(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes)
            .map_err(|e| Error::Tokenizer(format!("tokenizer_config.json: {e}")))
    }

    fn bos(&self) -> Option<String> {
        self.bos_token.as_ref().map(TokenText::text)
    }

    /// The chat template (the one named "default" in a list, else the
    /// first), with the special-token texts it may write.
    fn chat_format(&self, eos_fallback: Option<String>) -> Result<Option<ChatFormat>> {
        let source = match &self.chat_template {
            None => return Ok(None),
            Some(ChatTemplate::One(t)) => t,
            Some(ChatTemplate::Named(list)) => {
                match list.iter().find(|t| t.name == "default").or(list.first()) {
                    Some(t) => &t.template,
                    None => return Ok(None),
                }
            }
        };
        let eos = self
            .eos_token
            .as_ref()
            .map(TokenText::text)
            .or(eos_fallback);
        chat_format(source, self.bos(), eos, "tokenizer_config.json").map(Some)
    }
}

impl TokenText {
    fn text(&self) -> String {
        match self {
            TokenText::Plain(s) | TokenText::Added { content: s } => s.clone(),
        }
    }
}

/// `source`, the chat template stored in `file`, ready to render; a
/// template that does not parse is an error of that file.
fn chat_format(
    source: &str,
    bos: Option<String>,
    eos: Option<String>,
    file: &str,
) -> Result<ChatFormat> {
    ChatFormat::from_template(source, bos, eos).map_err(|e| Error::Model {
        file: file.to_string(),
        message: match e {
            Error::Tokenizer(m) => m,
            other => other.to_string(),
        },
    })
}

impl Scorer {
    /// Loads a model: a Hugging Face checkpoint directory (config.json,
    /// safetensors, single or sharded, tokenizer.json and, when present,
    /// tokenizer_config.json) or a GGUF file (decoder, tokenizer and chat
    /// template from its metadata). The family's head tensors come from the
    /// same checkpoint; the family is detected unless `options.family` says.
    ///
    /// ```
    /// use stepscore::prm::{Family, Scorer, ScorerOptions};
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
    /// let scorer = Scorer::open(dir, &ScorerOptions::default())?;
    /// assert_eq!(scorer.family(), Family::ValueHead);
    /// let scores = scorer.score_steps("What is 2 + 3?", &["2 + 3 = 5.", "The answer is 5."])?;
    /// assert_eq!(scores.step_scores.len(), 2);
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer> {
        Self::open_with(path, &HeadSource::Checkpoint, options)
    }

    /// [`Scorer::open`] with the head from `head` ([`HeadSource`]): the
    /// checkpoint's own, a head file (e.g. from `stepscore train`, or one
    /// embedded in the crate), or none (a backbone for feature extraction:
    /// the family gives the prompt layout and marker positions, no head
    /// tensors are read, and the vocabulary projection is kept when present
    /// so confidence statistics can be computed; such a scorer cannot score).
    ///
    /// ```
    /// use stepscore::prm::{HeadSource, Scorer, ScorerOptions};
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
    /// let backbone = Scorer::open_with(dir, &HeadSource::Backbone, &ScorerOptions::default())?;
    /// let features = backbone.step_features("What is 2 + 3?", &["2 + 3 = 5."])?;
    /// assert_eq!(features.hidden.len(), 1);
    /// assert_eq!(features.hidden[0].len(), features.width);
    /// assert!(backbone.score_steps("What is 2 + 3?", &["2 + 3 = 5."]).is_err());
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    ///
    /// ```no_run
    /// use stepscore::prm::{HeadFile, HeadSource, Scorer, ScorerOptions};
    ///
    /// let head = HeadSource::Loaded(HeadFile::embedded("smollm2-135m-real-errors-head.safetensors")?);
    /// let scorer = Scorer::open_with("SmolLM2-135M-Instruct.Q4_1.gguf", &head, &ScorerOptions::default())?;
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn open_with(
        path: impl AsRef<Path>,
        head: &HeadSource,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        let path = path.as_ref();
        let (mode, external) = head.read()?;
        if path.is_dir() {
            Self::hf_dir(path, options, mode, external.as_deref())
        } else {
            Self::gguf(parse_gguf_file(path)?, options, mode, external.as_deref())
        }
    }

    /// A parsed GGUF model with the head from `head`: the path for bytes
    /// that arrive without a file system (the wasm bindings).
    ///
    /// ```no_run
    /// use stepscore::format::ModelBytes;
    /// use stepscore::model::GgufModel;
    /// use stepscore::prm::{HeadFile, HeadSource, Scorer, ScorerOptions};
    ///
    /// let bytes = std::fs::read("SmolLM2-135M-Instruct.Q4_1.gguf").unwrap();
    /// let gguf = GgufModel::parse(ModelBytes::from_vec(bytes), "SmolLM2-135M-Instruct.Q4_1.gguf")?;
    /// let head = HeadSource::Loaded(HeadFile::embedded("smollm2-135m-real-errors-head.safetensors")?);
    /// let scorer = Scorer::from_gguf(gguf, &head, &ScorerOptions::default())?;
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn from_gguf(
        gguf: GgufModel,
        head: &HeadSource,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        let (mode, external) = head.read()?;
        Self::gguf(gguf, options, mode, external.as_deref())
    }

    /// An opened Hugging Face checkpoint and its tokenizer files as bytes
    /// (the wasm path: everything arrives as bytes).
    ///
    /// ```
    /// use stepscore::model::HfCheckpoint;
    /// use stepscore::prm::{HeadSource, Scorer, ScorerOptions};
    ///
    /// let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
    ///     .join("../../tests/fixtures/prm/skywork-prm-tiny");
    /// let checkpoint = HfCheckpoint::open_dir(&dir)?;
    /// let tokenizer = std::fs::read(dir.join("tokenizer.json")).unwrap();
    /// let config = std::fs::read(dir.join("tokenizer_config.json")).unwrap();
    /// let options = ScorerOptions::default();
    /// let head = HeadSource::Checkpoint;
    /// let scorer = Scorer::from_hf(&checkpoint, &tokenizer, Some(&config), &head, &options)?;
    /// assert_eq!(scorer.score_steps("1 + 1?", &["2."])?.step_scores.len(), 1);
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn from_hf(
        checkpoint: &HfCheckpoint,
        tokenizer_json: &[u8],
        tokenizer_config: Option<&[u8]>,
        head: &HeadSource,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        let (mode, external) = head.read()?;
        Self::hf_with(
            checkpoint,
            tokenizer_json,
            tokenizer_config,
            options,
            mode,
            external.as_deref(),
        )
    }

    fn hf_dir(
        dir: &Path,
        options: &ScorerOptions,
        mode: HeadMode,
        external: Option<&HeadFile>,
    ) -> Result<Scorer> {
        let read = |name: &str| read_regular(&dir.join(name), SIDE_FILE_LIMIT);
        let checkpoint = HfCheckpoint::open_dir(dir)?;
        let tokenizer_json = read("tokenizer.json")?;
        let tokenizer_config = dir
            .join("tokenizer_config.json")
            .exists()
            .then(|| read("tokenizer_config.json"))
            .transpose()?;
        Self::hf_with(
            &checkpoint,
            &tokenizer_json,
            tokenizer_config.as_deref(),
            options,
            mode,
            external,
        )
    }

    fn hf_with(
        checkpoint: &HfCheckpoint,
        tokenizer_json: &[u8],
        tokenizer_config: Option<&[u8]>,
        options: &ScorerOptions,
        mode: HeadMode,
        external: Option<&HeadFile>,
    ) -> Result<Scorer> {
        let tok_config = tokenizer_config
            .map(TokenizerConfig::parse)
            .transpose()?
            .unwrap_or_default();
        let mut tokenizer = Tokenizer::from_json_bytes(tokenizer_json)?;
        let bos_text = tok_config.bos();
        if let Some(bos) = bos_text.as_deref().and_then(|b| tokenizer.token_to_id(b)) {
            let eos = tokenizer.eos_id();
            tokenizer = tokenizer.with_bos_eos(Some(bos), eos)?;
        }
        let family = choose_family(
            options,
            external,
            &checkpoint.config().architectures,
            |t| checkpoint.has_tensor(t),
            &tokenizer,
        )?;
        let eos_text = tokenizer.eos_id().and_then(|id| tokenizer.id_to_token(id));
        let chat = tok_config.chat_format(eos_text)?;
        let protocol = Protocol::new(family, &tokenizer, chat, bos_text)?;
        let input = head_input(external)?;
        let mut model = checkpoint.transformer()?;
        let needs_lm = family.needs_lm_head() || !input.stats.is_empty();
        if mode == HeadMode::Load && needs_lm && !model.has_lm_head() {
            return Err(Error::model(
                "lm_head.weight",
                format!("the {family} head needs the vocabulary projection"),
            ));
        }
        if mode == HeadMode::Load && !needs_lm {
            model.drop_lm_head();
        }
        if let Some(ty) = options.quantize {
            model.quantize_weights(ty)?;
        }
        model.set_threads(crate::par::thread_count(options.threads, None).threads);
        let head = load_head(
            mode,
            &protocol,
            &model,
            &tokenizer,
            &input,
            external,
            &|name| {
                if !checkpoint.has_tensor(name) {
                    return Ok(None);
                }
                let t = checkpoint.tensor_f32(name)?;
                Ok(Some((t.shape, t.data)))
            },
        )?;
        Self::assemble(model, tokenizer, protocol, head, options)
    }

    fn gguf(
        gguf: GgufModel,
        options: &ScorerOptions,
        mode: HeadMode,
        external: Option<&HeadFile>,
    ) -> Result<Scorer> {
        if let Some(ty) = options.quantize {
            return Err(Error::InvalidArgument(format!(
                "quantize {}: load-time quantization applies to Hugging Face checkpoints; \
                 a GGUF file keeps the tensor types it was written with",
                ty.name()
            )));
        }
        let tokenizer = Tokenizer::from_gguf(&gguf.file)?;
        let bos_text = tokenizer.bos_id().and_then(|id| tokenizer.id_to_token(id));
        let eos_text = tokenizer.eos_id().and_then(|id| tokenizer.id_to_token(id));
        let chat = gguf
            .file
            .opt_str("tokenizer.chat_template")?
            .map(|t| chat_format(t, bos_text.clone(), eos_text, &gguf.file.file_name))
            .transpose()?;
        let family = choose_family(
            options,
            external,
            &gguf.config()?.architectures,
            |t| gguf.file.tensor(t).is_some(),
            &tokenizer,
        )?;
        let protocol = Protocol::new(family, &tokenizer, chat, bos_text)?;
        let input = head_input(external)?;
        let mut model = gguf.transformer()?;
        model.set_threads(crate::par::thread_count(options.threads, None).threads);
        let head = load_head(
            mode,
            &protocol,
            &model,
            &tokenizer,
            &input,
            external,
            &|name| gguf.tensor_f32(name),
        )?;
        Self::assemble(model, tokenizer, protocol, head, options)
    }

    fn assemble(
        mut model: Transformer,
        tokenizer: Tokenizer,
        protocol: Protocol,
        mut head: Option<Head>,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        // A head that reads layer L and nothing of the LM's outputs never
        // needs the blocks after L: they are dropped, never run.
        let layers = model.config().n_layers;
        if let Some(h) = head.as_mut() {
            if let (Some(&l), false) = (h.layers().last(), h.needs_token_stats()) {
                model.truncate_layers(l);
                h.read_final_states();
            }
        }
        let all_layers = model.config().n_layers == layers;
        let context = model.config().max_position_embeddings;
        let max_tokens = match options.max_tokens {
            None => context,
            Some(0) => {
                return Err(Error::InvalidArgument(
                    "max_tokens must be at least 1".into(),
                ))
            }
            Some(m) if m > context => {
                return Err(Error::InvalidArgument(format!(
                    "max_tokens {m} is over the model's context of {context} tokens"
                )))
            }
            Some(m) => m,
        };
        let engine = Engine::new(options.backend, model, head)?;
        Ok(Scorer {
            tokenizer,
            protocol,
            operators: std::sync::OnceLock::new(),
            max_tokens,
            truncation: options.truncation,
            engine,
            all_layers,
        })
    }

    pub fn family(&self) -> Family {
        self.protocol.family
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The decoder's weights on the host (the CPU engine's, and what a GPU
    /// engine uploads).
    pub fn model(&self) -> &Transformer {
        self.engine.model()
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The first-error threshold the model's head was shipped with (chosen
    /// on validation data with the head); `None` when it has none.
    pub fn threshold(&self) -> Option<f64> {
        self.engine.head().and_then(Head::threshold)
    }

    /// Which of a step's tokens the head's score reads through the LM's
    /// token statistics ([`TokensRead::None`] without a head).
    pub fn tokens_read(&self) -> TokensRead {
        self.engine
            .head()
            .map_or(TokensRead::None, Head::tokens_read)
    }

    /// The step threshold in force: `given` (a caller's explicit choice),
    /// else the head's shipped [`Scorer::threshold`], else 0.5 (ProcessBench's
    /// convention for an uncalibrated PRM). The one rule of every front end
    /// that flags a first error (`score`, `serve`), so a server and the CLI
    /// never flag the same steps differently.
    pub fn threshold_in_force(&self, given: Option<f64>) -> f64 {
        given
            .or(self.threshold())
            .unwrap_or(crate::aggregate::DEFAULT_THRESHOLD)
    }

    /// The solution threshold the model's head was shipped with, for use with
    /// its verdict (see [`crate::prm::verdict::solution_score`]).
    pub fn solution_threshold(&self) -> Option<f64> {
        self.engine.head().and_then(Head::solution_threshold)
    }

    /// Which engine this scorer runs on, and why.
    pub fn backend_report(&self) -> &BackendReport {
        self.engine.report()
    }

    /// Moves this scorer to `backend`, setting up the device and uploading
    /// the model when it is a GPU one: how a browser gets the WebGPU
    /// engine (natively, [`ScorerOptions::backend`] does the same at load).
    /// Sessions must be started after this.
    pub async fn set_backend_async(&mut self, backend: Backend) -> Result<()> {
        self.engine.set_backend_async(backend).await
    }

    /// Device buffers of the GPU engine (None on the CPU engine, or before
    /// a device exists): the leak tests' counter.
    #[cfg(feature = "gpu")]
    pub fn gpu_pool_stats(&self) -> Option<crate::gpu::PoolStats> {
        self.engine.pool_stats()
    }

    /// Destroys the GPU device as a driver reset would (tests of recovery):
    /// the next call fails with [`Error::Gpu`], the one after recreates the
    /// device and re-uploads the model.
    /// Test support (feature `testing`).
    #[cfg(all(feature = "gpu", any(test, feature = "testing")))]
    pub fn simulate_device_loss(&self) {
        self.engine.destroy_device();
    }

    /// The head; an error for a backbone opened without one.
    pub(crate) fn head(&self) -> Result<&Head> {
        self.engine.head().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "this {} model was opened as a backbone for feature extraction, without a head: it cannot score",
                self.protocol.family
            ))
        })
    }

    /// Fails when results can only be awaited (the WebGPU engine in a
    /// browser): the blocking methods call this before starting any work.
    pub(super) fn blocking_allowed(&self) -> Result<()> {
        if self.engine.async_only() {
            return Err(Error::InvalidArgument(ASYNC_ONLY.into()));
        }
        Ok(())
    }

    /// The token ids and marker positions the scorer would run for a trace.
    pub fn encode(&self, problem: &str, steps: &[&str]) -> Result<Encoded> {
        let enc = encode(&self.protocol, &self.tokenizer, problem, steps)?;
        self.check_vocabulary(&enc)?;
        Ok(enc)
    }

    /// The tokenizer gave an id the model has no embedding for: the
    /// tokenizer and the model do not match (a model error), whatever the
    /// text was.
    pub(super) fn check_vocabulary(&self, enc: &Encoded) -> Result<()> {
        let vocab = self.model().config().vocab_size;
        if let Some((i, &t)) = enc
            .tokens
            .iter()
            .enumerate()
            .find(|(_, &t)| t as usize >= vocab)
        {
            return Err(Error::model(
                "tokenizer",
                format!(
                    "token id {t} (position {i}) is out of range for the model's vocabulary of \
                     {vocab}: the tokenizer does not match the model's embeddings"
                ),
            ));
        }
        Ok(())
    }

    /// The hidden state at each step's marker.
    pub fn step_features(&self, problem: &str, steps: &[&str]) -> Result<StepFeatures> {
        self.step_features_with(problem, steps, &FeatureOptions::default())
    }

    /// [`Scorer::step_features`] plus the confidence statistics of each
    /// step's tokens; the model must have its vocabulary projection.
    pub fn step_features_with_confidence(
        &self,
        problem: &str,
        steps: &[&str],
    ) -> Result<StepFeatures> {
        let options = FeatureOptions {
            confidence: true,
            ..FeatureOptions::default()
        };
        self.step_features_with(problem, steps, &options)
    }

    /// The features `options` asks for: the hidden states of chosen layers
    /// at each step's marker, with or without the confidence statistics
    /// (`features.rs`), from the scoring path's own encode + forward.
    pub fn step_features_with(
        &self,
        problem: &str,
        steps: &[&str],
        options: &FeatureOptions,
    ) -> Result<StepFeatures> {
        let mut cache = self.feature_cache();
        self.step_features_cached(&mut cache, problem, steps, 0, options)
    }

    /// A cache for [`Scorer::step_features_cached`].
    pub fn feature_cache(&self) -> FeatureCache {
        FeatureCache::new(self.new_cache())
    }

    /// The features of `steps[from..]` (as [`Scorer::step_features_with`]
    /// gives them, bit for bit), running only the tokens `cache` does not
    /// already hold: traces that share a prefix (alternatives of one step
    /// after the same earlier steps) pay for that prefix once. Afterwards
    /// the cache holds this trace's tokens.
    pub fn step_features_cached(
        &self,
        cache: &mut FeatureCache,
        problem: &str,
        steps: &[&str],
        from: usize,
        options: &FeatureOptions,
    ) -> Result<StepFeatures> {
        let mut job = [FeatureJob {
            cache,
            problem,
            steps,
            from,
        }];
        self.step_features_batch(&mut job, options)?
            .pop()
            .unwrap_or_else(|| {
                Err(Error::Internal(
                    "a feature batch of one gave nothing".into(),
                ))
            })
    }

    /// [`Scorer::step_features_cached`] of several traces, each on its own
    /// cache, with their new tokens in one forward pass on the CPU engine
    /// (each weight matrix unpacked once for all of them): entry i is what
    /// `step_features_cached` gives job i alone, bit for bit. A job that
    /// cannot run (too long, a bad step) gets its error in its entry (its
    /// cache may be cut back to a prefix it shares, still consistent); the
    /// outer error is the forward pass's.
    pub fn step_features_batch(
        &self,
        jobs: &mut [FeatureJob<'_>],
        options: &FeatureOptions,
    ) -> Result<Vec<Result<StepFeatures>>> {
        let taps = features::forward_taps(self.model(), options)?;
        self.blocking_allowed()?;
        let operators = if options.confidence {
            if self.operators.get().is_none() {
                // Another thread may have set it meanwhile: the same table.
                let _ = self
                    .operators
                    .set(OperatorRows::load(self.model(), &self.tokenizer)?);
            }
            self.operators.get()
        } else {
            None
        };
        let mut prepared: Vec<Result<(Encoded, usize, usize)>> = Vec::with_capacity(jobs.len());
        for job in jobs.iter_mut() {
            prepared.push((|| {
                let (enc, truncated_steps) = self.encode_fitted(job.problem, job.steps)?;
                let from = job.from.min(enc.markers.len());
                let valid = block_on(self.cache_ready(&mut job.cache.cache))?;
                let keep = job.cache.reuse(&enc.tokens, enc.first_needed(from), valid);
                Ok((enc.tail(from, keep), from, truncated_steps))
            })());
        }
        let mut tokens = Vec::new();
        let mut caches = Vec::new();
        for (job, p) in jobs.iter_mut().zip(&prepared) {
            if let Ok((local, _, _)) = p {
                tokens.push(local.tokens.as_slice());
                caches.push(&mut job.cache.cache);
            }
        }
        let mut hidden =
            block_on(self.engine.forward_batch(&tokens, &mut caches, &taps))?.into_iter();
        drop(caches);
        let mut out = Vec::with_capacity(jobs.len());
        for (job, p) in jobs.iter_mut().zip(prepared) {
            out.push(p.and_then(|(local, from, truncated_steps)| {
                let h = hidden
                    .next()
                    .ok_or_else(|| Error::Internal("a feature batch lost a part".into()))?;
                job.cache.tokens.extend_from_slice(&local.tokens);
                features::collect(
                    self.model(),
                    operators,
                    &local,
                    &h,
                    from,
                    truncated_steps,
                    options,
                )
            }));
        }
        Ok(out)
    }

    /// Runs the decoder over `tokens` on this scorer's engine and returns
    /// the final-normed hidden states on the host: from position 0 without
    /// a cache, else after what `cache` holds (made by
    /// [`Scorer::new_cache`]), whose keys and values they extend. No
    /// template, no head: for benchmarks and tools that time or inspect the
    /// engine itself.
    ///
    /// ```
    /// use stepscore::prm::{Scorer, ScorerOptions};
    ///
    /// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
    /// let scorer = Scorer::open(dir, &ScorerOptions::default())?;
    /// let tokens = scorer.encode("What is 2 + 3?", &["2 + 3 = 5."])?.tokens;
    /// let whole = scorer.forward(&tokens, None)?;
    /// let mut cache = scorer.new_cache();
    /// scorer.forward(&tokens[..4], Some(&mut cache))?;
    /// let rest = scorer.forward(&tokens[4..], Some(&mut cache))?;
    /// assert_eq!(rest.n_tokens, tokens.len() - 4);
    /// assert_eq!(cache.len(), tokens.len());
    /// assert_eq!(whole.n_tokens, tokens.len());
    /// # Ok::<(), stepscore::Error>(())
    /// ```
    pub fn forward(&self, tokens: &[u32], cache: Option<&mut EngineCache>) -> Result<Hidden> {
        self.blocking_allowed()?;
        block_on(async {
            let cache = match cache {
                Some(c) => {
                    let held = c.len();
                    if self.cache_ready(c).await? < held {
                        return Err(Error::Gpu(
                            "the device was recreated since this cache was filled: start a new cache"
                                .into(),
                        ));
                    }
                    Some(c)
                }
                None => None,
            };
            let taps = self.engine.forward(tokens, cache, &[]).await?;
            Ok(taps.last)
        })
    }

    pub(super) fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    /// Whether this scorer's model can generate: it kept its LM head and
    /// every block (a value-head PRM drops both when its head needs neither;
    /// open the checkpoint with [`HeadSource::Backbone`] to generate).
    pub fn can_generate(&self) -> Result<()> {
        if !self.all_layers || self.model().weights().vocab_projection().is_none() {
            return Err(Error::InvalidArgument(
                "this model was opened without its LM head or its last blocks (its PRM head \
                 needs neither): open it as a backbone to generate"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Logits over the vocabulary at the last of `tokens`, run after `cache`.
    pub(super) async fn last_logits(
        &self,
        tokens: &[u32],
        cache: &mut EngineCache,
    ) -> Result<Vec<f32>> {
        self.engine.last_logits(tokens, cache).await
    }

    /// [`Scorer::last_logits`] of one token for each of several caches, in
    /// one pass on the CPU engine (see `Engine::last_logits_rows`).
    pub(super) async fn last_logits_rows(
        &self,
        tokens: &[u32],
        caches: &mut [&mut EngineCache],
    ) -> Result<Vec<Vec<f32>>> {
        self.engine.last_logits_rows(tokens, caches).await
    }

    /// An empty KV cache on this scorer's engine.
    pub fn new_cache(&self) -> EngineCache {
        self.engine.new_cache()
    }

    /// Makes `cache` usable on the engine's current state; how many
    /// positions it still holds (0 after a device was recreated).
    pub(super) async fn cache_ready(&self, cache: &mut EngineCache) -> Result<usize> {
        self.engine.cache_ready(cache).await
    }

    /// Runs `tokens` on the engine (after `cache`, when given) and, with
    /// `enc` (positions relative to `tokens`), this scorer's head on them.
    pub(super) async fn run(
        &self,
        tokens: &[u32],
        cache: Option<&mut EngineCache>,
        enc: Option<&Encoded>,
    ) -> Result<Option<HeadOutput>> {
        if enc.is_some() {
            self.head()?;
        }
        self.engine.run(tokens, cache, enc).await
    }

    /// [`Scorer::run`] of several sequences in one pass where the engine
    /// can (see [`Engine::run_batch`](super::engine::Engine::run_batch)).
    pub(super) async fn run_batch(
        &self,
        parts: &mut [super::engine::BatchPart<'_>],
    ) -> Result<Vec<HeadOutput>> {
        self.head()?;
        self.engine.run_batch(parts).await
    }

    /// [`Scorer::encode`] under the token limit: the encoding of the steps
    /// that fit (see [`Scorer::fit`]) and how many were dropped. Steps that
    /// cannot fit by their text's length alone are never tokenized
    /// ([`Scorer::fit_by_length`]): a 15 MiB step is refused at once, not
    /// after gigabytes of tokenizer state.
    pub(super) fn encode_fitted(&self, problem: &str, steps: &[&str]) -> Result<(Encoded, usize)> {
        let possible = self.fit_by_length(problem, steps)?;
        let mut enc = self.encode(problem, &steps[..possible])?;
        let dropped = self.fit(&mut enc)?;
        Ok((enc, dropped + (steps.len() - possible)))
    }

    /// How many leading steps can fit under the token limit, judged from
    /// byte lengths before anything is tokenized: the problem and steps
    /// `0..=i` hold `b` bytes and no token stands for more than
    /// [`Tokenizer::max_input_bytes_per_token`] of them, so step `i`'s
    /// marker sits at or after token `b.div_ceil(per) - 1`; when that is
    /// not below the limit, neither step `i` nor any later one fits (the
    /// rule of [`Scorer::fit`]). Without truncation, or when not even step
    /// 0 can fit, that is [`Error::TraceTooLong`] with the bound. All steps
    /// when the tokenizer gives no bound (the text is then tokenized whole,
    /// as before).
    fn fit_by_length(&self, problem: &str, steps: &[&str]) -> Result<usize> {
        let Some(per) = self.tokenizer.max_input_bytes_per_token() else {
            return Ok(steps.len());
        };
        let limit = self.max_tokens;
        let mut bytes = problem.len();
        for (i, s) in steps.iter().enumerate() {
            bytes = bytes.saturating_add(s.len());
            let at_least = bytes.div_ceil(per);
            if at_least <= limit {
                continue;
            }
            let truncating = self.truncation != Truncation::Error;
            if !truncating || i == 0 {
                return Err(Error::TraceTooLong {
                    tokens: at_least,
                    limit,
                    truncating,
                    by_length: Some(crate::error::LengthBound {
                        step: i,
                        bytes,
                        bytes_per_token: per,
                    }),
                });
            }
            return Ok(i);
        }
        Ok(steps.len())
    }

    /// Applies the token limit: an error, or the leading steps whose tokens
    /// all fit. Returns how many steps were dropped.
    fn fit(&self, enc: &mut Encoded) -> Result<usize> {
        let limit = self.max_tokens;
        if enc.tokens.len() <= limit {
            return Ok(0);
        }
        if self.truncation == Truncation::Error {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit,
                truncating: false,
                by_length: None,
            });
        }
        let keep = enc
            .markers
            .iter()
            .zip(&enc.step_tokens)
            .take_while(|(&m, r)| m < limit && r.end <= limit)
            .count();
        if keep == 0 {
            return Err(Error::TraceTooLong {
                tokens: enc.tokens.len(),
                limit,
                truncating: true,
                by_length: None,
            });
        }
        let dropped = enc.markers.len() - keep;
        enc.markers.truncate(keep);
        enc.step_tokens.truncate(keep);
        enc.step_spans.truncate(keep);
        let end = enc.markers.iter().copied().max().unwrap_or(0).max(
            enc.step_tokens
                .last()
                .map_or(0, |r| r.end.saturating_sub(1)),
        );
        enc.tokens.truncate(end + 1);
        Ok(dropped)
    }
}

/// Maps a GGUF file and parses it, named by its file name in errors.
fn parse_gguf_file(path: &Path) -> Result<GgufModel> {
    let bytes = ModelBytes::open(path)?;
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    GgufModel::parse(bytes, &name)
}

/// The family: `options.family`, else the separate head file's, else
/// detected from the checkpoint's architectures, tensors and tokens (one
/// rule for both checkpoint formats).
fn choose_family(
    options: &ScorerOptions,
    external: Option<&HeadFile>,
    architectures: &[String],
    has_tensor: impl Fn(&str) -> bool,
    tokenizer: &Tokenizer,
) -> Result<Family> {
    match (options.family, external) {
        // A head file is read only by its own family: with another one it
        // would be loaded, reported, and silently not used.
        (Some(f), Some(head)) => {
            let own = head.family()?;
            if own != f {
                return Err(Error::InvalidArgument(format!(
                    "the head file {} is a {own} head, and the {f} family reads no such head; \
                     give the head or the family, not both",
                    head.name()
                )));
            }
            Ok(f)
        }
        (Some(f), None) => Ok(f),
        (None, Some(head)) => head.family(),
        (None, None) => Ok(Family::detect(architectures, has_tensor, |t| {
            tokenizer.token_to_id(t).is_some()
        })),
    }
}

/// What the head reads: a separate head file says (layer, confidence
/// features); a checkpoint's own head reads the final states.
fn head_input(external: Option<&HeadFile>) -> Result<HeadInput> {
    external.map_or(Ok(HeadInput::default()), HeadFile::input)
}

/// The head's tensors from the separate head file when there is one, else
/// from the checkpoint (`lookup`); none for a backbone.
#[allow(clippy::too_many_arguments)]
fn load_head(
    mode: HeadMode,
    protocol: &Protocol,
    model: &Transformer,
    tokenizer: &Tokenizer,
    input: &HeadInput,
    external: Option<&HeadFile>,
    lookup: &TensorLookup<'_>,
) -> Result<Option<Head>> {
    // A guard (`stepscore.min_with`) is a built-in head, read here.
    let guard_file = match &input.min_with {
        Some(m) => Some(HeadFile::embedded(&m.head)?),
        None => None,
    };
    let guard_input = guard_file.as_ref().map(HeadFile::input).transpose()?;
    let guard_get = |name: &str| Ok(guard_file.as_ref().and_then(|f| f.tensor(name)));
    let guard = guard_input
        .as_ref()
        .map(|i| (i, &guard_get as &TensorLookup<'_>));
    match mode {
        HeadMode::Load => Ok(Some(Head::load(
            protocol,
            model,
            tokenizer,
            input,
            &|name| match external {
                Some(head) => Ok(head.tensor(name)),
                None => lookup(name),
            },
            guard,
        )?)),
        HeadMode::Skip => Ok(None),
    }
}
