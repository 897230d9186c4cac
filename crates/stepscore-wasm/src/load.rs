//! Building a scorer from bytes: load options as JS passes them, and the two
//! model layouts (one GGUF file; a Hugging Face checkpoint's named files).
//! Plain Rust, so host tests cover it.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;
use stepscore::engine::{GgufModel, HfCheckpoint, ModelBytes};
use stepscore::prm::{Backend, HeadFile, HeadSource, Scorer, ScorerOptions};

use crate::error::{Error, Result};
use crate::output::ModelInfo;

/// The core's `ScorerOptions` in the JS spelling (`{ family?, maxTokens?,
/// truncation?, quantize?, threads? }`, see `crate::options`): the same
/// names, values, defaults and checks as the CLI and Python. `threads` 0 or
/// absent means every thread the build has (see `stepscore::engine::thread_count`): 1 in the
/// single-thread build, the pool plus the caller in the threaded one. The
/// engine is chosen by the package after the load (`withBackend`), so the
/// scorer loads on the CPU engine whatever `backend` says.
pub fn parse_options(v: &Value) -> Result<ScorerOptions> {
    // A null option is an absent one, as the package's own options read.
    let v = match v {
        Value::Object(obj) => Value::Object(
            obj.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    };
    let mut options: ScorerOptions = crate::options::core_options(&v, "load options")?;
    options.backend = Backend::Cpu;
    Ok(options)
}

/// A loaded scorer and what `info()` reports about its files.
#[derive(Debug)]
pub struct Loaded {
    /// Shared with the sessions started on it.
    pub scorer: Rc<Scorer>,
    pub format: &'static str,
    pub model_bytes: usize,
}

impl Loaded {
    pub fn info(&self) -> ModelInfo {
        let c = self.scorer.model().config();
        let report = self.scorer.backend_report();
        ModelInfo {
            family: self.scorer.family().name(),
            format: self.format,
            architectures: c.architectures.clone(),
            hidden_size: c.hidden_size,
            intermediate_size: c.intermediate_size,
            layers: c.n_layers,
            heads: c.n_heads,
            kv_heads: c.n_kv_heads,
            head_dim: c.head_dim,
            vocab_size: c.vocab_size,
            context_length: c.max_position_embeddings,
            max_tokens: self.scorer.max_tokens(),
            model_bytes: self.model_bytes,
            threads: self.scorer.model().threads(),
            engine: report.chosen.name(),
            adapter: report.adapter.clone(),
            engine_reason: report.reason.clone(),
            threshold: self.scorer.threshold(),
            threshold_in_force: self.scorer.threshold_in_force(None),
            tokens_read: self.scorer.tokens_read().name(),
        }
    }
}

/// Loads a GGUF file's bytes; `name` names it in messages.
pub fn load_gguf(bytes: Vec<u8>, name: &str, options: &ScorerOptions) -> Result<Loaded> {
    load_gguf_and(bytes, name, &HeadSource::Checkpoint, 0, options)
}

/// Loads a GGUF backbone plus a PRM head from its own safetensors file (the
/// trained default PRM: SmolLM2 plus `v_head.summary.*`). The family comes
/// from the head's tensors unless the options name one.
pub fn load_gguf_with_head(
    bytes: Vec<u8>,
    name: &str,
    head: &[u8],
    head_name: &str,
    options: &ScorerOptions,
) -> Result<Loaded> {
    let head_bytes = head.len();
    let head = HeadFile::from_bytes(head, head_name).map_err(Error::from_load)?;
    load_gguf_and(bytes, name, &HeadSource::Loaded(head), head_bytes, options)
}

/// Loads a catalog entry's GGUF file (fetched and checked by the package's
/// JS) with the head the core embeds for a PRM entry, so a catalog name
/// means the same model here as in the CLI.
pub fn load_catalog(bytes: Vec<u8>, entry: &str, options: &ScorerOptions) -> Result<Loaded> {
    let entry = stepscore::catalog::lookup(entry).map_err(Error::from_load)?;
    if bytes.len() as u64 != entry.file.size {
        return Err(Error::new(
            crate::error::Code::ModelInvalid,
            format!(
                "{}: {} bytes, the catalog entry `{}` says {}",
                entry.file.file_name,
                bytes.len(),
                entry.name,
                entry.file.size
            ),
        ));
    }
    let head = entry
        .head_source(HeadSource::Checkpoint, options)
        .map_err(Error::from_load)?;
    load_gguf_and(bytes, entry.file.file_name, &head, 0, options)
}

fn load_gguf_and(
    bytes: Vec<u8>,
    name: &str,
    head: &HeadSource,
    head_bytes: usize,
    options: &ScorerOptions,
) -> Result<Loaded> {
    let model_bytes = bytes.len() + head_bytes;
    let gguf = GgufModel::parse(ModelBytes::from_vec(bytes), name).map_err(Error::from_load)?;
    let scorer = Scorer::from_gguf(gguf, head, options).map_err(Error::from_load)?;
    Ok(Loaded {
        scorer: Rc::new(scorer),
        format: "gguf",
        model_bytes,
    })
}

pub fn load_hf(mut files: BTreeMap<String, Vec<u8>>, options: &ScorerOptions) -> Result<Loaded> {
    let model_bytes = files.values().map(Vec::len).sum();
    let tokenizer_json = files.remove("tokenizer.json").ok_or_else(|| {
        Error::new(
            crate::error::Code::TokenizerInvalid,
            "tokenizer.json: file not provided",
        )
    })?;
    let tokenizer_config = files.remove("tokenizer_config.json");
    let checkpoint = HfCheckpoint::from_bytes(files).map_err(Error::from_load)?;
    let scorer = Scorer::from_hf(
        &checkpoint,
        &tokenizer_json,
        tokenizer_config.as_deref(),
        &HeadSource::Checkpoint,
        options,
    )
    .map_err(Error::from_load)?;
    Ok(Loaded {
        scorer: Rc::new(scorer),
        format: "hf",
        model_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use serde_json::json;
    use std::path::PathBuf;
    use stepscore::engine::GgmlType;
    use stepscore::prm::{Family, Truncation};

    fn fixture_files(name: &str) -> BTreeMap<String, Vec<u8>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/prm")
            .join(name);
        [
            "config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json",
        ]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(dir.join(f)).unwrap()))
        .collect()
    }

    #[test]
    fn options_are_checked() {
        let o = parse_options(&json!({"family": "rlhflow", "maxTokens": 64, "truncation": "drop-steps", "quantize": "Q8_0"}))
            .unwrap();
        assert_eq!(o.family, Some(Family::Rlhflow));
        assert_eq!(
            (o.max_tokens, o.truncation, o.quantize),
            (Some(64), Truncation::DropSteps, Some(GgmlType::Q8_0))
        );
        // Absent or 0: every thread the build has.
        assert_eq!(o.threads, 0);
        assert_eq!(parse_options(&json!({"threads": 3})).unwrap().threads, 3);
        assert_eq!(parse_options(&json!({"threads": 0})).unwrap().threads, 0);
        assert_eq!(
            parse_options(&json!({"threads": null, "maxTokens": null})).unwrap(),
            ScorerOptions {
                backend: Backend::Cpu,
                ..ScorerOptions::default()
            }
        );
        // The package picks the engine after the load.
        assert_eq!(
            parse_options(&json!({"backend": "webgpu"}))
                .unwrap()
                .backend,
            Backend::Cpu
        );
        for bad in [
            json!({"max_tokens": 5}),
            json!({"maxToken": 5}),
            json!({"threads": "2"}),
            json!({"family": "nope"}),
            json!({"maxTokens": 0}),
            json!({"maxTokens": 1.5}),
            json!({"truncation": "cut"}),
            json!(3),
        ] {
            assert_eq!(
                parse_options(&bad).unwrap_err().code,
                Code::InvalidArgument,
                "{bad}"
            );
        }
    }

    #[test]
    fn hf_files_load_and_report_their_sizes() {
        let files = fixture_files("skywork-prm-tiny");
        let total: usize = files.values().map(Vec::len).sum();
        let loaded = load_hf(files, &parse_options(&Value::Null).unwrap()).unwrap();
        let info = loaded.info();
        assert_eq!(
            (info.family, info.format, info.model_bytes, info.hidden_size),
            ("value-head", "hf", total, 32)
        );
    }

    /// A value head as `stepscore train` writes it: `[1, width]` weight, `[1]` bias.
    fn head_file(w: &[f32], b: f32) -> Vec<u8> {
        use safetensors::tensor::{serialize, Dtype, TensorView};
        let wb: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bb = b.to_le_bytes().to_vec();
        let views = vec![
            (
                "v_head.summary.weight",
                TensorView::new(Dtype::F32, vec![1, w.len()], &wb).unwrap(),
            ),
            (
                "v_head.summary.bias",
                TensorView::new(Dtype::F32, vec![1], &bb).unwrap(),
            ),
        ];
        serialize(views, None).unwrap()
    }

    #[test]
    fn a_catalog_entry_loads_with_the_core_head_and_its_pins_are_checked() {
        let options = parse_options(&Value::Null).unwrap();
        let unknown = load_catalog(vec![0; 8], "stepscore-prm-smolm2", &options).unwrap_err();
        assert_eq!(unknown.code, Code::InvalidArgument);
        assert!(
            unknown.message.contains("stepscore-prm-smollm2"),
            "{}",
            unknown.message
        );
        let short = load_catalog(vec![0; 8], "stepscore-prm-smollm2", &options).unwrap_err();
        assert_eq!(short.code, Code::ModelInvalid);
        assert!(short.message.contains("98362432"), "{}", short.message);
        let Some(path) = stepscore::testing::find_smollm2_gguf() else {
            eprintln!("SKIPPED: SmolLM2 GGUF not in the cache (run `stepscore fetch`)");
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        let prm = load_catalog(bytes.clone(), "stepscore-prm-smollm2", &options).unwrap();
        // The embedded SmolLM2 head ships its threshold; the backbone entry has no head.
        assert_eq!(
            (prm.info().family, prm.info().threshold),
            ("value-head", Some(0.607107))
        );
        let backbone = load_catalog(
            bytes,
            "smollm2-135m",
            &parse_options(&serde_json::json!({"family": "confidence"})).unwrap(),
        )
        .unwrap();
        assert_eq!(backbone.info().family, "confidence");
    }

    #[test]
    fn gguf_plus_head_file_scores_like_the_core_and_refuses_bad_heads_by_name() {
        let Some(path) = stepscore::testing::find_smollm2_gguf() else {
            eprintln!("SKIPPED: SmolLM2 GGUF not in the cache (run `stepscore fetch`)");
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        let options = parse_options(&Value::Null).unwrap();
        let score = |scorer: &Scorer| {
            scorer
                .score_steps("What is 12 * 3?", &["12 * 3 = 36.", "So 36."])
                .unwrap()
                .step_scores
        };

        // A zero weight makes every step sigmoid(bias), whatever the hidden state.
        let zero = head_file(&[0.0; 576], 0.7);
        let loaded = load_gguf_with_head(
            bytes.clone(),
            "smol.gguf",
            &zero,
            "head.safetensors",
            &options,
        )
        .unwrap();
        let info = loaded.info();
        assert_eq!(
            (info.family, info.model_bytes),
            ("value-head", bytes.len() + zero.len())
        );
        let want = 1.0 / (1.0 + (-0.7f64).exp());
        for s in score(&loaded.scorer) {
            assert!(
                (s.unwrap() - want).abs() < 1e-6,
                "{s:?} vs sigmoid(0.7) = {want}"
            );
        }

        // A real head: the binding's scorer equals the core's on the same bytes.
        let w: Vec<f32> = (0..576)
            .map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.01)
            .collect();
        let head = head_file(&w, -0.2);
        let ours = load_gguf_with_head(
            bytes.clone(),
            "smol.gguf",
            &head,
            "head.safetensors",
            &options,
        )
        .unwrap();
        let core = Scorer::from_gguf(
            GgufModel::parse(ModelBytes::from_vec(bytes.clone()), "smol.gguf").unwrap(),
            &HeadSource::Loaded(HeadFile::from_bytes(&head, "head.safetensors").unwrap()),
            &options,
        )
        .unwrap();
        assert_eq!(score(&ours.scorer), score(&core));

        let narrow = head_file(&[0.5; 7], 0.0);
        let e = load_gguf_with_head(
            bytes.clone(),
            "smol.gguf",
            &narrow,
            "mine.safetensors",
            &options,
        )
        .unwrap_err();
        assert_eq!(e.code, Code::ModelInvalid, "{}", e.message);
        assert!(
            e.message.contains("v_head.summary.weight") && e.message.contains("[1, 7]"),
            "{}",
            e.message
        );
        let e = load_gguf_with_head(
            bytes,
            "smol.gguf",
            b"not safetensors",
            "mine.safetensors",
            &options,
        )
        .unwrap_err();
        assert_eq!(e.code, Code::ModelInvalid);
        assert!(e.message.contains("mine.safetensors"), "{}", e.message);
    }

    #[test]
    fn broken_files_get_their_codes() {
        let mut files = fixture_files("skywork-prm-tiny");
        files.insert("tokenizer.json".into(), b"{not json".to_vec());
        assert_eq!(
            load_hf(files, &ScorerOptions::default()).unwrap_err().code,
            Code::TokenizerInvalid
        );

        let mut files = fixture_files("skywork-prm-tiny");
        let st = files.get_mut("model.safetensors").unwrap();
        st.truncate(st.len() / 2);
        let e = load_hf(files, &ScorerOptions::default()).unwrap_err();
        assert_eq!(e.code, Code::ModelInvalid, "{}", e.message);
        assert!(e.message.contains("model.safetensors"), "{}", e.message);

        let e = load_gguf(
            b"GGUF\x03\x00\x00\x00garbage".to_vec(),
            "bad.gguf",
            &ScorerOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.code, Code::ModelInvalid);
        assert!(e.message.contains("bad.gguf"), "{}", e.message);
    }
}
