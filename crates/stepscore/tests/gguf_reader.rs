//! GGUF reader: round trips through the crate's writer, typed getters, and
//! hostile files (each must fail with an Error::Model naming the file and the
//! key or tensor at fault, without allocating what the file claims).

use proptest::prelude::*;
use stepscore::engine::testing::{GgufValueType, GgufWriter, MAX_TENSOR_ELEMENTS};
use stepscore::engine::{GgmlType, GgufArray, GgufFile, GgufValue};
use stepscore::Error;

const FILE: &str = "test.gguf";

/// Raw little-endian byte builder for files the crate's writer refuses to make.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw::default();
        r.0.extend_from_slice(b"GGUF");
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// A tensor info: name, dims, type id, offset.
    fn tensor(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }
    /// Pads to 32 and appends `n` zero bytes of tensor data.
    fn data(&mut self, n: usize) -> &mut Self {
        let len = self.0.len().next_multiple_of(32);
        self.0.resize(len + n, 0);
        self
    }
}

fn model_err(bytes: &[u8]) -> String {
    match GgufFile::parse(bytes, FILE) {
        Err(Error::Model { file, message }) => {
            assert_eq!(file, FILE);
            message
        }
        Err(other) => panic!("expected Error::Model, got {other:?}"),
        Ok(f) => panic!("expected an error, parsed {} tensors", f.tensors.len()),
    }
}

fn assert_err_contains(bytes: &[u8], needles: &[&str]) {
    let msg = model_err(bytes);
    for n in needles {
        assert!(msg.contains(n), "error {msg:?} should mention {n:?}");
    }
}

/// A file with every value type, nested arrays and three tensors.
fn sample_writer() -> GgufWriter {
    let mut w = GgufWriter::new();
    w.kv("general.architecture", GgufValue::String("llama".into()))
        .kv("u8", GgufValue::U8(200))
        .kv("i8", GgufValue::I8(-5))
        .kv("u16", GgufValue::U16(65000))
        .kv("i16", GgufValue::I16(-3000))
        .kv("u32", GgufValue::U32(4_000_000_000))
        .kv("i32", GgufValue::I32(-7))
        .kv("f32", GgufValue::F32(1.5e-5))
        .kv("bool", GgufValue::Bool(true))
        .kv("u64", GgufValue::U64(1 << 50))
        .kv("i64", GgufValue::I64(-(1 << 40)))
        .kv("f64", GgufValue::F64(-0.25))
        .kv(
            "tokens",
            GgufValue::Array(GgufArray::String(vec!["a".into(), "Ġb".into(), "".into()])),
        )
        .kv("types", GgufValue::Array(GgufArray::I32(vec![1, 3, 4])))
        .kv("scores", GgufValue::Array(GgufArray::F32(vec![0.5, -1.0])))
        .kv(
            "nested",
            GgufValue::Array(GgufArray::Array(vec![
                GgufArray::U8(vec![1, 2]),
                GgufArray::Array(vec![GgufArray::Bool(vec![true, false])]),
                GgufArray::U64(vec![]),
            ])),
        );
    w.tensor("f32", &[3, 2], GgmlType::F32, (0..24).collect())
        .unwrap();
    w.tensor("q8", &[32], GgmlType::Q8_0, vec![7; 34]).unwrap();
    w.tensor("f16", &[5], GgmlType::F16, vec![9; 10]).unwrap();
    w
}

