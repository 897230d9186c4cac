//! Building a scorer from bytes: load options as JS passes them, and the two
//! model layouts (one GGUF file; a Hugging Face checkpoint's named files).
//! Plain Rust, so host tests cover it.

use std::collections::BTreeMap;
use std::rc::Rc;

use serde_json::Value;
use stepscore::format::ModelBytes;
use stepscore::ggml::GgmlType;
use stepscore::model::{GgufModel, HfCheckpoint};
use stepscore::prm::{Family, Scorer, ScorerOptions, Truncation};

use crate::error::{Error, Result};
use crate::output::ModelInfo;

/// `{ family?, maxTokens?, truncation?: 'error' | 'drop-steps', quantize?: 'q8_0' | 'q4_0' }`.
pub fn parse_options(v: &Value) -> Result<ScorerOptions> {
    let mut options = ScorerOptions {
        threads: 1,
        ..ScorerOptions::default()
    };
    let obj = match v {
        Value::Null => return Ok(options),
        Value::Object(obj) => obj,
        _ => return Err(Error::invalid_argument("load options must be an object")),
    };
    let text = |key: &str| -> Result<Option<&str>> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(Error::invalid_argument(format!(
                "option `{key}` must be a string"
            ))),
        }
    };
    if let Some(f) = text("family")? {
        options.family = Some(
            f.parse::<Family>()
                .map_err(|e| Error::invalid_argument(format!("option `family`: {e}")))?,
        );
    }
    match obj.get("maxTokens") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let n = v
                .as_u64()
                .filter(|&n| n >= 1)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "option `maxTokens` must be a positive integer, got {v}"
                    ))
                })?;
            options.max_tokens = Some(n);
        }
    }
    options.truncation = match text("truncation")? {
        None | Some("error") => Truncation::Error,
        Some("drop-steps") => Truncation::DropSteps,
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "option `truncation` must be 'error' or 'drop-steps', got '{other}'"
            )))
        }
    };
    options.quantize = match text("quantize")?.map(str::to_ascii_lowercase).as_deref() {
        None => None,
        Some("q8_0") => Some(GgmlType::Q8_0),
        Some("q4_0") => Some(GgmlType::Q4_0),
        Some(other) => {
            return Err(Error::invalid_argument(format!(
                "option `quantize` must be 'q8_0' or 'q4_0', got '{other}'"
            )))
        }
    };
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
        }
    }
}

/// Loads a GGUF file's bytes; `name` names it in messages.
pub fn load_gguf(bytes: Vec<u8>, name: &str, options: &ScorerOptions) -> Result<Loaded> {
    let model_bytes = bytes.len();
    let gguf = GgufModel::parse(ModelBytes::from_vec(bytes), name).map_err(Error::from_load)?;
    let scorer = Scorer::from_gguf(gguf, options).map_err(Error::from_load)?;
    Ok(Loaded {
        scorer: Rc::new(scorer),
        format: "gguf",
        model_bytes,
    })
}

/// Loads a Hugging Face checkpoint from its files by name: `config.json`,
/// `model.safetensors` (or the index and its shards), `tokenizer.json`, and
/// optionally `tokenizer_config.json`.
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
        assert_eq!(o.threads, 1);
        for bad in [
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
