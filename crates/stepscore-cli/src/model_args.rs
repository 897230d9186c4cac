//! The model and engine flags of every command that loads a PRM (`score`,
//! `serve`, `features`): declared once (`#[command(flatten)]`), turned into
//! [`ScorerOptions`] once, and the model opened the same way.

use std::path::{Path, PathBuf};
use std::time::Instant;

use stepscore::catalog::fetch::Progress;
use stepscore::catalog::{self, Opened};
use stepscore::engine::GgmlType;
use stepscore::prm::{Backend, Family, HeadSource, Scorer, ScorerOptions, Truncation};

use crate::commands::fetch::FetchDisplay;
use crate::Failure;

#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF file, a Hugging Face checkpoint directory, or a catalog name
    /// (`stepscore fetch --list`); default: the default PRM.
    #[arg(long, short)]
    pub model: Option<PathBuf>,

    /// A PRM head in its own safetensors file (e.g. from `stepscore train`),
    /// applied to the --model backbone (default: the default PRM's backbone,
    /// Qwen2.5-Coder-1.5B-Instruct, in place of its built-in head). Refused
    /// with a --family that reads no head file (confidence, math-shepherd, rlhflow, outcome,
    /// generative).
    #[arg(long)]
    pub head: Option<PathBuf>,

    /// PRM family: score-head, value-head, math-shepherd, rlhflow, confidence,
    /// outcome, generative (detected from the checkpoint when omitted; a
    /// generative verifier such as ThinkPRM must be named: it writes a
    /// critique of each trace first).
    #[arg(long)]
    pub family: Option<Family>,

    /// Engine (default auto): auto (a hardware GPU if there is one, else
    /// the CPU; a software rasterizer such as llvmpipe counts as no GPU),
    /// gpu (the WGSL engine on the chosen adapter, software ones included;
    /// STEPSCORE_ADAPTER picks by name; `webgpu` is the same engine), cpu.
    #[arg(long)]
    pub backend: Option<Backend>,

    /// CPU threads (default 0: the CPUs this process may use, fewer when
    /// OMP_NUM_THREADS says so; more than the cores are capped, with a note).
    #[arg(long, value_parser = crate::options::threads)]
    pub threads: Option<usize>,

    /// Token limit per trace, from 1 to the model's context length
    /// (default: the context length).
    #[arg(long, value_parser = crate::options::positive)]
    pub max_tokens: Option<usize>,

    /// A trace over the token limit: error (default: refused) or drop-steps
    /// (only the leading steps that fit are scored; the dropped ones are
    /// reported).
    #[arg(long)]
    pub truncation: Option<Truncation>,

    /// The same as `--truncation drop-steps` (the older spelling).
    #[arg(long, hide = true, conflicts_with = "truncation")]
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
    /// The scorer options these flags say: the core's defaults
    /// ([`ScorerOptions`]) where a flag is not given.
    pub fn options(&self) -> ScorerOptions {
        let defaults = ScorerOptions::default();
        ScorerOptions {
            family: self.family,
            backend: self.backend.unwrap_or(defaults.backend),
            threads: self.threads.unwrap_or(defaults.threads),
            max_tokens: self.max_tokens,
            truncation: match (self.truncation, self.truncate) {
                (Some(t), _) => t,
                (None, true) => Truncation::DropSteps,
                (None, false) => defaults.truncation,
            },
            quantize: self.quantize,
        }
    }

    /// Loads the PRM: `--model` (a path, a catalog name, or by default the
    /// default PRM; fetched when not cached) with `--head` (default: a
    /// catalog PRM's built-in head), by the core's one path
    /// (`catalog::open`). Reports what was loaded and on which engine on
    /// stderr.
    pub fn open(&self) -> Result<Scorer, Failure> {
        let head = match &self.head {
            Some(h) => HeadSource::File(h.clone()),
            None => HeadSource::Checkpoint,
        };
        let (opened, seconds, fetched) = self.open_with(head)?;
        let config = opened.scorer.model().config();
        let what = if fetched {
            "fetched and loaded"
        } else {
            "loaded"
        };
        eprintln!(
            "stepscore: {} ({} family, {} layers, hidden {}) {what} in {seconds:.2}s",
            opened.label(),
            opened.scorer.family(),
            config.n_layers,
            config.hidden_size,
        );
        eprintln!("stepscore: engine {}", opened.scorer.backend_report());
        Ok(opened.scorer)
    }

    /// Loads `--model` as a backbone for generation or feature extraction
    /// (no head read); `--head` does not apply.
    pub fn open_backbone(&self) -> Result<Scorer, Failure> {
        if let Some(h) = &self.head {
            return Err(Failure::Usage(format!(
                "--head {}: feature extraction reads the backbone's hidden states, not a head",
                h.display()
            )));
        }
        Ok(self.open_with(HeadSource::Backbone)?.0.scorer)
    }

    /// The model opened with `head`, the seconds it took, and whether that
    /// included a download.
    fn open_with(&self, head: HeadSource) -> Result<(Opened, f64, bool), Failure> {
        self.refuse_gguf_quantize()?;
        let started = Instant::now();
        let mut display = FetchDisplay::default();
        let mut fetched = false;
        let opened = catalog::open(self.model.as_deref(), head, &self.options(), &mut |e, p| {
            fetched |= matches!(p, Progress::Downloading { .. });
            display.show(e, p)
        })
        .map_err(|e| Failure::during("cannot load model", e))?;
        Ok((opened, started.elapsed().as_secs_f64(), fetched))
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