#[test]
fn round_trips_every_value_type_and_tensor_data() {
    for version in [2, 3] {
        let mut w = sample_writer();
        w.version(version);
        let bytes = w.to_bytes().unwrap();
        let f = GgufFile::parse(&bytes, FILE).unwrap();
        assert_eq!(f.version, version);
        assert_eq!(f.alignment, 32);
        assert_eq!(f.data_offset % 32, 0);
        assert_eq!(f.architecture().unwrap(), "llama");
        assert_eq!(f.get("u8"), Some(&GgufValue::U8(200)));
        assert_eq!(f.get("i16"), Some(&GgufValue::I16(-3000)));
        assert_eq!(f.get_u32("u32").unwrap(), 4_000_000_000);
        assert_eq!(f.get_i64("i8").unwrap(), -5);
        assert_eq!(f.get_u64("u64").unwrap(), 1 << 50);
        assert_eq!(f.get_i64("i64").unwrap(), -(1 << 40));
        assert_eq!(f.get_f32("f32").unwrap(), 1.5e-5);
        assert_eq!(f.get_f32("f64").unwrap(), -0.25);
        assert!(f.get_bool("bool").unwrap());
        assert_eq!(f.get_str_array("tokens").unwrap(), ["a", "Ġb", ""]);
        assert_eq!(f.get_i32_array("types").unwrap(), [1, 3, 4]);
        assert_eq!(f.get_f32_array("scores").unwrap(), [0.5, -1.0]);
        let nested = f.get_array("nested").unwrap();
        assert_eq!(nested.elem_type(), GgufValueType::Array);
        assert_eq!(
            nested,
            &GgufArray::Array(vec![
                GgufArray::U8(vec![1, 2]),
                GgufArray::Array(vec![GgufArray::Bool(vec![true, false])]),
                GgufArray::U64(vec![]),
            ])
        );

        let names: Vec<_> = f.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["f32", "q8", "f16"]);
        let t = f.tensor("f32").unwrap();
        assert_eq!(
            (t.dims.as_slice(), t.ggml_type, t.n_elements, t.n_bytes),
            (&[3u64, 2][..], GgmlType::F32, 6, 24)
        );
        assert_eq!((t.row_len(), t.n_rows()), (3, 2));
        assert_eq!(
            f.tensor_data(&bytes, t).unwrap(),
            (0..24).collect::<Vec<u8>>()
        );
        let q = f.tensor("q8").unwrap();
        assert_eq!(
            q.offset, 32,
            "24 bytes of f32 data padded to the 32-byte alignment"
        );
        assert_eq!(f.tensor_data(&bytes, q).unwrap(), [7; 34]);
        assert_eq!(
            f.tensor_data(&bytes, f.tensor("f16").unwrap()).unwrap(),
            [9; 10]
        );
        assert!(f.tensor("missing").is_none());
    }
}

#[test]
fn honours_general_alignment() {
    let mut w = GgufWriter::new();
    w.kv("general.alignment", GgufValue::U32(64));
    w.tensor("a", &[1], GgmlType::F32, vec![1; 4]).unwrap();
    w.tensor("b", &[1], GgmlType::F32, vec![2; 4]).unwrap();
    let bytes = w.to_bytes().unwrap();
    // The consuming writer (synthetic models) lays out the same bytes.
    assert_eq!(w.clone().into_bytes().unwrap(), bytes);
    let f = GgufFile::parse(&bytes, FILE).unwrap();
    assert_eq!(f.alignment, 64);
    assert_eq!(f.data_offset % 64, 0);
    assert_eq!(f.tensor("b").unwrap().offset, 64);
    assert_eq!(
        f.tensor_data(&bytes, f.tensor("b").unwrap()).unwrap(),
        [2; 4]
    );
}

#[test]
fn getters_name_the_key_and_the_expected_type() {
    let bytes = sample_writer().to_bytes().unwrap();
    let f = GgufFile::parse(&bytes, FILE).unwrap();
    let msg = |e: Error| e.to_string();
    let m = msg(f.get_u32("nope").unwrap_err());
    assert!(
        m.contains(FILE) && m.contains("missing") && m.contains("`nope`"),
        "{m}"
    );
    let m = msg(f.get_str("u8").unwrap_err());
    assert!(
        m.contains("`u8`") && m.contains("expected string") && m.contains("found u8"),
        "{m}"
    );
    let m = msg(f.get_str_array("types").unwrap_err());
    assert!(
        m.contains("`types`") && m.contains("array of string") && m.contains("array of i32"),
        "{m}"
    );
    let m = msg(f.get_u32("i8").unwrap_err());
    assert!(
        m.contains("`i8`") && m.contains("-5") && m.contains("u32"),
        "{m}"
    );
    let m = msg(f.get_u32("u64").unwrap_err());
    assert!(m.contains("`u64`") && m.contains("does not fit"), "{m}");
    assert!(f
        .get_f32("bool")
        .unwrap_err()
        .to_string()
        .contains("expected f32"));
    assert!(f
        .get_bool("f32")
        .unwrap_err()
        .to_string()
        .contains("expected bool"));
    assert_eq!(f.opt_u32("nope").unwrap(), None);
    assert!(
        f.opt_str("u8").is_err(),
        "a present key of the wrong type is an error, not None"
    );
}

