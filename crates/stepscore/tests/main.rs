//! The crate's integration tests, one module per file, in one test binary:
//! each file was a binary of its own, and linking ~45 of them was ~200 s of a
//! fresh CI build (Cargo.toml: `autotests = false`). Run one file's tests with
//! `cargo test -p stepscore --test integration FILE::`.

#[cfg(feature = "gpu")]
mod gpu_support;
mod llama_cpp_support;

mod answer_extract;
mod answer_normalize;
mod architecture;
mod chat_template;
mod default_head;
mod digit_confidence;
mod features_data;
mod features_parity;
mod front_end_types;
mod generate;
mod gguf_reader;
mod gguf_smollm2;
mod gpu_float16;
mod gpu_kernels;
mod gpu_matmul;
mod gpu_model;
mod gpu_scorer;
mod head_kinds;
mod io_errors;
mod io_formats;
mod io_long_line;
mod io_props;
mod llama_cpp_golden;
mod llama_cpp_logits;
mod metrics_auroc_ece;
mod metrics_processbench;
mod model_forward;
mod model_hostile;
mod prm_data_v2;
mod prm_families;
mod public_api;
mod quant_matmul;
mod quant_reference;
mod reward_offsets;
mod reward_shaping;
mod search;
mod segment_auto;
mod segment_props;
mod select_props;
mod select_vote;
mod tokenizer_llama_vocab;
mod tokenizer_reference;
mod tokenizer_unit;
mod verdict;
