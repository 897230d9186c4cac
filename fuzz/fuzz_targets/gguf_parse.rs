//! GGUF header parser, typed metadata getters, tensor slicing and the GGUF
//! tokenizer builder: any input may be rejected, none may panic, hang or
//! allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscore::engine::GgufFile;
use stepscore::engine::Tokenizer;

// Keys real loaders read, so the getters see both present and mistyped values.
const KEYS: &[&str] = &[
    "general.architecture",
    "general.alignment",
    "llama.context_length",
    "llama.embedding_length",
    "llama.attention.layer_norm_rms_epsilon",
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.bos_token_id",
];

fuzz_target!(|data: &[u8]| {
    let Ok(g) = GgufFile::parse(data, "fuzz.gguf") else {
        return;
    };
    let _ = g.architecture();
    for key in KEYS
        .iter()
        .copied()
        .chain(g.metadata.iter().map(|(k, _)| k.as_str()))
    {
        let _ = g.get(key);
        let _ = g.opt_u32(key);
        let _ = g.opt_u64(key);
        let _ = g.opt_i64(key);
        let _ = g.opt_f32(key);
        let _ = g.opt_bool(key);
        let _ = g.opt_str(key);
        let _ = g.opt_array(key);
        let _ = g.opt_str_array(key);
        let _ = g.opt_i32_array(key);
        let _ = g.opt_f32_array(key);
    }
    for info in &g.tensors {
        let _ = info.row_len();
        let _ = info.n_rows();
        if let Ok(bytes) = g.tensor_data(data, info) {
            // The slice must lie inside the input (checked by the type system)
            // and start at or after the data section.
            let start = bytes.as_ptr() as usize - data.as_ptr() as usize;
            assert!(start as u64 >= g.data_offset || bytes.is_empty());
        }
        let _ = g.tensor(&info.name);
    }
    if let Ok(tok) = Tokenizer::from_gguf(&g) {
        // A tokenizer that built must also encode and decode without panicking.
        if let Ok(ids) = tok.encode("Step 1: 12 + 30 = 42.\n", true) {
            let _ = tok.decode(&ids, false);
        }
    }
});
