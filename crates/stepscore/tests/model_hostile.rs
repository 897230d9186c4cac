//! Broken checkpoints and bad calls: every one must give an error that names
//! the culprit (key, tensor, file, token), never a panic.

use proptest::prelude::*;
use safetensors::tensor::{serialize, Dtype, SafeTensors, TensorView};
use std::collections::BTreeMap;
use std::path::PathBuf;
use stepscore::engine::{HfCheckpoint, ModelConfig, Transformer};

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/models")
        .join(name)
}

fn files_of(name: &str) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(fixture_dir(name))
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn build(files: BTreeMap<String, Vec<u8>>) -> Result<Transformer, String> {
    HfCheckpoint::from_bytes(files)
        .and_then(|c| c.transformer())
        .map_err(|e| e.to_string())
}

fn build_err(files: BTreeMap<String, Vec<u8>>) -> String {
    match build(files) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn assert_mentions(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "error `{err}` should mention `{p}`");
    }
}

/// The Llama fixture's config with `edit` applied, parsed.
fn config_err(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let text = std::fs::read_to_string(fixture_dir("llama-tiny-bf16").join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    ModelConfig::from_json_str(&v.to_string())
        .unwrap_err()
        .to_string()
}

#[test]
fn fixture_config_parses_to_the_expected_values() {
    let text =
        std::fs::read_to_string(fixture_dir("qwen2-tiny-f32-sharded").join("config.json")).unwrap();
    let c = ModelConfig::from_json_str(&text).unwrap();
    assert_eq!(c.arch, stepscore::engine::Arch::Qwen2);
    assert_eq!(
        (c.hidden_size, c.n_heads, c.n_kv_heads, c.head_dim),
        (64, 4, 2, 16)
    );
    assert_eq!(
        (c.n_layers, c.vocab_size, c.intermediate_size),
        (2, 300, 128)
    );
    assert!(c.attention_bias && !c.o_bias && !c.tie_word_embeddings);
    assert_eq!(c.rope_theta, 1e6);
    assert_eq!(c.sliding_window, None);
}

#[test]
fn bad_configs_name_the_key() {
    let e = config_err(|c| {
        c.as_object_mut().unwrap().remove("hidden_size");
    });
    assert_mentions(&e, &["config.json", "hidden_size", "missing"]);

    // 6 heads over 2 kv heads is fine, but 64 is not divisible by 6.
    let e = config_err(|c| c["num_attention_heads"] = 6.into());
    assert_mentions(&e, &["hidden_size", "num_attention_heads"]);

    let e = config_err(|c| c["num_key_value_heads"] = 3.into());
    assert_mentions(&e, &["num_key_value_heads"]);

    let e = config_err(|c| c["hidden_size"] = "64".into());
    assert_mentions(&e, &["hidden_size", "integer"]);

    let e = config_err(|c| c["vocab_size"] = 0.into());
    assert_mentions(&e, &["vocab_size", "positive"]);

    let e = config_err(|c| c["hidden_size"] = (1u64 << 40).into());
    assert_mentions(&e, &["hidden_size", "maximum"]);

    let e =
        config_err(|c| c["rope_scaling"] = serde_json::json!({"rope_type": "yarn", "factor": 4.0}));
    assert_mentions(&e, &["rope_scaling", "yarn"]);

    let e = config_err(|c| {
        c["rope_scaling"] = serde_json::json!({"rope_type": "llama3", "factor": 8.0})
    });
    assert_mentions(&e, &["low_freq_factor"]);

    let e = config_err(|c| c["hidden_act"] = "gelu".into());
    assert_mentions(&e, &["hidden_act", "gelu"]);

    let e = config_err(|c| c["rms_norm_eps"] = (-1.0).into());
    assert_mentions(&e, &["rms_norm_eps"]);

    let e = config_err(|c| c["model_type"] = "gpt2".into());
    assert_mentions(&e, &["model_type", "gpt2"]);

    let e = config_err(|c| {
        c["model_type"] = "qwen2".into();
        c["use_sliding_window"] = true.into();
    });
    assert_mentions(&e, &["use_sliding_window"]);

    let e = config_err(|c| c["architectures"] = 3.into());
    assert_mentions(&e, &["architectures"]);

    for garbage in ["{not json", "[1, 2]", "", "null"] {
        let e = ModelConfig::from_json_str(garbage).unwrap_err().to_string();
        assert_mentions(&e, &["config.json"]);
    }
}

#[test]
fn model_type_may_be_inferred_from_architectures() {
    let text =
        std::fs::read_to_string(fixture_dir("mistral-tiny-f16").join("config.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object_mut().unwrap().remove("model_type");
    let c = ModelConfig::from_json_str(&v.to_string()).unwrap();
    assert_eq!(c.arch, stepscore::engine::Arch::Mistral);
    assert_eq!(c.sliding_window, Some(4));
}

/// Re-serializes the Llama fixture's single file after `edit` on its tensors.
fn llama_with(
    edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>),
) -> BTreeMap<String, Vec<u8>> {
    let mut files = files_of("llama-tiny-bf16");
    let st = SafeTensors::deserialize(&files["model.safetensors"]).unwrap();
    let mut tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    edit(&mut tensors);
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let bytes = serialize(views, None).unwrap();
    files.insert("model.safetensors".into(), bytes);
    files
}

#[test]
fn reserialized_fixture_still_loads() {
    // Guards the helper: with no edit the rebuilt file must load.
    assert!(build(llama_with(|_| {})).is_ok());
}

#[test]
fn missing_tensor_is_named() {
    let files = llama_with(|t| t.retain(|(n, ..)| n != "model.layers.1.mlp.up_proj.weight"));
    assert_mentions(
        &build_err(files),
        &["model.layers.1.mlp.up_proj.weight", "missing"],
    );
}

#[test]
fn wrong_shape_names_tensor_and_both_shapes() {
    let files = llama_with(|t| {
        for (n, _, shape, bytes) in t.iter_mut() {
            if n == "model.norm.weight" {
                *shape = vec![32];
                bytes.truncate(64);
            }
        }
    });
    assert_mentions(&build_err(files), &["model.norm.weight", "[32]", "[64]"]);

    // A config that disagrees with the weights: every mlp matrix is 128 wide.
    let mut files = files_of("llama-tiny-bf16");
    let mut cfg: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
    cfg["intermediate_size"] = 100.into();
    files.insert("config.json".into(), cfg.to_string().into_bytes());
    assert_mentions(
        &build_err(files),
        &[
            "model.layers.0.mlp.gate_proj.weight",
            "[128, 64]",
            "[100, 64]",
        ],
    );
}

#[test]
fn unsupported_dtype_is_named() {
    let files = llama_with(|t| {
        // I16 has BF16's width, so only the dtype changes.
        for (n, dtype, ..) in t.iter_mut() {
            if n == "model.norm.weight" {
                *dtype = Dtype::I16;
            }
        }
    });
    assert_mentions(&build_err(files), &["model.norm.weight", "I16"]);
}

#[test]
fn truncated_safetensors_is_an_error_naming_the_file() {
    let full = files_of("llama-tiny-bf16");
    let len = full["model.safetensors"].len();
    for cut in [0, 5, 8, 100, len / 2, len - 1] {
        let mut files = full.clone();
        files.get_mut("model.safetensors").unwrap().truncate(cut);
        assert_mentions(&build_err(files), &["model.safetensors"]);
    }
}

#[test]
fn missing_files_are_named() {
    let mut files = files_of("llama-tiny-bf16");
    files.remove("model.safetensors");
    assert_mentions(&build_err(files), &["model.safetensors", "not provided"]);

    let mut files = files_of("llama-tiny-bf16");
    files.remove("config.json");
    assert_mentions(&build_err(files), &["config.json"]);

    let e = HfCheckpoint::open_dir(fixture_dir("no-such-model"))
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["no-such-model", "config.json"]);
}

fn qwen_with_index(edit: impl FnOnce(&mut serde_json::Value)) -> BTreeMap<String, Vec<u8>> {
    let mut files = files_of("qwen2-tiny-f32-sharded");
    let mut idx: serde_json::Value =
        serde_json::from_slice(&files["model.safetensors.index.json"]).unwrap();
    edit(&mut idx);
    files.insert(
        "model.safetensors.index.json".into(),
        idx.to_string().into_bytes(),
    );
    files
}

#[test]
fn hostile_shard_index_is_rejected() {
    let e = build_err(qwen_with_index(|i| {
        i["weight_map"]["model.norm.weight"] = "../../etc/passwd".into()
    }));
    assert_mentions(&e, &["../../etc/passwd", "plain file name"]);

    let e = build_err(qwen_with_index(|i| {
        i["weight_map"]["model.norm.weight"] = "model-00003.safetensors".into()
    }));
    assert_mentions(&e, &["model-00003.safetensors", "not provided"]);

    // A tensor listed in the wrong shard.
    let e = build_err(qwen_with_index(|i| {
        let first = i["weight_map"]["model.embed_tokens.weight"]
            .as_str()
            .unwrap()
            .to_string();
        let other = if first.contains("00001") {
            "model-00002-of-00002.safetensors"
        } else {
            "model-00001-of-00002.safetensors"
        };
        i["weight_map"]["model.embed_tokens.weight"] = other.into();
    }));
    assert_mentions(&e, &["model.embed_tokens.weight"]);

    let e = build_err(qwen_with_index(|i| i["weight_map"] = serde_json::json!({})));
    assert_mentions(&e, &["weight_map"]);

    let mut files = files_of("qwen2-tiny-f32-sharded");
    files.insert(
        "model.safetensors.index.json".into(),
        b"{\"weight_map\": [".to_vec(),
    );
    assert_mentions(&build_err(files), &["model.safetensors.index.json", "JSON"]);
}

#[test]
fn bad_forward_calls_are_errors() {
    let model = HfCheckpoint::open_dir(fixture_dir("llama-tiny-bf16"))
        .unwrap()
        .transformer()
        .unwrap();
    let e = model.forward(&[1, 2, 300], None).unwrap_err().to_string();
    assert_mentions(&e, &["300", "vocabulary"]);

    let too_long: Vec<u32> = (0..65).collect();
    let e = model.forward(&too_long, None).unwrap_err().to_string();
    assert_mentions(&e, &["65", "max_position_embeddings"]);

    // The limit counts cached positions too, and a refused call leaves the cache alone.
    let mut cache = model.new_cache();
    model.forward(&too_long[..60], Some(&mut cache)).unwrap();
    assert!(model.forward(&too_long[..5], Some(&mut cache)).is_err());
    assert_eq!(cache.len(), 60);
    assert!(model.forward(&too_long[..4], Some(&mut cache)).is_ok());
    assert_eq!(cache.len(), 64);

    let empty = model.forward(&[], None).unwrap();
    assert_eq!(empty.n_tokens, 0);

    let h = model.forward(&[1, 2], None).unwrap();
    let e = model
        .logits_for(&h.data, Some(&[5, 300]))
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["300"]);
    assert!(model.logits_for(&h.data[..10], None).is_err());

    // A cache made for another model shape is refused. One layer of the
    // fixture loads as a valid 1-layer model (the other layer's tensors are
    // simply unused extras).
    let mut files = files_of("llama-tiny-bf16");
    let mut cfg: serde_json::Value = serde_json::from_slice(&files["config.json"]).unwrap();
    cfg["num_hidden_layers"] = 1.into();
    files.insert("config.json".into(), cfg.to_string().into_bytes());
    let shallow = build(files).unwrap();
    let mut foreign = shallow.new_cache();
    let e = model
        .forward(&[1], Some(&mut foreign))
        .unwrap_err()
        .to_string();
    assert_mentions(&e, &["cache"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Corrupting any byte of the header region or cutting the file anywhere
    /// gives an error or (if the change is benign) a model, never a panic.
    #[test]
    fn corrupted_files_never_panic(pos in 0usize..4096, byte in any::<u8>(), cut in proptest::option::of(0usize..200_000)) {
        let mut files = files_of("mistral-tiny-f16");
        let data = files.get_mut("model.safetensors").unwrap();
        let p = pos % data.len();
        data[p] = byte;
        if let Some(c) = cut {
            data.truncate(c.min(data.len()));
        }
        let _ = build(files);
    }

    #[test]
    fn arbitrary_config_text_never_panics(text in ".{0,200}") {
        let _ = ModelConfig::from_json_str(&text);
    }
}

/// Issue 23, items 10 and 16: a GGUF's hyper-parameters are checked against
/// their meaning (`rms_norm_eps = +inf` passed "positive" and scored every
/// step the same), and the errors name the GGUF's own keys and file, never
/// config.json.
#[test]
fn gguf_hyper_parameters_are_checked_and_named_by_their_keys() {
    use stepscore::engine::testing::GgufWriter;
    use stepscore::engine::{GgufModel, GgufValue, ModelBytes};
    let config = |edit: &dyn Fn(&mut GgufWriter)| -> Result<ModelConfig, String> {
        let mut w = GgufWriter::new();
        w.kv("general.architecture", GgufValue::String("llama".into()))
            .kv("llama.embedding_length", GgufValue::U32(32))
            .kv("llama.feed_forward_length", GgufValue::U32(64))
            .kv("llama.block_count", GgufValue::U32(2))
            .kv("llama.attention.head_count", GgufValue::U32(4))
            .kv("llama.context_length", GgufValue::U32(512))
            .kv("llama.vocab_size", GgufValue::U32(100));
        edit(&mut w);
        let bytes = w.into_bytes().unwrap();
        GgufModel::parse(ModelBytes::from_vec(bytes), "m.gguf")
            .and_then(|m| m.config())
            .map_err(|e| e.to_string())
    };
    let eps = |x: f32| {
        move |w: &mut GgufWriter| {
            w.kv("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(x));
        }
    };
    assert!(config(&eps(1e-5)).is_ok());
    for bad in [f32::INFINITY, f32::NAN, 0.0, -1e-5, 1.0] {
        let e = config(&eps(bad)).unwrap_err();
        assert_mentions(&e, &["m.gguf", "llama.attention.layer_norm_rms_epsilon"]);
        assert!(!e.contains("config.json"), "{e}");
    }
    let e = config(&|w: &mut GgufWriter| {
        eps(1e-5)(w);
        w.kv("llama.rope.freq_base", GgufValue::F32(f32::INFINITY));
    })
    .unwrap_err();
    assert_mentions(&e, &["m.gguf", "llama.rope.freq_base", "finite"]);
    let e = config(&|w: &mut GgufWriter| {
        eps(1e-5)(w);
        w.kv("llama.attention.head_count_kv", GgufValue::U32(3));
    })
    .unwrap_err();
    assert_mentions(
        &e,
        &[
            "llama.attention.head_count",
            "llama.attention.head_count_kv",
        ],
    );
    assert!(!e.contains("config.json"), "{e}");
    let e = config(&|w: &mut GgufWriter| {
        eps(1e-5)(w);
        w.kv("llama.attention.head_count_kv", GgufValue::U32(0));
    })
    .unwrap_err();
    assert_mentions(&e, &["`llama.attention.head_count_kv` must be positive"]);
}
