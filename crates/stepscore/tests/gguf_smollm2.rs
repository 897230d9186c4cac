//! Parses the real SmolLM2-135M-Instruct Q4_1 GGUF when it is cached
//! (`STEPSCORE_SMOLLM2_GGUF`, or the stepscore cache directory); skipped with
//! a printed reason otherwise. Expected values come from the model card
//! (Llama architecture, 30 layers, d=576, 9/3 heads, vocab 49152).

use std::collections::BTreeMap;
use stepscore::engine::{GgmlType, GgufFile, ModelBytes};
use stepscore::testing::find_smollm2_gguf;

#[test]
fn parses_smollm2_q4_1() {
    let Some(path) = find_smollm2_gguf() else {
        eprintln!(
            "SKIPPED: SmolLM2 GGUF not found (set STEPSCORE_SMOLLM2_GGUF or run `stepscore fetch smollm2-135m`)"
        );
        return;
    };
    let bytes = ModelBytes::open(&path).unwrap();
    let f = GgufFile::parse(bytes.as_slice(), &path.display().to_string()).unwrap();
    eprintln!(
        "{}: GGUF v{}, {} keys, {} tensors, data at {}",
        path.display(),
        f.version,
        f.metadata.len(),
        f.tensors.len(),
        f.data_offset
    );
    for (k, v) in &f.metadata {
        eprintln!("  {k} = {v}");
    }
    let mut types: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &f.tensors {
        *types.entry(t.ggml_type.name()).or_default() += 1;
    }
    eprintln!("  tensor types: {types:?}");
    for t in f.tensors.iter().take(12) {
        eprintln!("  {} {:?} {}", t.name, t.dims, t.ggml_type.name());
    }

    assert_eq!(f.architecture().unwrap(), "llama");
    assert_eq!(f.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(f.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(f.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(f.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(f.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(
        f.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );

    // 30 blocks x 9 tensors + token embedding + output norm (tied output).
    assert_eq!(f.tensors.len(), 30 * 9 + 2);
    let emb = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        emb.dims,
        [576, 49152],
        "ne[0] is the row length (the embedding width)"
    );
    let q = f.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(
        (q.dims.as_slice(), q.ggml_type),
        (&[576u64, 576][..], GgmlType::Q4_1)
    );
    let k = f.tensor("blk.0.attn_k.weight").unwrap();
    assert_eq!(k.dims, [576, 192], "3 kv heads x 64");
    let norm = f.tensor("blk.0.attn_norm.weight").unwrap();
    assert_eq!(norm.ggml_type, GgmlType::F32);
    // The last tensor's data ends at (or just before) the end of the file.
    let end = f
        .tensors
        .iter()
        .map(|t| f.data_offset + t.offset + t.n_bytes)
        .max()
        .unwrap();
    assert!(end <= bytes.len() as u64 && bytes.len() as u64 - end < u64::from(f.alignment));
    for t in &f.tensors {
        assert_eq!(
            f.tensor_data(bytes.as_slice(), t).unwrap().len() as u64,
            t.n_bytes
        );
    }
    // The RMS norm weights are ordinary f32s near 1, not garbage.
    let w: Vec<f32> = f
        .tensor_data(bytes.as_slice(), norm)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert!(w.iter().all(|x| x.is_finite() && x.abs() < 100.0));
}
