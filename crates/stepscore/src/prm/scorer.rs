//! The `Scorer`: load a PRM checkpoint once, then score traces.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::backend::{block_on, Backend, Engine};
use super::chat::ChatFormat;
use super::family::Family;
use super::head::{Head, HeadInput, StepConfidence};
use super::head_file::HeadFile;
use super::session::Session;
use super::template::{encode, Encoded, Protocol};
use crate::error::{Error, Result};
use crate::format::ModelBytes;
use crate::ggml::GgmlType;
use crate::model::{GgufModel, HfCheckpoint, Hidden, Taps, Transformer};
use crate::tokenizer::Tokenizer;
use crate::trace::Trace;

/// What to do with a trace longer than the token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Truncation {
    /// Refuse it with [`Error::TraceTooLong`].
    #[default]
    Error,
    /// Score only the leading steps that fit; the rest get no score and the
    /// result says how many were dropped.
    DropSteps,
}

/// How to load a scorer.
#[derive(Debug, Clone, Default)]
pub struct ScorerOptions {
    /// The PRM family; detected from the checkpoint when `None`.
    pub family: Option<Family>,
    /// Worker threads for the CPU engine; 0 means all available cores.
    pub threads: usize,
    /// Token limit per trace; the model's context length when `None`
    /// (a smaller limit always wins).
    pub max_tokens: Option<usize>,
    pub truncation: Truncation,
    /// Quantize a Hugging Face checkpoint's weights at load (Q8_0 or Q4_0);
    /// refused for GGUF files, which keep the types they were written with.
    pub quantize: Option<GgmlType>,
    /// The engine: CPU (default), GPU, or Auto (see [`Backend`]).
    pub backend: Backend,
}

/// Per-step scores of one trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceScore {
    /// One entry per step; `None` for steps dropped by truncation.
    pub step_scores: Vec<Option<f64>>,
    /// Tokens the engine processed.
    pub tokens: usize,
    /// Steps dropped because the trace was over the token limit.
    pub truncated_steps: usize,
    /// Confidence-family statistics per scored step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<Vec<StepConfidence>>,
}

/// A loaded PRM: decoder, tokenizer, prompt protocol and head.
#[derive(Debug)]
pub struct Scorer {
    model: Transformer,
    tokenizer: Tokenizer,
    protocol: Protocol,
    /// `None` for a backbone opened for feature extraction only.
    head: Option<Head>,
    max_tokens: usize,
    truncation: Truncation,
    engine: Engine,
}

/// Whether loading reads the family's head tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadMode {
    Load,
    /// Backbone only (feature extraction): no head tensors needed, and the
    /// vocabulary projection is kept when the checkpoint has one.
    Skip,
}

/// One run of the engine over a trace: what every head and the feature
/// extractor read from.
pub(super) struct Forward {
    pub enc: Encoded,
    pub hidden: Taps<Hidden>,
    pub truncated_steps: usize,
}

/// The parts of `tokenizer_config.json` the prompt layout uses.
#[derive(Debug, Default, Deserialize)]
struct TokenizerConfig {
    #[serde(default)]
    bos_token: Option<TokenText>,
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
        self.bos_token.as_ref().map(|t| match t {
            TokenText::Plain(s) => s.clone(),
            TokenText::Added { content } => content.clone(),
        })
    }

    fn chat_format(&self) -> Option<ChatFormat> {
        match self.chat_template.as_ref()? {
            ChatTemplate::One(t) => ChatFormat::from_template(t),
            ChatTemplate::Named(list) => list
                .iter()
                .find(|t| t.name == "default")
                .or(list.first())
                .and_then(|t| ChatFormat::from_template(&t.template)),
        }
    }
}

impl Scorer {
    /// Loads a model: a Hugging Face checkpoint directory, or a GGUF file.
    pub fn open(path: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer> {
        Self::open_with(path.as_ref(), options, HeadMode::Load)
    }

    pub(super) fn open_with(
        path: &Path,
        options: &ScorerOptions,
        mode: HeadMode,
    ) -> Result<Scorer> {
        if path.is_dir() {
            Self::hf_dir(path, options, mode, None)
        } else {
            Self::gguf(parse_gguf_file(path)?, options, mode, None)
        }
    }

    /// Loads a backbone (GGUF file or Hugging Face directory) and its PRM head
    /// from a separate safetensors file, e.g. a head trained by
    /// `stepscore train`. The family comes from the head's tensors unless
    /// `options.family` says otherwise.
    pub fn open_with_head(
        model: impl AsRef<Path>,
        head: impl AsRef<Path>,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        let head_path = head.as_ref();
        let head_bytes =
            std::fs::read(head_path).map_err(|e| Error::io(head_path.display().to_string(), e))?;
        let head = HeadFile::from_bytes(&head_bytes, &head_path.display().to_string())?;
        Self::open_with_head_file(model, &head, options)
    }

    /// [`Scorer::open_with_head`] with the head already parsed (e.g.
    /// [`HeadFile::embedded`]).
    pub fn open_with_head_file(
        model: impl AsRef<Path>,
        head: &HeadFile,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        let path = model.as_ref();
        if path.is_dir() {
            Self::hf_dir(path, options, HeadMode::Load, Some(head))
        } else {
            Self::from_gguf_with_head(parse_gguf_file(path)?, head, options)
        }
    }

    /// A parsed GGUF backbone plus a head file (the wasm path).
    pub fn from_gguf_with_head(
        gguf: GgufModel,
        head: &HeadFile,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        Self::gguf(gguf, options, HeadMode::Load, Some(head))
    }

    /// Loads a Hugging Face checkpoint directory: config.json, safetensors
    /// (single or sharded), tokenizer.json and, when present,
    /// tokenizer_config.json.
    pub fn from_hf_dir(dir: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer> {
        Self::hf_dir(dir.as_ref(), options, HeadMode::Load, None)
    }

    fn hf_dir(
        dir: &Path,
        options: &ScorerOptions,
        mode: HeadMode,
        external: Option<&HeadFile>,
    ) -> Result<Scorer> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| Error::io(dir.join(name).display().to_string(), e))
        };
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

