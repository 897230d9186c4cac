//! Our GGUF tokenizer against llama.cpp's ids (tests/fixtures/tokenizer/*.json,
//! written by scripts/reference/tokenizer_reference.py with llama-cpp-python, special
//! tokens parsed, no BOS). Each test is skipped, with the reason printed, when
//! its vocabulary file is not available.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use stepscore::engine::{GgufFile, ModelBytes, Tokenizer};
use stepscore::testing::find_smollm2_gguf;

#[derive(Deserialize)]
struct Fixture {
    model_file: String,
    add_bos: bool,
    parse_special: bool,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
}

fn fixture(name: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tokenizer")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn test_data_model(file: &str) -> Option<PathBuf> {
    let root = std::env::var_os("STEPSCORE_TEST_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/test-data")
        });
    let p = root.join("llama.cpp-models").join(file);
    p.is_file().then_some(p)
}

fn load(path: &Path) -> Tokenizer {
    let bytes = ModelBytes::open(path).unwrap();
    let gguf = GgufFile::parse(bytes.as_slice(), &path.display().to_string()).unwrap();
    Tokenizer::from_gguf(&gguf).unwrap()
}

/// Ids must match exactly; offsets must tile the text in order, on
/// character boundaries, with special tokens covering their own text.
fn check(tok: &Tokenizer, fx: &Fixture) {
    assert!(!fx.add_bos && fx.parse_special);
    let mut failures = Vec::new();
    for case in &fx.cases {
        let enc = tok.encode_with_offsets(&case.text, false).unwrap();
        if enc.ids != case.ids {
            failures.push(format!(
                "{:?}\n   want {:?}\n    got {:?}",
                case.text, case.ids, enc.ids
            ));
            continue;
        }
        let mut covered = 0;
        for &(s, e) in &enc.offsets {
            assert!(
                s <= e && e <= case.text.len(),
                "{:?}: offset ({s}, {e})",
                case.text
            );
            assert!(case.text.is_char_boundary(s) && case.text.is_char_boundary(e));
            // Tokens holding pieces of one character share its range.
            assert!(s <= covered, "{:?}: gap before ({s}, {e})", case.text);
            covered = covered.max(e);
        }
        assert_eq!(
            covered,
            case.text.len(),
            "{:?}: offsets do not reach the end",
            case.text
        );
        assert_eq!(tok.decode(&enc.ids, false).unwrap(), case.text);
    }
    eprintln!(
        "{}: {} cases, {} mismatches",
        fx.model_file,
        fx.cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        fx.cases.len(),
        failures.join("\n")
    );
}

#[test]
fn smollm2_matches_llama_cpp() {
    let Some(path) = find_smollm2_gguf() else {
        eprintln!("SKIPPED: SmolLM2 GGUF not found (set STEPSCORE_SMOLLM2_GGUF or put it in the stepscore cache dir)");
        return;
    };
    let tok = load(&path);
    assert_eq!(
        (tok.vocab_size(), tok.bos_id(), tok.eos_id()),
        (49152, Some(1), Some(2))
    );
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(1));
    assert_eq!(tok.id_to_token(2).as_deref(), Some("<|im_end|>"));
    // add_bos_token is false for SmolLM2, so add_special changes nothing.
    assert_eq!(
        tok.encode("Hi", true).unwrap(),
        tok.encode("Hi", false).unwrap()
    );
    check(&tok, &fixture("smollm2.json"));
}

#[test]
fn qwen2_matches_llama_cpp() {
    let Some(path) = test_data_model("ggml-vocab-qwen2.gguf") else {
        eprintln!("SKIPPED: ggml-vocab-qwen2.gguf not found (run scripts/test/fetch-test-data.sh)");
        return;
    };
    check(&load(&path), &fixture("qwen2.json"));
}

#[test]
fn llama_bpe_matches_llama_cpp() {
    let Some(path) = test_data_model("ggml-vocab-llama-bpe.gguf") else {
        eprintln!(
            "SKIPPED: ggml-vocab-llama-bpe.gguf not found (run scripts/test/fetch-test-data.sh)"
        );
        return;
    };
    let tok = load(&path);
    // Llama 3 adds BOS (<|begin_of_text|>) when asked for special tokens.
    let bos = tok.bos_id().unwrap();
    assert_eq!(tok.id_to_token(bos).as_deref(), Some("<|begin_of_text|>"));
    let with = tok.encode_with_offsets("Hi", true).unwrap();
    assert_eq!(with.ids[0], bos);
    assert_eq!(with.offsets[0], (0, 0));
    assert_eq!(&with.ids[1..], tok.encode("Hi", false).unwrap());
    check(&tok, &fixture("llama-bpe.json"));
}

/// The real Qwen2.5 vocabulary (151,665 tokens with the chat, FIM and tool
/// specials), from the Qwen2.5-Coder-0.5B GGUF: a few hundred strings aimed at
/// its pre-tokenizer (digits one by one, whitespace runs, contractions,
/// scripts, code) and special tokens.
#[test]
fn qwen25_coder_matches_llama_cpp() {
    let Some(path) = stepscore::testing::find_catalog_model("qwen2.5-coder-0.5b") else {
        eprintln!("SKIPPED: Qwen2.5-Coder-0.5B GGUF not cached (run `stepscore fetch qwen2.5-coder-0.5b`)");
        return;
    };
    let tok = load(&path);
    assert_eq!(tok.token_to_id("<|im_start|>"), Some(151644));
    assert_eq!(tok.eos_id(), Some(151645));
    // add_bos_token is false for Qwen2.5.
    assert_eq!(
        tok.encode("Hi", true).unwrap(),
        tok.encode("Hi", false).unwrap()
    );
    let fx = fixture("qwen2.5-coder.json");
    assert!(fx.cases.len() >= 300, "{} cases", fx.cases.len());
    check(&tok, &fx);
}
