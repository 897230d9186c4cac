//! The `config.json` texts the `safetensors_load` target pairs with fuzzed
//! weights. The first input byte picks one (modulo the count), so each seed
//! can carry the config its tensors were made for.

/// `(name, config.json text)`; index 0 is the micro config `gen_seeds` writes
/// hand-built weights for, the rest are the repo's tiny fixtures.
pub const CONFIGS: &[(&str, &str)] = &[
    ("micro", include_str!("../configs/micro.json")),
    (
        "skywork-prm-tiny",
        include_str!("../../tests/fixtures/prm/skywork-prm-tiny/config.json"),
    ),
    (
        "confidence-tiny",
        include_str!("../../tests/fixtures/prm/confidence-tiny/config.json"),
    ),
    (
        "rlhflow-tiny",
        include_str!("../../tests/fixtures/prm/rlhflow-tiny/config.json"),
    ),
    (
        "math-shepherd-tiny",
        include_str!("../../tests/fixtures/prm/math-shepherd-tiny/config.json"),
    ),
    (
        "qwen2-prm-tiny",
        include_str!("../../tests/fixtures/prm/qwen2-prm-tiny/config.json"),
    ),
    (
        "llama-tiny-bf16",
        include_str!("../../tests/fixtures/models/llama-tiny-bf16/config.json"),
    ),
    (
        "mistral-tiny-f16",
        include_str!("../../tests/fixtures/models/mistral-tiny-f16/config.json"),
    ),
];

/// Splits a fuzz input into (config text, safetensors bytes).
pub fn split(data: &[u8]) -> (&'static str, &[u8]) {
    match data.split_first() {
        Some((&sel, rest)) => (CONFIGS[sel as usize % CONFIGS.len()].1, rest),
        None => (CONFIGS[0].1, data),
    }
}
