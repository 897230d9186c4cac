//! safetensors header/offset validation, dtype conversion and the decoder
//! builder: the first byte picks a fixed `config.json`, the rest is
//! `model.safetensors`. Any input may be rejected; none may panic.
#![no_main]

#[path = "../src/configs.rs"]
mod configs;

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use stepscore::engine::HfCheckpoint;

fuzz_target!(|data: &[u8]| {
    let (config, weights) = configs::split(data);
    let mut files = BTreeMap::new();
    files.insert("config.json".to_string(), config.as_bytes().to_vec());
    files.insert("model.safetensors".to_string(), weights.to_vec());
    let Ok(ckpt) = HfCheckpoint::from_bytes(files) else {
        return;
    };
    let names: Vec<String> = ckpt.tensor_names().map(str::to_string).collect();
    for name in &names {
        let shape = ckpt.tensor_shape(name).map(<[usize]>::to_vec);
        if let Ok(t) = ckpt.tensor_f32(name) {
            // Conversion must honour the declared shape.
            assert_eq!(Some(&t.shape), shape.as_ref(), "tensor `{name}`");
            let n: usize = t.shape.iter().product();
            assert_eq!(t.data.len(), n, "tensor `{name}`");
        }
    }
    let _ = ckpt.transformer();
});
