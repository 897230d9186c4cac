//! Loading a scorer: where its head comes from ([`HeadSource`]), the
//! tokenizer's side files, and the constructors that read a GGUF file or a
//! Hugging Face checkpoint directory, choose the family and load the head.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::chat::ChatFormat;
use super::engine::Engine;
use super::family::{Family, Protocol};
use super::head::{Head, HeadInput, TensorLookup};
use super::head_file::HeadFile;
use super::options::ScorerOptions;
use super::scorer::Scorer;
use crate::engine::ModelBytes;
use crate::engine::Tokenizer;
use crate::engine::{read_regular, SIDE_FILE_LIMIT};
use crate::engine::{GgufModel, HfCheckpoint, Transformer};
use crate::{Error, Result};

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
    /// use stepscore::engine::ModelBytes;
    /// use stepscore::engine::GgufModel;
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
    /// use stepscore::engine::HfCheckpoint;
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
        let lookup = |name: &str| {
            if !checkpoint.has_tensor(name) {
                return Ok(None);
            }
            let t = checkpoint.tensor_f32(name)?;
            Ok(Some((t.shape, t.data)))
        };
        let head = HeadPlan {
            mode,
            input,
            external,
            lookup: &lookup,
        };
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
        let model = gguf.transformer()?;
        let head = HeadPlan {
            mode,
            input: head_input(external)?,
            external,
            lookup: &|name| gguf.tensor_f32(name),
        };
        Self::assemble(model, tokenizer, protocol, head, options)
    }

    /// The scorer from a loaded model: its threads set, the head loaded
    /// (`plan`), the blocks no head reads dropped, the engine chosen.
    fn assemble(
        mut model: Transformer,
        tokenizer: Tokenizer,
        protocol: Protocol,
        plan: HeadPlan<'_>,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        model.set_threads(crate::engine::thread_count(options.threads, None).threads);
        let mut head = load_head(&plan, &protocol, &model, &tokenizer)?;
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

/// What a scorer's head is loaded from: the mode, the head file's input
/// description and the file (if separate), and the checkpoint's own tensors.
struct HeadPlan<'a> {
    mode: HeadMode,
    input: HeadInput,
    external: Option<&'a HeadFile>,
    lookup: &'a TensorLookup<'a>,
}

/// The head's tensors from the separate head file when there is one, else
/// from the checkpoint (`plan.lookup`); none for a backbone.
fn load_head(
    plan: &HeadPlan<'_>,
    protocol: &Protocol,
    model: &Transformer,
    tokenizer: &Tokenizer,
) -> Result<Option<Head>> {
    let (input, external, lookup) = (&plan.input, plan.external, plan.lookup);
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
    match plan.mode {
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