#[test]
fn every_truncation_fails_cleanly() {
    let bytes = sample_writer().to_bytes().unwrap();
    let f = GgufFile::parse(&bytes, FILE).unwrap();
    let last_end = f
        .tensors
        .iter()
        .map(|t| f.data_offset + t.offset + t.n_bytes)
        .max()
        .unwrap();
    assert_eq!(last_end as usize, bytes.len());
    for len in 0..bytes.len() {
        let msg = model_err(&bytes[..len]);
        assert!(
            msg.contains("truncated")
                || msg.contains("too short")
                || msg.contains("past the end")
                || msg.contains("cannot fit"),
            "prefix of {len} bytes: {msg}"
        );
    }
}

#[test]
fn bad_magic_and_versions() {
    assert_err_contains(b"GGML\x03\0\0\0", &["not a GGUF file", "GGML"]);
    assert_err_contains(b"GG", &["too short"]);
    assert_err_contains(&Raw::header(1, 0, 0).0, &["unsupported GGUF version 1"]);
    assert_err_contains(&Raw::header(4, 0, 0).0, &["unsupported GGUF version 4"]);
    assert_err_contains(&Raw::header(3u32.swap_bytes(), 0, 0).0, &["big-endian"]);
    assert_err_contains(&b"GGUF\x03\0\0\0\0\0"[..], &["truncated", "tensor count"]);
    // An empty but valid file parses.
    let f = GgufFile::parse(&Raw::header(2, 0, 0).0, FILE).unwrap();
    assert!(f.metadata.is_empty() && f.tensors.is_empty());
}

#[test]
fn absurd_counts_fail_before_allocating() {
    assert_err_contains(
        &Raw::header(3, 0, 1 << 60).0,
        &["metadata count 1152921504606846976 cannot fit"],
    );
    assert_err_contains(
        &Raw::header(3, 1 << 60, 0).0,
        &["tensor count 1152921504606846976 cannot fit"],
    );
    assert_err_contains(&Raw::header(3, u64::MAX, u64::MAX).0, &["cannot fit"]);

    let mut r = Raw::header(3, 0, 1);
    r.u64(1 << 60).u64(0);
    assert_err_contains(
        &r.0,
        &[
            "key of metadata entry #0",
            "claims 1152921504606846976 bytes",
        ],
    );

    let mut r = Raw::header(3, 0, 1);
    r.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(1 << 60);
    assert_err_contains(
        &r.0,
        &[
            "`tokenizer.ggml.tokens`",
            "count 1152921504606846976 cannot fit",
        ],
    );

    // A plausible count whose strings then claim absurd lengths.
    let mut r = Raw::header(3, 0, 1);
    r.str("tokens").u32(9).u32(8).u64(2).str("ok").u64(u64::MAX);
    assert_err_contains(
        &r.0,
        &["`tokens` element 1", "claims 18446744073709551615 bytes"],
    );

    let mut r = Raw::header(3, 1, 0);
    r.u64(1 << 60).u64(0).u64(0);
    assert_err_contains(&r.0, &["name of tensor #0", "claims"]);
}

#[test]
fn hostile_metadata_values() {
    let mut r = Raw::header(3, 0, 1);
    r.str("k").u32(13).u8(0);
    assert_err_contains(&r.0, &["key `k`", "unknown value type id 13"]);

    let mut r = Raw::header(3, 0, 1);
    r.str("arr").u32(9).u32(77).u64(0);
    assert_err_contains(&r.0, &["`arr`", "unknown value type id 77"]);

    let mut r = Raw::header(3, 0, 1);
    r.str("flag").u32(7).u8(2);
    assert_err_contains(&r.0, &["`flag`", "bool byte is 2"]);

    let mut r = Raw::header(3, 0, 1);
    r.u64(2);
    r.0.extend_from_slice(&[0xff, 0xfe]);
    r.u32(4).u32(0);
    assert_err_contains(&r.0, &["key of metadata entry #0", "not valid UTF-8"]);

    let mut r = Raw::header(3, 0, 2);
    r.str("dup").u32(4).u32(1).str("dup").u32(4).u32(2);
    assert_err_contains(&r.0, &["duplicate metadata key `dup`"]);

    // Arrays of arrays nested 10 deep: rejected by the depth cap, not the stack.
    let mut r = Raw::header(3, 0, 1);
    r.str("deep").u32(9);
    for _ in 0..10 {
        r.u32(9).u64(1);
    }
    r.u32(0).u64(0);
    assert_err_contains(&r.0, &["`deep`", "nested deeper"]);

    // general.alignment must be a u32 power of two.
    let bad: [(u32, &[u8], &str); 3] = [
        (4, &48u32.to_le_bytes(), "48"),
        (4, &0u32.to_le_bytes(), "found 0"),
        (10, &32u64.to_le_bytes(), "32"),
    ];
    for (type_id, value, needle) in bad {
        let mut r = Raw::header(3, 0, 1);
        r.str("general.alignment").u32(type_id);
        r.0.extend_from_slice(value);
        assert_err_contains(&r.0, &["`general.alignment`", "power of two", needle]);
    }
    let mut w = GgufWriter::new();
    w.kv("general.alignment", GgufValue::U32(48));
    assert!(
        w.to_bytes().is_err(),
        "the writer refuses a bad alignment too"
    );
}