    /// Builds a scorer from an opened checkpoint and tokenizer files (the
    /// wasm path: everything arrives as bytes).
    pub fn from_hf(
        checkpoint: &HfCheckpoint,
        tokenizer_json: &[u8],
        tokenizer_config: Option<&[u8]>,
        options: &ScorerOptions,
    ) -> Result<Scorer> {
        Self::hf_with(
            checkpoint,
            tokenizer_json,
            tokenizer_config,
            options,
            HeadMode::Load,
            None,
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
        let config = checkpoint.config();
        let family = match (options.family, external) {
            (Some(f), _) => f,
            (None, Some(head)) => head.family()?,
            (None, None) => Family::detect(
                &config.architectures,
                |t| checkpoint.has_tensor(t),
                |t| tokenizer.token_to_id(t).is_some(),
            ),
        };
        let protocol = Protocol::new(family, &tokenizer, tok_config.chat_format(), bos_text)?;
        let lookup = |name: &str| -> Result<Option<(Vec<usize>, Vec<f32>)>> {
            if let Some(head) = external {
                return Ok(head.tensor(name));
            }
            if !checkpoint.has_tensor(name) {
                return Ok(None);
            }
            let t = checkpoint.tensor_f32(name)?;
            Ok(Some((t.shape, t.data)))
        };
        let input = external.map_or(Ok(HeadInput::default()), HeadFile::input)?;
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
        model.set_threads(resolve_threads(options.threads));
        let head = match mode {
            HeadMode::Load => Some(Head::load(&protocol, &model, &tokenizer, &input, &lookup)?),
            HeadMode::Skip => None,
        };
        Self::assemble(model, tokenizer, protocol, head, options)
    }

    /// Loads a GGUF file: decoder, tokenizer and chat template from its
    /// metadata; PRM head tensors, when the family needs them, from the same file.
    pub fn from_gguf_file(path: impl AsRef<Path>, options: &ScorerOptions) -> Result<Scorer> {
        Self::open_with(path.as_ref(), options, HeadMode::Load)
    }

    /// Builds a scorer from a parsed GGUF model (the wasm path).
    pub fn from_gguf(gguf: GgufModel, options: &ScorerOptions) -> Result<Scorer> {
        Self::gguf(gguf, options, HeadMode::Load, None)
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
        let chat = gguf
            .file
            .opt_str("tokenizer.chat_template")?
            .and_then(ChatFormat::from_template);
        let bos_text = tokenizer.bos_id().and_then(|id| tokenizer.id_to_token(id));
        let config = gguf.config()?;
        let family = match (options.family, external) {
            (Some(f), _) => f,
            (None, Some(head)) => head.family()?,
            (None, None) => Family::detect(
                &config.architectures,
                |t| gguf.file.tensor(t).is_some(),
                |t| tokenizer.token_to_id(t).is_some(),
            ),
        };
        let protocol = Protocol::new(family, &tokenizer, chat, bos_text)?;
        let input = external.map_or(Ok(HeadInput::default()), HeadFile::input)?;
        let mut model = gguf.transformer()?;
        model.set_threads(resolve_threads(options.threads));
        let head = match mode {
            HeadMode::Load => Some(Head::load(
                &protocol,
                &model,
                &tokenizer,
                &input,
                &|name| match external {
                    Some(head) => Ok(head.tensor(name)),
                    None => gguf.tensor_f32(name),
                },
            )?),
            HeadMode::Skip => None,
        };
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
        if let Some(h) = head.as_mut() {
            if let (Some(l), false) = (h.layer(), h.needs_token_stats()) {
                model.truncate_layers(l);
                h.read_final_states();
            }
        }
        let context = model.config().max_position_embeddings;
        let max_tokens = options.max_tokens.map_or(context, |m| m.min(context));
        if max_tokens == 0 {
            return Err(Error::InvalidArgument(
                "max_tokens must be at least 1".into(),
            ));
        }
        let engine = Engine::new(options.backend, &model, head.as_ref())?;
        Ok(Scorer {
            model,
            tokenizer,
            protocol,
            head,
            max_tokens,
            truncation: options.truncation,
            engine,
        })
    }

    pub fn family(&self) -> Family {
        self.protocol.family
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn model(&self) -> &Transformer {
        &self.model
    }

    /// Expands every weight matrix to f32 (`Transformer::dequantized`) so
    /// the CPU engine runs its exact f32 path instead of ggml's 8-bit
    /// activation scheme: the reference the GPU engine's scores are checked
    /// against (its kernels dequantize inside and multiply f32
    /// activations). Refused on the GPU engine, whose weights are uploaded
    /// already. Test support: the weights take up to 8 times the memory.
    #[cfg(feature = "testing")]
    pub fn dequantize_weights(&mut self) -> Result<()> {
        if self.engine.report().chosen != Backend::Cpu {
            return Err(Error::InvalidArgument(
                "dequantize_weights: only the CPU engine's weights can be expanded".into(),
            ));
        }
        self.model = self.model.dequantized()?;
        Ok(())
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The first-error threshold the model's head was shipped with (chosen
    /// on validation data with the head); `None` when it has none.
    pub fn threshold(&self) -> Option<f64> {
        self.head.as_ref().and_then(Head::threshold)
    }

    /// The head; an error for a backbone opened without one.
    pub(crate) fn head(&self) -> Result<&Head> {
        self.head.as_ref().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "this {} model was opened as a backbone for feature extraction, without a head: it cannot score",
                self.protocol.family
            ))
        })
    }

    pub(super) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(super) fn head_opt(&self) -> Option<&Head> {
        self.head.as_ref()
    }

    /// The earlier layer the head reads, which every forward also returns.
    pub(super) fn tap(&self) -> Option<usize> {
        self.head.as_ref().and_then(Head::layer)
    }

    pub(super) fn set_engine(&mut self, engine: Engine) {
        self.engine = engine;
    }

    /// Starts scoring a trace step by step (see [`Session::append`]).
    pub fn session(&self, problem: &str) -> Session<'_> {
        Session::new(self, problem)
    }

    /// Scores N candidate step lists for one problem, running the tokens
    /// they share (system prompt and problem) once.
    pub fn score_candidates(
        &self,
        problem: &str,
        candidates: &[Vec<&str>],
    ) -> Result<Vec<Vec<f64>>> {
        let mut base = self.session(problem);
        base.prime()?;
        candidates
            .iter()
            .map(|steps| {
                let mut s = base.clone();
                for step in steps {
                    s.append(step)?;
                }
                Ok(s.scores().to_vec())
            })
            .collect()
    }

    /// The token ids and marker positions the scorer would run for a trace.
    pub fn encode(&self, problem: &str, steps: &[&str]) -> Result<Encoded> {
        encode(&self.protocol, &self.tokenizer, problem, steps)
    }

    /// Scores every step of `trace`.
    pub fn score(&self, trace: &Trace) -> Result<TraceScore> {
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        self.score_steps(&trace.problem, &steps)
    }

    /// Scores `steps` as the response to `problem`.
    pub fn score_steps(&self, problem: &str, steps: &[&str]) -> Result<TraceScore> {
        self.blocking_allowed()?;
        block_on(self.score_steps_async(problem, steps))
    }

    /// [`Scorer::score`], awaited: the only way to score on WebGPU in a
    /// browser; on the CPU engine, or natively, it completes in one poll.
    pub async fn score_async(&self, trace: &Trace) -> Result<TraceScore> {
        let steps: Vec<&str> = trace.steps.iter().map(|s| s.text.as_str()).collect();
        self.score_steps_async(&trace.problem, &steps).await
    }

    /// [`Scorer::score_steps`], awaited.
    pub async fn score_steps_async(&self, problem: &str, steps: &[&str]) -> Result<TraceScore> {
        self.head()?;
        let mut enc = self.encode(problem, steps)?;
        let truncated_steps = self.fit(&mut enc)?;
        let out = self.engine_score(&enc).await?;
        let mut step_scores: Vec<Option<f64>> = out.scores.into_iter().map(Some).collect();
        step_scores.resize(steps.len(), None);
        Ok(TraceScore {
            step_scores,
            tokens: enc.tokens.len(),
            truncated_steps,
            confidence: out.confidence,
        })
    }

    /// Encodes, applies the token limit and runs the decoder: the one path
    /// shared by scoring and feature extraction.
    pub(super) fn forward_steps(
        &self,
        problem: &str,
        steps: &[&str],
        layer: Option<usize>,
    ) -> Result<Forward> {
        self.blocking_allowed()?;
        let mut enc = self.encode(problem, steps)?;
        let truncated_steps = self.fit(&mut enc)?;
        let hidden = block_on(self.engine_forward(&enc.tokens, layer))?;
        Ok(Forward {
            enc,
            hidden,
            truncated_steps,
        })
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
            });
        }
        let dropped = enc.markers.len() - keep;
        enc.markers.truncate(keep);
        enc.step_tokens.truncate(keep);
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

/// 0 means every core the platform reports.
fn resolve_threads(requested: usize) -> usize {
    if requested > 0 {
        requested
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}
