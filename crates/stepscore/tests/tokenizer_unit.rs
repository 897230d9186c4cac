//! The tokenizer on a tiny hand-made byte-level BPE vocabulary: which
//! pre-tokenizer splits what, special tokens in text, offsets, BOS/EOS, the
//! tokenizer.json path, and clear errors for bad metadata or JSON.

use stepscore::engine::testing::GgufWriter;
use stepscore::engine::{GgufArray, GgufFile, GgufValue, Tokenizer};
use stepscore::Error;

/// GPT-2's byte -> printable char table: printable Latin-1 bytes map to
/// themselves, the other 68 bytes to U+0100.. in byte order.
fn byte_chars() -> Vec<char> {
    let keep =
        |b: u32| (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
    let mut next = 256;
    (0..256u32)
        .map(|b| {
            if keep(b) {
                char::from_u32(b).unwrap()
            } else {
                next += 1;
                char::from_u32(next - 1).unwrap()
            }
        })
        .collect()
}

// Ids past the 256 byte tokens.
const HE: u32 = 256;
const TWELVE: u32 = 257;
// 258 is "Ġt", the first half of the Ġt + he merge.
const GT: u32 = 258;
const THE: u32 = 259;
const IM_START: u32 = 260;
const IM_END: u32 = 261;
const TOOL: u32 = 262;

fn tokens() -> Vec<String> {
    let mut t: Vec<String> = byte_chars().into_iter().map(String::from).collect();
    for s in [
        "he",
        "12",
        "Ġt",
        "Ġthe",
        "<|im_start|>",
        "<|im_end|>",
        "<tool>",
    ] {
        t.push(s.to_string());
    }
    t
}

fn merges() -> Vec<String> {
    ["h e", "1 2", "Ġ t", "Ġt he"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Metadata of a valid tiny vocabulary with pre-tokenizer `pre`.
fn metadata(pre: &str) -> Vec<(&'static str, GgufValue)> {
    let mut types = vec![1i32; 256 + 4];
    types.extend([3, 3, 4]); // control, control, user-defined
    vec![
        ("tokenizer.ggml.model", GgufValue::String("gpt2".into())),
        ("tokenizer.ggml.pre", GgufValue::String(pre.into())),
        (
            "tokenizer.ggml.tokens",
            GgufValue::Array(GgufArray::String(tokens())),
        ),
        (
            "tokenizer.ggml.token_type",
            GgufValue::Array(GgufArray::I32(types)),
        ),
        (
            "tokenizer.ggml.merges",
            GgufValue::Array(GgufArray::String(merges())),
        ),
        ("tokenizer.ggml.bos_token_id", GgufValue::U32(IM_START)),
        ("tokenizer.ggml.eos_token_id", GgufValue::U32(IM_END)),
    ]
}

fn build(meta: &[(&str, GgufValue)]) -> stepscore::Result<Tokenizer> {
    let mut w = GgufWriter::new();
    for (k, v) in meta {
        w.kv(k, v.clone());
    }
    let bytes = w.to_bytes().unwrap();
    Tokenizer::from_gguf(&GgufFile::parse(&bytes, "vocab.gguf").unwrap())
}

fn tok(pre: &str) -> Tokenizer {
    build(&metadata(pre)).unwrap()
}

fn byte_id(b: u8) -> u32 {
    b as u32
}

#[test]
fn pre_tokenizers_split_digits_as_their_models_do() {
    let (t, sp, one, two) = (byte_id(b't'), byte_id(b' '), byte_id(b'1'), byte_id(b'2'));
    // GPT-2 keeps " 12" together, so the 1-2 merge applies.
    assert_eq!(
        tok("gpt-2").encode("the 12", false).unwrap(),
        [t, HE, sp, TWELVE]
    );
    // Qwen2 and SmolLM split every digit off: no 1-2 merge.
    assert_eq!(
        tok("qwen2").encode("the 12", false).unwrap(),
        [t, HE, sp, one, two]
    );
    assert_eq!(
        tok("smollm").encode("the 12", false).unwrap(),
        [t, HE, sp, one, two]
    );
    // Llama 3 groups up to three digits and splits the space off.
    assert_eq!(
        tok("llama-bpe").encode("the 12", false).unwrap(),
        [t, HE, sp, TWELVE]
    );
    assert_eq!(tok("gpt-2").encode(" t", false).unwrap(), [GT]);
    // " the" merges to one token everywhere.
    assert_eq!(tok("gpt-2").encode(" the", false).unwrap(), [THE]);
}

#[test]
fn special_tokens_in_text_and_offsets() {
    let tk = tok("qwen2");
    let text = "<|im_start|>the<tool> the<|im_end|>";
    let enc = tk.encode_with_offsets(text, false).unwrap();
    assert_eq!(enc.ids, [IM_START, byte_id(b't'), HE, TOOL, THE, IM_END]);
    assert_eq!(
        enc.offsets,
        [(0, 12), (12, 13), (13, 15), (15, 21), (21, 25), (25, 35)]
    );
    assert_eq!(tk.decode(&enc.ids, false).unwrap(), text);
    // Control tokens are skippable; user-defined ones are text.
    assert_eq!(tk.decode(&enc.ids, true).unwrap(), "the<tool> the");
    // A multi-byte character split into byte tokens: each covers the character.
    let enc = tk.encode_with_offsets("é", false).unwrap();
    assert_eq!(enc.ids, [0xc3, 0xa9]);
    assert_eq!(enc.offsets, [(0, 2), (0, 2)]);
}

#[test]
fn bos_and_eos_follow_the_metadata() {
    let tk = tok("qwen2");
    assert_eq!(
        (tk.bos_id(), tk.eos_id(), tk.vocab_size()),
        (Some(IM_START), Some(IM_END), 263)
    );
    assert_eq!(
        tk.encode("the", true).unwrap(),
        [byte_id(b't'), HE],
        "qwen2 adds no BOS by default"
    );
    // Llama 3 names add BOS by default; add_bos_token overrides either way.
    assert_eq!(
        tok("llama-bpe").encode("the", true).unwrap(),
        [IM_START, byte_id(b't'), HE]
    );
    let mut meta = metadata("qwen2");
    meta.push(("tokenizer.ggml.add_bos_token", GgufValue::Bool(true)));
    meta.push(("tokenizer.ggml.add_eos_token", GgufValue::Bool(true)));
    let enc = build(&meta)
        .unwrap()
        .encode_with_offsets("the", true)
        .unwrap();
    assert_eq!(enc.ids, [IM_START, byte_id(b't'), HE, IM_END]);
    assert_eq!(enc.offsets, [(0, 0), (0, 1), (1, 3), (3, 3)]);
    assert_eq!(tk.token_to_id("Ġthe"), Some(THE));
    assert_eq!(tk.id_to_token(HE).as_deref(), Some("he"));
    assert!(tk
        .decode(&[9999], false)
        .unwrap_err()
        .to_string()
        .contains("9999"));
}

fn tokenizer_err(meta: &[(&str, GgufValue)]) -> String {
    match build(meta) {
        Err(Error::Tokenizer(m)) => m,
        Err(e) => panic!("expected Error::Tokenizer, got {e:?}"),
        Ok(t) => panic!("expected an error, built {t:?}"),
    }
}

type Meta = Vec<(&'static str, GgufValue)>;

fn with(key: &str, value: Option<GgufValue>) -> Meta {
    let mut m = metadata("qwen2");
    let pos = m.iter().position(|(k, _)| *k == key);
    match (pos, value) {
        (Some(i), Some(v)) => m[i].1 = v,
        (Some(i), None) => {
            m.remove(i);
        }
        (None, _) => panic!("no key {key}"),
    }
    m
}

#[test]
fn bad_gguf_metadata_is_a_clear_tokenizer_error() {
    let s = |x: &str| Some(GgufValue::String(x.into()));
    let strs = |v: &[&str]| {
        Some(GgufValue::Array(GgufArray::String(
            v.iter().map(|x| x.to_string()).collect(),
        )))
    };
    let cases: Vec<(Meta, &[&str])> = vec![
        (
            with("tokenizer.ggml.model", None),
            &["vocab.gguf", "missing", "tokenizer.ggml.model"],
        ),
        (
            with("tokenizer.ggml.model", s("bert")),
            &["`bert`", "not supported"],
        ),
        (
            // A SentencePiece vocabulary needs its scores to rank merges.
            with("tokenizer.ggml.model", s("llama")),
            &["vocab.gguf", "tokenizer.ggml.scores"],
        ),
        (
            with("tokenizer.ggml.model", Some(GgufValue::U32(1))),
            &["tokenizer.ggml.model", "expected string"],
        ),
        (
            with("tokenizer.ggml.pre", None),
            &["missing tokenizer.ggml.pre"],
        ),
        (
            with("tokenizer.ggml.pre", s("klingon")),
            &["`klingon`", "unsupported"],
        ),
        (
            with("tokenizer.ggml.tokens", strs(&[])),
            &["tokenizer.ggml.tokens has 0 entries"],
        ),
        (
            with(
                "tokenizer.ggml.tokens",
                Some(GgufValue::Array(GgufArray::I32(vec![1]))),
            ),
            &["tokenizer.ggml.tokens", "array of string", "array of i32"],
        ),
        (
            with(
                "tokenizer.ggml.token_type",
                Some(GgufValue::Array(GgufArray::I32(vec![1; 3]))),
            ),
            &["token_type has 3 entries for 263"],
        ),
        (
            with("tokenizer.ggml.merges", strs(&["he"])),
            &["merges[0]", "not two tokens"],
        ),
        (
            with("tokenizer.ggml.merges", strs(&["h e", "x qq"])),
            &["merges[1]", "\"qq\" is not in the vocabulary"],
        ),
        (
            with("tokenizer.ggml.bos_token_id", Some(GgufValue::U32(263))),
            &["bos_token_id = 263", "outside"],
        ),
        (
            with("tokenizer.ggml.eos_token_id", Some(GgufValue::I32(-1))),
            &["eos_token_id", "does not fit"],
        ),
    ];
    for (meta, needles) in cases {
        let msg = tokenizer_err(&meta);
        for n in needles {
            assert!(msg.contains(n), "error {msg:?} should mention {n:?}");
        }
    }
    let mut dup = tokens();
    dup[HE as usize] = "12".into();
    let msg = tokenizer_err(&with(
        "tokenizer.ggml.tokens",
        Some(GgufValue::Array(GgufArray::String(dup))),
    ));
    assert!(msg.contains("\"12\" appears twice"), "{msg}");
}

/// The same tiny vocabulary as a HF tokenizer.json, Qwen2-style pre-tokenizer
/// and a post-processor adding BOS: it must tokenize as the GGUF path does.
fn tokenizer_json() -> String {
    let vocab: serde_json::Map<String, serde_json::Value> = tokens()
        .into_iter()
        .enumerate()
        .map(|(i, t)| (t, serde_json::json!(i)))
        .collect();
    let added: Vec<_> = [
        (IM_START, "<|im_start|>", true),
        (IM_END, "<|im_end|>", true),
        (TOOL, "<tool>", false),
    ]
    .iter()
    .map(|&(id, content, special)| {
        serde_json::json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                               "rstrip": false, "normalized": !special, "special": special})
    })
    .collect();
    let qwen2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": qwen2}, "behavior": "Isolated", "invert": false},
            {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
        ]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [IM_START], "tokens": ["<|im_start|>"]}}
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": merges()}
    })
    .to_string()
}