#[test]
fn hostile_tensor_infos() {
    let one = |name: &str, dims: &[u64], ty: u32, off: u64, data: usize| {
        let mut r = Raw::header(3, 1, 0);
        r.tensor(name, dims, ty, off).data(data);
        r.0
    };
    assert_err_contains(
        &one("t", &[1, 1, 1, 1, 1], 0, 0, 4),
        &["tensor `t`", "5 dimensions"],
    );
    assert_err_contains(
        &one("big", &[1 << 32, 1 << 32], 0, 0, 0),
        &["tensor `big`", "2^40 or more elements"],
    );
    assert_err_contains(
        &one("ovf", &[u64::MAX / 2, 3], 0, 0, 0),
        &["tensor `ovf`", "2^40 or more"],
    );
    assert_err_contains(
        &one("neg", &[u64::MAX], 0, 0, 0),
        &["tensor `neg`", "above the ggml maximum"],
    );
    assert_err_contains(
        &one("e40", &[MAX_TENSOR_ELEMENTS], 0, 0, 0),
        &["tensor `e40`", "2^40"],
    );
    assert_err_contains(
        &one("ty", &[4], 4, 0, 64),
        &["tensor `ty`", "unknown or unsupported ggml type id 4"],
    );
    assert_err_contains(
        &one("ty", &[4], 1000, 0, 64),
        &["tensor `ty`", "type id 1000"],
    );
    assert_err_contains(
        &one("q", &[16], 8, 0, 64),
        &["tensor `q`", "row length 16", "block size 32"],
    );
    assert_err_contains(
        &one("mis", &[4], 0, 8, 64),
        &["tensor `mis`", "offset 8", "alignment 32"],
    );
    assert_err_contains(
        &one("past", &[4], 0, 0, 15),
        &["tensor `past`", "past the end"],
    );
    assert_err_contains(
        &one("far", &[4], 0, u64::MAX - 31, 64),
        &["tensor `far`", "past the end"],
    );
    // Exactly enough data parses.
    let ok = one("fits", &[4], 0, 0, 16);
    let f = GgufFile::parse(&ok, FILE).unwrap();
    assert_eq!(
        f.tensor_data(&ok, f.tensor("fits").unwrap()).unwrap().len(),
        16
    );
    // tensor_data checks the buffer it is given.
    let err = f
        .tensor_data(&ok[..ok.len() - 1], f.tensor("fits").unwrap())
        .unwrap_err();
    assert!(err.to_string().contains("tensor `fits`"), "{err}");

    let mut r = Raw::header(3, 2, 0);
    r.tensor("same", &[4], 0, 0)
        .tensor("same", &[4], 0, 32)
        .data(64);
    assert_err_contains(&r.0, &["duplicate tensor name `same`"]);

    let mut r = Raw::header(3, 1, 0);
    r.str("cut").u32(3).u64(4).u64(4);
    assert_err_contains(&r.0, &["truncated", "dimension 2 of tensor `cut`"]);
}

