//! The model and engine flags of every command that loads a PRM (`score`,
//! `serve`, `features`): declared once (`#[command(flatten)]`), turned into
//! [`ScorerOptions`] once, and the model opened the same way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepscore::ggml::GgmlType;
use stepscore::prm::{Backend, Family, Scorer, ScorerOptions, Truncation};

use crate::commands::fetch;
use crate::Failure;

#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF file, a Hugging Face checkpoint directory, or a catalog name
    /// (`stepscore fetch --list`); default: the default PRM.
    #[arg(long, short)]
    pub model: Option<PathBuf>,

    /// A PRM head in its own safetensors file (e.g. from `stepscore train`),
    /// applied to the --model backbone (default backbone: SmolLM2-135M-Instruct).
    #[arg(long)]
    pub head: Option<PathBuf>,

    /// PRM family: score-head, value-head, math-shepherd, rlhflow, confidence
    /// (detected from the checkpoint when omitted).
    #[arg(long)]
    pub family: Option<Family>,

    /// Engine: auto (a hardware GPU if there is one, else the CPU; a
    /// software rasterizer such as llvmpipe counts as no GPU), gpu (the WGSL
    /// engine on the chosen adapter, software ones included; STEPSCORE_ADAPTER
    /// picks by name; `webgpu` is the same engine), cpu.
    #[arg(long, default_value = "auto")]
    pub backend: Backend,

    /// CPU threads (0: the CPUs this process may use, fewer when OMP_NUM_THREADS says so;
    /// more than the cores are capped, with a note).
    #[arg(long, default_value_t = 0, value_parser = crate::options::threads)]
    pub threads: usize,

    /// Token limit per trace, from 1 to the model's context length.
    #[arg(long, value_parser = crate::options::positive)]
    pub max_tokens: Option<usize>,

    /// Keep only the leading steps that fit the token limit instead of
    /// rejecting longer traces (dropped steps are reported).
    #[arg(long)]
    pub truncate: bool,

    /// Quantize a Hugging Face checkpoint's weights at load: q8_0 (q8) or
    /// q4_0 (q4); refused for GGUF files, which keep the types they were
    /// written with.
    #[arg(long, value_parser = quantize)]
    pub quantize: Option<GgmlType>,
}

/// `--quantize`: the core's names ([`stepscore::prm::parse_quantize`]).
fn quantize(s: &str) -> Result<GgmlType, String> {
    stepscore::prm::parse_quantize(s).map_err(|e| e.to_string())
}

impl ModelArgs {
    /// The scorer options these flags say.
    pub fn options(&self) -> ScorerOptions {
        ScorerOptions {
            family: self.family,
            threads: self.threads,
            max_tokens: self.max_tokens,
            truncation: if self.truncate {
                Truncation::DropSteps
            } else {
                Truncation::Error
            },
            quantize: self.quantize,
            backend: self.backend,
        }
    }

    /// Loads the PRM: `--model` (a path, a catalog name, or by default the
    /// default PRM; fetched when not cached) with `--head` (default: a
    /// catalog PRM's built-in head). Reports what was loaded and on which
    /// engine on stderr.
    pub fn open(&self) -> Result<Scorer, Failure> {
        let options = self.options();
        self.refuse_gguf_quantize()?;
        let choice = fetch::resolve_model(self.model.as_deref())?;
        let path = choice.path.clone();
        let head = self.head.as_deref();
        let started = Instant::now();
        // A catalog PRM's built-in head applies unless another head or a family
        // that reads no value head (e.g. `--family confidence`) is asked for.
        let builtin_head = choice
            .head
            .as_ref()
            .filter(|_| head.is_none() && matches!(options.family, None | Some(Family::ValueHead)));
        let scorer = match (head, builtin_head) {
            (Some(head), _) => Scorer::open_with_head(&path, head, &options),
            (None, Some(head)) => Scorer::open_with_head_file(&path, head, &options),
            (None, None) => Scorer::open(&path, &options),
        }
        .map_err(|e| Failure::during("cannot load model", e))?;
        crate::options::max_tokens_fit(options.max_tokens, &scorer)?;
        let head_note = match (head, builtin_head) {
            (Some(h), _) => format!(" + head {}", h.display()),
            (None, Some(h)) => format!(" + built-in head {}", h.name()),
            (None, None) => String::new(),
        };
        eprintln!(
            "stepscore: {}{head_note} ({} family, {} layers, hidden {}) loaded in {:.2}s",
            choice.label,
            scorer.family(),
            scorer.model().config().n_layers,
            scorer.model().config().hidden_size,
            started.elapsed().as_secs_f64()
        );
        eprintln!("stepscore: engine {}", scorer.backend_report());
        Ok(scorer)
    }

    /// Loads `--model` as a backbone for feature extraction (no head read);
    /// `--head` does not apply.
    pub fn open_backbone(&self) -> Result<Scorer, Failure> {
        if let Some(h) = &self.head {
            return Err(Failure::Usage(format!(
                "--head {}: feature extraction reads the backbone's hidden states, not a head",
                h.display()
            )));
        }
        self.refuse_gguf_quantize()?;
        let options = self.options();
        let path = fetch::resolve_model(self.model.as_deref())?.path;
        let scorer = Scorer::open_backbone(&path, &options)
            .map_err(|e| Failure::during("cannot load model", e))?;
        crate::options::max_tokens_fit(options.max_tokens, &scorer)?;
        Ok(scorer)
    }

    /// GGUF files (the default model included) are already quantized: the
    /// flag would be ignored, so it is refused before anything is loaded.
    fn refuse_gguf_quantize(&self) -> Result<(), Failure> {
        let (Some(q), model) = (self.quantize, self.model.as_deref()) else {
            return Ok(());
        };
        if model.is_some_and(Path::is_dir) {
            return Ok(());
        }
        let which = model.map_or("the default model".to_string(), |m| m.display().to_string());
        // Every catalog model is one GGUF file too.
        Err(Failure::Usage(format!(
            "--quantize {}: load-time quantization applies to Hugging Face checkpoint \
             directories; {which} is a GGUF file, which keeps the tensor types it was \
             written with",
            q.name()
        )))
    }
}