#[test]
fn tokenizer_json_agrees_with_the_gguf_path() {
    let json = Tokenizer::from_json_bytes(tokenizer_json().as_bytes()).unwrap();
    let gguf = tok("qwen2");
    for text in [
        "the 12",
        " the<tool>x",
        "<|im_start|>the<|im_end|>",
        "é\n\n  x",
        "",
    ] {
        assert_eq!(
            json.encode_with_offsets(text, false).unwrap(),
            gguf.encode_with_offsets(text, false).unwrap(),
            "{text:?}"
        );
    }
    // BOS inferred from the post-processor; no EOS.
    assert_eq!((json.bos_id(), json.eos_id()), (Some(IM_START), None));
    assert_eq!(
        json.encode("the", true).unwrap(),
        [IM_START, byte_id(b't'), HE]
    );
    let json = json.with_bos_eos(Some(IM_START), Some(IM_END)).unwrap();
    assert_eq!(json.eos_id(), Some(IM_END));
    assert!(Tokenizer::from_json_bytes(tokenizer_json().as_bytes())
        .unwrap()
        .with_bos_eos(None, Some(5000))
        .is_err());
}

#[test]
fn garbage_tokenizer_json_is_an_error() {
    let bad_regex = tokenizer_json().replacen(r"\\s+(?!\\S)", r"(?P<", 1);
    for bytes in [
        &b""[..],
        b"{",
        b"null",
        b"{\"model\": 3}",
        &[0xff, 0xfe, 0x00],
        b"[1,2,3]",
        bad_regex.as_bytes(),
    ] {
        match Tokenizer::from_json_bytes(bytes) {
            Err(Error::Tokenizer(m)) => assert!(m.contains("tokenizer.json"), "{m}"),
            other => panic!(
                "{:?}: expected a tokenizer error, got {other:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }
}

/// Found by the tokenizer_json fuzz target: the `tokenizers` crate panics on
/// a JSON syntax error or a lone surrogate inside the `decoder` value, and at
/// the first encode when a template names an undefined special token, and
/// while loading a BPE merge whose joined token is longer than every
/// vocabulary token; each must be an error.
#[test]
fn tokenizer_json_that_panicked_the_tokenizers_crate_is_an_error() {
    let doc = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
        "normalizer":null,"pre_tokenizer":null,"post_processor":null,
        "decoder":{"type":"ByteLevel","add_prefix_space":true"#;
    match stepscore::engine::Tokenizer::from_json_bytes(doc) {
        Err(stepscore::Error::Tokenizer(m)) => assert!(m.contains("invalid tokenizer.json"), "{m}"),
        other => panic!("expected a tokenizer error, got {:?}", other.map(|_| ())),
    }
    // A lone surrogate escape (`\udfff`) in the decoder: valid-looking JSON
    // that serde_json refuses when it builds the string.
    let doc = br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
        "normalizer":null,"pre_tokenizer":null,"post_processor":null,
        "decoder":{"type":"ByteLevel","x":"\udfff"},"model":{"type":"BPE","vocab":{},"merges":[]}}"#;
    assert!(matches!(
        stepscore::engine::Tokenizer::from_json_bytes(doc),
        Err(stepscore::Error::Tokenizer(_))
    ));
    // The fuzzer's own inputs (a fixture's tokenizer.json with a few bytes
    // changed or removed) fail the same way.
    for crash in [
        &include_bytes!("../../../tests/fixtures/fuzz/tokenizer_json-decoder-syntax.json")[..],
        &include_bytes!("../../../tests/fixtures/fuzz/tokenizer_json-lone-surrogate.json")[..],
        // A template naming a special token the post-processor does not
        // define: the crate panicked at the first encode.
        &include_bytes!("../../../tests/fixtures/fuzz/tokenizer_json-missing-special-token.json")[..],
        // A merge whose joined token is longer than any vocabulary token:
        // the crate copied it into a too-short buffer while loading.
        &include_bytes!("../../../tests/fixtures/fuzz/tokenizer_json-bpe-subword-prefix.json")[..],
    ] {
        assert!(matches!(
            stepscore::engine::Tokenizer::from_json_bytes(crash),
            Err(stepscore::Error::Tokenizer(_))
        ));
    }
}

/// A real `continuing_subword_prefix` (WordPiece-style "##" merges) still
/// loads; a merge whose second token lacks the prefix, or whose result is
/// not in the vocabulary, is named.
#[test]
fn bpe_merges_must_carry_the_continuing_subword_prefix() {
    let doc = |merge: &str| {
        format!(
            r###"{{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
            "normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,
            "model":{{"type":"BPE","continuing_subword_prefix":"##","vocab":{{"a":0,"##b":1,"ab":2,"b":3}},
            "merges":[{merge}]}}}}"###
        )
    };
    assert!(stepscore::engine::Tokenizer::from_json_bytes(doc(r#""a ##b""#).as_bytes()).is_ok());
    match stepscore::engine::Tokenizer::from_json_bytes(doc(r#"["a", "b"]"#).as_bytes()) {
        Err(stepscore::Error::Tokenizer(m)) => {
            assert!(
                m.contains("merges[0]") && m.contains("continuing_subword_prefix"),
                "{m}"
            )
        }
        other => panic!("expected a tokenizer error, got {:?}", other.map(|_| ())),
    }
    match stepscore::engine::Tokenizer::from_json_bytes(doc(r#""ab ##b""#).as_bytes()) {
        Err(stepscore::Error::Tokenizer(m)) => assert!(m.contains("not in the vocabulary"), "{m}"),
        other => panic!("expected a tokenizer error, got {:?}", other.map(|_| ())),
    }
}

/// The bound the scorer's token limit uses before tokenizing (issue 44,
/// D3): no token stands for more input bytes than
/// `max_input_bytes_per_token`, so a text of n bytes is at least
/// n / that many tokens; a tokenizer that can delete text has no bound.
#[test]
fn input_bytes_per_token_bounds_every_encoding() {
    let plain = Tokenizer::from_json_bytes(tokenizer_json().as_bytes()).unwrap();
    let per = plain
        .max_input_bytes_per_token()
        .expect("a byte-level BPE has a bound");
    let gguf = tok("qwen2");
    let gguf_per = gguf
        .max_input_bytes_per_token()
        .expect("GGUF BPE has a bound");
    for text in [
        "hello world",
        "<|im_start|>12 + 345 = 357<|im_end|>",
        "    \n\n\t  aaaaaaaa",
        "héllo wörld 𝐀𝐁 ☃☃☃",
        "",
    ] {
        for (t, p) in [(&plain, per), (&gguf, gguf_per)] {
            let n = t.encode(text, false).unwrap().len();
            assert!(
                n >= text.len().div_ceil(p),
                "{text:?}: {n} tokens, bound {p}"
            );
        }
    }
    // A normalizer that can remove text (BERT's strips control characters)
    // or a pre-tokenizer that drops whitespace: no bound.
    let mut v: serde_json::Value = serde_json::from_str(&tokenizer_json()).unwrap();
    v["normalizer"] = serde_json::json!({"type": "BertNormalizer", "clean_text": true,
        "handle_chinese_chars": false, "strip_accents": null, "lowercase": false});
    let bert = Tokenizer::from_json_bytes(v.to_string().as_bytes()).unwrap();
    assert_eq!(bert.max_input_bytes_per_token(), None);
    let mut v: serde_json::Value = serde_json::from_str(&tokenizer_json()).unwrap();
    v["pre_tokenizer"] = serde_json::json!({"type": "WhitespaceSplit"});
    let ws = Tokenizer::from_json_bytes(v.to_string().as_bytes()).unwrap();
    assert_eq!(ws.max_input_bytes_per_token(), None);
    // Unicode normalization can shrink a text up to 4 times (`𝐀` is 4
    // bytes, its NFKC `A` one): the bound grows by that.
    let mut v: serde_json::Value = serde_json::from_str(&tokenizer_json()).unwrap();
    v["normalizer"] = serde_json::json!({"type": "NFKC"});
    let nfkc = Tokenizer::from_json_bytes(v.to_string().as_bytes()).unwrap();
    assert_eq!(nfkc.max_input_bytes_per_token(), Some(4 * per));
}
