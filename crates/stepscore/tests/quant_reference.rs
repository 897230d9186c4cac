//! Bit-exactness against llama.cpp: fixtures in tests/fixtures/quant/ were
//! produced by scripts/reference/quant/ from llama.cpp's ggml-quants.c
//! (reference dequantizers, `quantize_row_q8_{0,1,K}_ref`, and ggml's
//! f16/bf16 conversions). Every f32 is compared by its bits.

use std::path::PathBuf;

use stepscore::engine::testing::{
    dequantize_row, f16_to_f32, f32_to_bf16, f32_to_f16, quantize_row_q8_0, quantize_row_q8_1,
    quantize_row_q8_k,
};
use stepscore::engine::GgmlType;
use stepscore::Error;

struct Fixture {
    name: String,
    kind: u32,
    ty: u32,
    n: usize,
    body: Vec<u8>,
}

fn load(name: &str) -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/quant")
        .join(format!("{name}.bin"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        bytes.len() >= 20 && &bytes[0..4] == b"SSQF",
        "{}: not a quant fixture",
        path.display()
    );
    let word = |i: usize| u32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!(word(1), 1, "{}: fixture version", path.display());
    Fixture {
        name: name.to_string(),
        kind: word(2),
        ty: word(3),
        n: word(4) as usize,
        body: bytes[20..].to_vec(),
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Fails listing the first mismatches by index, value and bits.
fn assert_bits_eq(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].to_bits() != want[i].to_bits())
        .collect();
    if !bad.is_empty() {
        let shown: Vec<String> = bad
            .iter()
            .take(8)
            .map(|&i| {
                format!(
                    "[{i}] got {} ({:#010x}) want {} ({:#010x})",
                    got[i],
                    got[i].to_bits(),
                    want[i],
                    want[i].to_bits()
                )
            })
            .collect();
        panic!(
            "{what}: {} of {} values differ from llama.cpp:\n{}",
            bad.len(),
            got.len(),
            shown.join("\n")
        );
    }
}

const DEQUANT_TYPES: [GgmlType; 13] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2K,
    GgmlType::Q3K,
    GgmlType::Q4K,
    GgmlType::Q5K,
    GgmlType::Q6K,
];

#[test]
fn dequantize_row_is_bit_exact_with_llama_cpp() {
    for ty in DEQUANT_TYPES {
        let fx = load(&format!("dequant_{}", ty.name()));
        assert_eq!((fx.kind, fx.ty), (1, ty.id()), "{}: header", fx.name);
        let raw_len = fx.n / ty.block_elems() * ty.block_bytes();
        let (raw, want) = fx.body.split_at(raw_len);
        let want = f32s(want);
        assert_eq!(want.len(), fx.n, "{}: size", fx.name);
        let mut got = vec![0.0f32; fx.n];
        dequantize_row(ty, raw, &mut got).unwrap();
        assert_bits_eq(&fx.name, &got, &want);
        // and block by block from an offset (no hidden state across blocks)
        let be = ty.block_elems();
        let bb = ty.block_bytes();
        let mut one = vec![0.0f32; be];
        dequantize_row(ty, &raw[bb..2 * bb], &mut one).unwrap();
        assert_bits_eq(&format!("{} block 1", fx.name), &one, &want[be..2 * be]);
    }
}

fn check_quantizer(ty: GgmlType, name: &str, f: fn(&[f32], &mut [u8]) -> stepscore::Result<()>) {
    let fx = load(name);
    assert_eq!((fx.kind, fx.ty), (2, ty.id()), "{name}: header");
    let (x, want) = fx.body.split_at(4 * fx.n);
    let x = f32s(x);
    let mut got = vec![0u8; want.len()];
    f(&x, &mut got).unwrap();
    let bb = ty.block_bytes();
    for (b, (g, w)) in got.chunks_exact(bb).zip(want.chunks_exact(bb)).enumerate() {
        if g != w {
            let first = (0..bb).find(|&i| g[i] != w[i]).unwrap();
            panic!("{name}: block {b} differs from llama.cpp first at byte {first}:\n got {g:?}\nwant {w:?}");
        }
    }
    assert_eq!(got, want);
}

#[test]
fn q8_0_quantizer_is_bit_exact_with_llama_cpp() {
    check_quantizer(GgmlType::Q8_0, "quantize_Q8_0", quantize_row_q8_0);
}

#[test]
fn q8_1_quantizer_is_bit_exact_with_llama_cpp() {
    check_quantizer(GgmlType::Q8_1, "quantize_Q8_1", quantize_row_q8_1);
}

