//! Token-for-token agreement with llama.cpp's tokenizer test vectors
//! (vendor/llama.cpp/models/ggml-vocab-*.gguf{,.inp,.out}), read the way its
//! tests/test-tokenizer-0.cpp reads them: inputs separated by the line
//! `__ggml_vocab_test__`, one line of space-separated ids per input, encoded
//! with add_special=false. Fetch the files with scripts/test/fetch-test-data.sh;
//! without them the tests print why and pass.

use std::path::PathBuf;
use stepscore::engine::{GgufFile, ModelBytes, Tokenizer};

fn models_dir() -> Option<PathBuf> {
    let root = std::env::var_os("STEPSCORE_TEST_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/test-data")
        });
    let dir = root.join("llama.cpp-models");
    dir.is_dir().then_some(dir)
}

/// Inputs and expected ids, split exactly as test-tokenizer-0.cpp splits them.
fn read_cases(inp: &str, out: &str) -> Vec<(String, Vec<u32>)> {
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs: Vec<&str> = Vec::new();
    let mut rest = inp;
    while !rest.is_empty() {
        match rest.find(sep) {
            Some(i) => {
                inputs.push(&rest[..i]);
                rest = &rest[i + sep.len()..];
            }
            None => {
                inputs.push(rest);
                break;
            }
        }
    }
    let outputs: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map(|t| t.parse().expect("id in .out"))
                .collect()
        })
        .collect();
    assert_eq!(
        inputs.len(),
        outputs.len(),
        "input and output files have different numbers of tests"
    );
    inputs
        .into_iter()
        .map(str::to_string)
        .zip(outputs)
        .collect()
}

fn check_vocab(name: &str) {
    let Some(dir) = models_dir() else {
        eprintln!("SKIPPED {name}: no llama.cpp-models dir (run scripts/test/fetch-test-data.sh or set STEPSCORE_TEST_DATA)");
        return;
    };
    let gguf_path = dir.join(format!("ggml-vocab-{name}.gguf"));
    let read =
        |ext: &str| std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf{ext}")));
    let (Ok(inp), Ok(out)) = (read(".inp"), read(".out")) else {
        eprintln!("SKIPPED {name}: test vectors missing in {}", dir.display());
        return;
    };
    let bytes = ModelBytes::open(&gguf_path).unwrap();
    let gguf = GgufFile::parse(bytes.as_slice(), &gguf_path.display().to_string()).unwrap();
    let tok = Tokenizer::from_gguf(&gguf).unwrap();
    let cases = read_cases(&inp, &out);
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let got = tok.encode(text, false).unwrap();
        if &got != want {
            failures.push(format!("{text:?}\n   want {want:?}\n    got {got:?}"));
        }
        // Byte-level BPE is lossless.
        assert_eq!(
            &tok.decode(&got, false).unwrap(),
            text,
            "{name}: decode(encode(x)) != x"
        );
        // Offsets tile the input.
        let enc = tok.encode_with_offsets(text, false).unwrap();
        assert_eq!(enc.offsets.len(), enc.ids.len());
    }
    eprintln!(
        "{name}: {} cases, {} mismatches",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{name}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn qwen2_matches_llama_cpp() {
    check_vocab("qwen2");
}

#[test]
fn gpt2_matches_llama_cpp() {
    check_vocab("gpt-2");
}

#[test]
fn llama_bpe_matches_llama_cpp() {
    check_vocab("llama-bpe");
}

#[test]
fn llama_spm_matches_llama_cpp() {
    check_vocab("llama-spm");
}
