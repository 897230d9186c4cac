//! Writes the seed corpora for both fuzz targets.
//!
//! Small hand-built seeds go to `fuzz/seeds/<target>/` (committed); seeds made
//! from the repo's tiny safetensors fixtures (100-230 KB each) go to
//! `fuzz/corpus/safetensors_load/` (ignored by git). GGUF seeds carry no
//! `.gguf` extension because the repo ignores `*.gguf`.

#[path = "../configs.rs"]
mod configs;

use serde_json::json;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use stepscore::engine::{GgufArray, GgufFile, GgufValue};
use stepscore::engine::testing::GgufWriter;
use stepscore::engine::{GgmlType, HfCheckpoint, Tokenizer};

type BoxErr = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxErr> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gguf_dir = root.join("seeds/gguf_parse");
    let st_dir = root.join("seeds/safetensors_load");
    let corpus_dir = root.join("corpus/safetensors_load");
    for d in [&gguf_dir, &st_dir, &corpus_dir] {
        fs::create_dir_all(d)?;
    }

    for (name, bytes) in [
        ("minimal-v3", gguf_minimal(3)?),
        ("minimal-v2", gguf_minimal(2)?),
        ("all-types", gguf_all_types()?),
    ] {
        let g = GgufFile::parse(&bytes, name)?;
        for info in &g.tensors {
            g.tensor_data(&bytes, info)?;
        }
        write(&gguf_dir, name, &bytes)?;
    }
    let vocab = gguf_vocab()?;
    // A seed that is already rejected only tests the first check it fails.
    Tokenizer::from_gguf(&GgufFile::parse(&vocab, "tiny-vocab")?)?;
    write(&gguf_dir, "tiny-vocab", &vocab)?;

    for (name, dtype) in [("F32", "f32"), ("F16", "f16"), ("BF16", "bf16")] {
        let mut seed = vec![0u8]; // selector 0: configs/micro.json
        seed.extend(micro_safetensors(name)?);
        let (config, weights) = configs::split(&seed);
        let files = BTreeMap::from([
            ("config.json".to_string(), config.as_bytes().to_vec()),
            ("model.safetensors".to_string(), weights.to_vec()),
        ]);
        HfCheckpoint::from_bytes(files)?.transformer()?;
        write(&st_dir, &format!("micro-{dtype}"), &seed)?;
    }

    // Fixture weights, each prefixed by the selector of its own config.
    let fixtures = root.join("../tests/fixtures");
    for (sel, (name, _)) in configs::CONFIGS.iter().enumerate().skip(1) {
        let dir = ["prm", "models"]
            .iter()
            .map(|g| fixtures.join(g).join(name))
            .find(|d| d.is_dir())
            .ok_or_else(|| format!("fixture `{name}` not found under {}", fixtures.display()))?;
        let mut seed = vec![sel as u8];
        seed.extend(fs::read(dir.join("model.safetensors"))?);
        write(&corpus_dir, &format!("fixture-{name}"), &seed)?;
    }
    Ok(())
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), BoxErr> {
    let path = dir.join(name);
    fs::write(&path, bytes)?;
    println!("{} ({} bytes)", path.display(), bytes.len());
    Ok(())
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn gguf_minimal(version: u32) -> Result<Vec<u8>, BoxErr> {
    let mut w = GgufWriter::new();
    w.version(version)
        .kv("general.architecture", GgufValue::String("llama".into()))
        .kv("llama.context_length", GgufValue::U32(64));
    w.tensor(
        "token_embd.weight",
        &[4, 2],
        GgmlType::F32,
        f32_bytes(&[0.5, -1.0, 2.0, 0.0, 1.5, -0.25, 3.0, 4.0]),
    )?;
    Ok(w.to_bytes()?)
}

/// Every metadata value type, a nested array, a non-default alignment and
/// tensors of plain, block-quantized and k-quantized types.
fn gguf_all_types() -> Result<Vec<u8>, BoxErr> {
    let mut w = GgufWriter::new();
    w.kv("general.alignment", GgufValue::U32(64))
        .kv("general.architecture", GgufValue::String("qwen2".into()))
        .kv("k.u8", GgufValue::U8(7))
        .kv("k.i8", GgufValue::I8(-7))
        .kv("k.u16", GgufValue::U16(700))
        .kv("k.i16", GgufValue::I16(-700))
        .kv("k.u32", GgufValue::U32(70_000))
        .kv("k.i32", GgufValue::I32(-70_000))
        .kv("k.f32", GgufValue::F32(1e-6))
        .kv("k.bool", GgufValue::Bool(true))
        .kv("k.u64", GgufValue::U64(1 << 40))
        .kv("k.i64", GgufValue::I64(-(1 << 40)))
        .kv("k.f64", GgufValue::F64(0.125))
        .kv("k.a.u8", GgufValue::Array(GgufArray::U8(vec![1, 2, 3])))
        .kv("k.a.i8", GgufValue::Array(GgufArray::I8(vec![-1, 2])))
        .kv("k.a.u16", GgufValue::Array(GgufArray::U16(vec![1, 65535])))
        .kv("k.a.i16", GgufValue::Array(GgufArray::I16(vec![-1])))
        .kv("k.a.u32", GgufValue::Array(GgufArray::U32(vec![9, 8])))
        .kv("k.a.i32", GgufValue::Array(GgufArray::I32(vec![-9, 8])))
        .kv("k.a.f32", GgufValue::Array(GgufArray::F32(vec![0.5, -0.5])))
        .kv(
            "k.a.bool",
            GgufValue::Array(GgufArray::Bool(vec![true, false])),
        )
        .kv(
            "k.a.str",
            GgufValue::Array(GgufArray::String(vec!["a".into(), "é".into()])),
        )
        .kv("k.a.u64", GgufValue::Array(GgufArray::U64(vec![u64::MAX])))
        .kv("k.a.i64", GgufValue::Array(GgufArray::I64(vec![i64::MIN])))
        .kv("k.a.f64", GgufValue::Array(GgufArray::F64(vec![1.0])))
        .kv(
            "k.a.nested",
            GgufValue::Array(GgufArray::Array(vec![
                GgufArray::U8(vec![1]),
                GgufArray::String(vec!["x".into()]),
            ])),
        );
    w.tensor("t.f32", &[2, 3], GgmlType::F32, f32_bytes(&[1.0; 6]))?;
    // 1.0, -2.0 in IEEE half.
    w.tensor("t.f16", &[2], GgmlType::F16, vec![0x00, 0x3c, 0x00, 0xc0])?;
    // 1.0, 0.5 in bfloat16 (the high half of the f32).
    w.tensor("t.bf16", &[2], GgmlType::BF16, vec![0x80, 0x3f, 0x00, 0x3f])?;
    // Block types: sizes come from the crate's own table.
    for (name, ty, n) in [
        ("t.q4_0", GgmlType::Q4_0, 64u64),
        ("t.q8_0", GgmlType::Q8_0, 32),
        ("t.q4_k", GgmlType::Q4K, 256),
        ("t.q6_k", GgmlType::Q6K, 256),
    ] {
        let len = usize::try_from(ty.bytes_for(n)?)?;
        // Scales of 0x3c00 (1.0) sprinkled through arbitrary quants.
        let data: Vec<u8> = (0..len)
            .map(|i| if i % 2 == 0 { 0x00 } else { 0x3c })
            .collect();
        w.tensor(name, &[n], ty, data)?;
    }
    Ok(w.to_bytes()?)
}

/// GPT-2's byte -> printable char table, so byte tokens look like a real
/// byte-level BPE vocabulary.
fn byte_chars() -> Vec<char> {
    let keep =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256;
    (0..256u32)
        .map(|b| {
            let c = if keep(b) { b } else { next };
            if !keep(b) {
                next += 1;
            }
            char::from_u32(c).unwrap_or('?')
        })
        .collect()
}

/// A valid byte-level BPE vocabulary: 256 byte tokens, two merges and a pair
/// of control tokens.
fn gguf_vocab() -> Result<Vec<u8>, BoxErr> {
    let mut tokens: Vec<String> = byte_chars().into_iter().map(String::from).collect();
    tokens.extend(["he", "Ġt", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1i32; 258];
    types.extend([3, 3]);
    let mut w = GgufWriter::new();
    w.kv("general.architecture", GgufValue::String("qwen2".into()))
        .kv("tokenizer.ggml.model", GgufValue::String("gpt2".into()))
        .kv("tokenizer.ggml.pre", GgufValue::String("qwen2".into()))
        .kv(
            "tokenizer.ggml.tokens",
            GgufValue::Array(GgufArray::String(tokens)),
        )
        .kv(
            "tokenizer.ggml.token_type",
            GgufValue::Array(GgufArray::I32(types)),
        )
        .kv(
            "tokenizer.ggml.merges",
            GgufValue::Array(GgufArray::String(vec!["h e".into(), "Ġ t".into()])),
        )
        .kv("tokenizer.ggml.bos_token_id", GgufValue::U32(258))
        .kv("tokenizer.ggml.eos_token_id", GgufValue::U32(259))
        .kv("tokenizer.ggml.add_bos_token", GgufValue::Bool(true));
    Ok(w.to_bytes()?)
}

/// A complete checkpoint for `configs/micro.json` (hidden 4, 2 heads of 2,
/// 1 KV head, FFN 8, vocab 6, 1 layer, tied embeddings) in `dtype`.
fn micro_safetensors(dtype: &str) -> Result<Vec<u8>, BoxErr> {
    let shapes: &[(&str, &[usize])] = &[
        ("model.embed_tokens.weight", &[6, 4]),
        ("model.layers.0.input_layernorm.weight", &[4]),
        ("model.layers.0.self_attn.q_proj.weight", &[4, 4]),
        ("model.layers.0.self_attn.k_proj.weight", &[2, 4]),
        ("model.layers.0.self_attn.v_proj.weight", &[2, 4]),
        ("model.layers.0.self_attn.o_proj.weight", &[4, 4]),
        ("model.layers.0.post_attention_layernorm.weight", &[4]),
        ("model.layers.0.mlp.gate_proj.weight", &[8, 4]),
        ("model.layers.0.mlp.up_proj.weight", &[8, 4]),
        ("model.layers.0.mlp.down_proj.weight", &[4, 8]),
        ("model.norm.weight", &[4]),
    ];
    let width = if dtype == "F32" { 4 } else { 2 };
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut data = Vec::new();
    for (name, shape) in shapes {
        let n: usize = shape.iter().product();
        let start = data.len();
        for i in 0..n {
            // Small distinct values: i/16 - 0.25, exact in every dtype here.
            let x = i as f32 / 16.0 - 0.25;
            match dtype {
                "F32" => data.extend(x.to_le_bytes()),
                "BF16" => data.extend(((x.to_bits() >> 16) as u16).to_le_bytes()),
                _ => data.extend(f16_bits(x).to_le_bytes()),
            }
        }
        debug_assert_eq!(data.len() - start, n * width);
        header.insert(
            (*name).into(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut text = serde_json::to_string(&header)?;
    while text.len() % 8 != 0 {
        text.push(' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text.as_bytes());
    out.extend(data);
    Ok(out)
}

/// IEEE half bits for values that are exact in half precision (normal range,
/// at most 10 mantissa bits), which is all `micro_safetensors` writes.
fn f16_bits(x: f32) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let mant = ((b >> 13) & 0x3ff) as u16;
    sign | ((exp as u16) << 10) | mant
}