#[test]
fn q8_k_quantizer_is_bit_exact_with_llama_cpp() {
    check_quantizer(GgmlType::Q8K, "quantize_Q8_K", quantize_row_q8_k);
}

#[test]
fn f32_to_half_conversions_are_bit_exact_with_llama_cpp() {
    for (name, conv) in [
        ("convert_f32_to_F16", f32_to_f16 as fn(f32) -> u16),
        ("convert_f32_to_BF16", f32_to_bf16 as fn(f32) -> u16),
    ] {
        let fx = load(name);
        assert_eq!(fx.kind, 3, "{name}: header");
        let (bits, want) = fx.body.split_at(4 * fx.n);
        for (i, (b, w)) in bits.chunks_exact(4).zip(want.chunks_exact(2)).enumerate() {
            let x = f32::from_bits(u32::from_le_bytes(b.try_into().unwrap()));
            let w = u16::from_le_bytes(w.try_into().unwrap());
            let g = conv(x);
            assert_eq!(
                g,
                w,
                "{name}[{i}]: {x:e} ({:#010x}) -> got {g:#06x}, llama.cpp {w:#06x}",
                x.to_bits()
            );
        }
    }
}

#[test]
fn f16_to_f32_matches_llama_cpp_on_all_65536_inputs() {
    let fx = load("f16_to_f32_all");
    assert_eq!((fx.kind, fx.n), (4, 65536));
    let want = u64::from_le_bytes(fx.body[0..8].try_into().unwrap());
    // FNV-1a over the little-endian bytes of every result, as the harness does
    let mut h: u64 = 0xcbf29ce484222325;
    for i in 0..=u16::MAX {
        for byte in f16_to_f32(i).to_bits().to_le_bytes() {
            h ^= byte as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
    }
    assert_eq!(h, want, "f16 -> f32 table hash differs from llama.cpp's");
}

#[test]
fn half_conversions_agree_with_the_half_crate() {
    // Independent reference: IEEE round-to-nearest-even from `half`.
    for i in 0..=u16::MAX {
        let ours = f16_to_f32(i);
        let theirs = half::f16::from_bits(i).to_f32();
        if theirs.is_nan() {
            assert!(ours.is_nan(), "f16 {i:#06x}");
        } else {
            assert_eq!(ours.to_bits(), theirs.to_bits(), "f16 {i:#06x}");
        }
    }
    let mut s: u64 = 0x1234_5678_9abc_def0;
    for _ in 0..200_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let x = f32::from_bits(s as u32);
        if x.is_nan() {
            assert!(f16_to_f32(f32_to_f16(x)).is_nan());
            continue;
        }
        assert_eq!(
            f32_to_f16(x),
            half::f16::from_f32(x).to_bits(),
            "f16 of {x:e}"
        );
        assert_eq!(
            f32_to_bf16(x),
            half::bf16::from_f32(x).to_bits(),
            "bf16 of {x:e}"
        );
    }
}

#[test]
fn wrong_lengths_are_invalid_arguments() {
    let mut out = vec![0.0f32; 32];
    let bad = |r: stepscore::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(bad(dequantize_row(GgmlType::Q4_0, &[0u8; 17], &mut out)));
    assert!(bad(dequantize_row(GgmlType::Q4_0, &[0u8; 36], &mut out)));
    assert!(bad(dequantize_row(GgmlType::Q4K, &[0u8; 144], &mut out)));
    let mut out33 = vec![0.0f32; 33];
    assert!(bad(dequantize_row(GgmlType::Q8_0, &[0u8; 34], &mut out33)));
    assert!(dequantize_row(GgmlType::Q4_0, &[0u8; 18], &mut out).is_ok());
    let x = vec![1.0f32; 32];
    assert!(bad(quantize_row_q8_0(&x, &mut [0u8; 33])));
    assert!(bad(quantize_row_q8_1(&x[..31], &mut [0u8; 36])));
    assert!(bad(quantize_row_q8_k(&x, &mut [0u8; 292])));
    // hand-worked: all 1.0 -> d = 1/127, every quant round(127) = 127
    let mut q = [0u8; 34];
    quantize_row_q8_0(&x, &mut q).unwrap();
    assert_eq!(u16::from_le_bytes([q[0], q[1]]), f32_to_f16(1.0 / 127.0));
    assert!(q[2..].iter().all(|&b| b == 127));
}