/// Issue 23, item 10: two tensors whose data regions share bytes are refused
/// by name; adjacent and zero-length ones are fine.
#[test]
fn overlapping_tensor_regions_are_refused() {
    // f32 [16] is 64 bytes: the second tensor starts 32 bytes into the first.
    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[16], 0, 0)
        .tensor("b", &[16], 0, 32)
        .data(128);
    assert_err_contains(&r.0, &["tensors `a`", "`b`", "overlap"]);
    // The same region twice, listed in the other order.
    let mut r = Raw::header(3, 2, 0);
    r.tensor("late", &[8], 0, 64)
        .tensor("early", &[16], 0, 64)
        .data(160);
    assert_err_contains(&r.0, &["`early`", "`late`", "overlap"]);
    // Adjacent regions parse.
    let mut r = Raw::header(3, 2, 0);
    r.tensor("a", &[16], 0, 0)
        .tensor("b", &[16], 0, 64)
        .data(128);
    assert!(GgufFile::parse(&r.0, FILE).is_ok());
}

fn arb_array(depth: u32) -> BoxedStrategy<GgufArray> {
    let leaf = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..5).prop_map(GgufArray::U8),
        prop::collection::vec(any::<i16>(), 0..5).prop_map(GgufArray::I16),
        prop::collection::vec(any::<u32>(), 0..5).prop_map(GgufArray::U32),
        prop::collection::vec(-1e6f32..1e6, 0..5).prop_map(GgufArray::F32),
        prop::collection::vec(any::<bool>(), 0..5).prop_map(GgufArray::Bool),
        prop::collection::vec(".{0,6}", 0..5).prop_map(GgufArray::String),
        prop::collection::vec(any::<i64>(), 0..5).prop_map(GgufArray::I64),
    ];
    if depth == 0 {
        leaf.boxed()
    } else {
        prop_oneof![
            leaf,
            prop::collection::vec(arb_array(depth - 1), 0..3).prop_map(GgufArray::Array)
        ]
        .boxed()
    }
}

fn arb_value() -> impl Strategy<Value = GgufValue> {
    prop_oneof![
        any::<u8>().prop_map(GgufValue::U8),
        any::<i8>().prop_map(GgufValue::I8),
        any::<u16>().prop_map(GgufValue::U16),
        any::<i32>().prop_map(GgufValue::I32),
        any::<u64>().prop_map(GgufValue::U64),
        (-1e30f64..1e30).prop_map(GgufValue::F64),
        any::<bool>().prop_map(GgufValue::Bool),
        ".{0,12}".prop_map(GgufValue::String),
        arb_array(2).prop_map(GgufValue::Array),
    ]
}

proptest! {
    #[test]
    fn metadata_round_trips(values in prop::collection::vec(arb_value(), 0..8)) {
        let mut w = GgufWriter::new();
        for (i, v) in values.iter().enumerate() {
            w.kv(&format!("k{i}"), v.clone());
        }
        let bytes = w.to_bytes().unwrap();
        let f = GgufFile::parse(&bytes, FILE).unwrap();
        prop_assert_eq!(f.metadata.len(), values.len());
        for ((k, got), (i, want)) in f.metadata.iter().zip(values.iter().enumerate()) {
            prop_assert_eq!(k, &format!("k{i}"));
            prop_assert_eq!(got, want);
        }
    }

    /// Corrupting any byte of a valid file never panics.
    #[test]
    fn corrupted_bytes_never_panic(pos in 0usize..4096, byte in any::<u8>(), cut in 0usize..4096) {
        let mut bytes = sample_writer().to_bytes().unwrap();
        let pos = pos % bytes.len();
        bytes[pos] = byte;
        let cut = bytes.len() - cut % 64;
        let _ = GgufFile::parse(&bytes[..cut], FILE);
    }
}

#[test]
fn model_bytes_map_and_own_the_same_bytes() {
    use stepscore::engine::ModelBytes;
    let bytes = sample_writer().to_bytes().unwrap();
    let path =
        std::env::temp_dir().join(format!("stepscore-gguf-test-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let mapped = ModelBytes::open(&path).unwrap();
    let owned = ModelBytes::from_vec(bytes.clone());
    assert_eq!(mapped.as_slice(), owned.as_slice());
    assert_eq!(mapped.len(), bytes.len());
    let f = GgufFile::parse(mapped.as_slice(), &path.display().to_string()).unwrap();
    assert_eq!(
        f.tensor_data(mapped.as_slice(), f.tensor("q8").unwrap())
            .unwrap(),
        [7; 34]
    );
    std::fs::remove_file(&path).unwrap();
    match ModelBytes::open(&path) {
        Err(Error::Io { path: p, .. }) => assert!(p.contains("stepscore-gguf-test")),
        other => panic!("expected an Io error, got {other:?}"),
    }
}
