//! Text to token ids and back, for byte-level BPE vocabularies read from a
//! HF `tokenizer.json` or from GGUF metadata. Built on the `tokenizers`
//! crate with its pure-Rust regex backend, so native and wasm builds split
//! text identically.

mod from_gguf;
mod gguf_vocab;
pub mod pretok;
mod spm;

use crate::error::{Error, Result};
use crate::format::gguf::GgufFile;

/// Token ids with the byte range of the input each one covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoding {
    pub ids: Vec<u32>,
    /// `offsets[i]` is the byte range `start..end` of the input text that
    /// `ids[i]` came from; added BOS/EOS tokens get an empty range at the
    /// start/end. A token holding part of a multi-byte character covers the
    /// whole character.
    pub offsets: Vec<(usize, usize)>,
}

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    bos: Option<u32>,
    eos: Option<u32>,
    /// Whether `encode(_, true)` adds BOS/EOS itself (GGUF vocabularies);
    /// tokenizer.json files carry their own post-processor instead.
    add_bos: bool,
    add_eos: bool,
    /// [`Tokenizer::max_input_bytes_per_token`], worked out on first use.
    bytes_per_token: std::sync::OnceLock<Option<usize>>,
}

/// Any JSON value, checked as serde_json would build it (string escapes and
/// lone surrogates included, which `IgnoredAny` skips) without building it.
struct ValidJson;

impl<'de> serde::Deserialize<'de> for ValidJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(ValidJsonVisitor)
    }
}

struct ValidJsonVisitor;

impl<'de> serde::de::Visitor<'de> for ValidJsonVisitor {
    type Value = ValidJson;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_str<E>(self, _: &str) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_unit<E>(self) -> std::result::Result<ValidJson, E> {
        Ok(ValidJson)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<ValidJson, A::Error> {
        while seq.next_element::<ValidJson>()?.is_some() {}
        Ok(ValidJson)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<ValidJson, A::Error> {
        while map.next_entry::<ValidJson, ValidJson>()?.is_some() {}
        Ok(ValidJson)
    }
}

/// Inputs the `tokenizers` crate panics on instead of refusing. A
/// `TemplateProcessing` post-processor (alone or in a `Sequence`) must
/// define every special token its templates name: the `tokenizers` crate
/// checks that in its builder but not when it reads a file, and then panics
/// at the first encode (found by the tokenizer_json fuzz target).
fn check_templates(bytes: &[u8]) -> Result<()> {
    use serde_json::Value;
    #[derive(serde::Deserialize)]
    struct Doc {
        #[serde(default)]
        post_processor: Option<Value>,
        #[serde(default)]
        model: Option<Value>,
    }
    fn walk(p: &Value) -> std::result::Result<(), String> {
        match p.get("type").and_then(Value::as_str) {
            Some("Sequence") => p
                .get("processors")
                .and_then(Value::as_array)
                .map_or(Ok(()), |list| list.iter().try_for_each(walk)),
            Some("TemplateProcessing") => {
                let known = p.get("special_tokens").and_then(Value::as_object);
                for template in ["single", "pair"] {
                    let pieces = p.get(template).and_then(Value::as_array);
                    for piece in pieces.into_iter().flatten() {
                        let id = piece
                            .get("SpecialToken")
                            .and_then(|t| t.get("id"))
                            .and_then(Value::as_str);
                        if let Some(id) = id {
                            if !known.is_some_and(|k| k.contains_key(id)) {
                                return Err(format!(
                                    "post_processor: the {template} template names the special \
                                     token `{id}`, which `special_tokens` does not define"
                                ));
                            }
                        }
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    let doc: Doc =
        serde_json::from_slice(bytes).map_err(|e| tok_err("invalid tokenizer.json", e))?;
    if let Some(model) = &doc.model {
        check_bpe_merges(model).map_err(|m| tok_err("invalid tokenizer.json", m))?;
    }
    match doc.post_processor {
        Some(p) => walk(&p).map_err(|m| tok_err("invalid tokenizer.json", m)),
        None => Ok(()),
    }
}

/// Every BPE merge must join two vocabulary tokens into a third. The
/// `tokenizers` crate checks that, but only after copying the joined bytes
/// into a buffer as long as the longest vocabulary token, so a merge whose
/// result is longer panics instead (found by the tokenizer_json fuzz
/// target); and it strips a `continuing_subword_prefix` from the second
/// token by byte count without checking the token starts with it.
fn check_bpe_merges(model: &serde_json::Value) -> std::result::Result<(), String> {
    use serde_json::Value;
    if model.get("type").and_then(Value::as_str) != Some("BPE") {
        return Ok(());
    }
    let (Some(vocab), Some(merges)) = (
        model.get("vocab").and_then(Value::as_object),
        model.get("merges").and_then(Value::as_array),
    ) else {
        return Ok(());
    };
    let prefix = model
        .get("continuing_subword_prefix")
        .and_then(Value::as_str)
        .unwrap_or("");
    for (i, merge) in merges.iter().enumerate() {
        let (a, b) = match merge {
            Value::String(s) => match s.split_once(' ') {
                Some(pair) => pair,
                None => continue,
            },
            Value::Array(pair) => match (
                pair.first().and_then(Value::as_str),
                pair.get(1).and_then(Value::as_str),
            ) {
                (Some(a), Some(b)) => (a, b),
                _ => continue,
            },
            _ => continue,
        };
        let Some(rest) = b.strip_prefix(prefix) else {
            return Err(format!(
                "model.merges[{i}]: the second token {b:?} does not start with the \
                 continuing_subword_prefix {prefix:?}"
            ));
        };
        let joined = format!("{a}{rest}");
        if !vocab.contains_key(&joined) {
            return Err(format!(
                "model.merges[{i}]: {a:?} + {b:?} makes {joined:?}, which is not in the vocabulary"
            ));
        }
    }
    Ok(())
}

fn tok_err(context: &str, e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(format!("{context}: {e}"))
}

impl Tokenizer {
    /// Reads a HF `tokenizer.json`. BOS/EOS are taken from what its
    /// post-processor adds around a text (override with [`Self::with_bos_eos`]).
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self> {
        // The `tokenizers` crate (0.23) panics, rather than failing, on a JSON
        // syntax error inside the `decoder` value (`expect("Helper")`; found
        // by the tokenizer_json fuzz target). Checking the whole document
        // first turns every such file into an error; on valid JSON that code
        // path cannot fail.
        serde_json::from_slice::<ValidJson>(bytes)
            .map_err(|e| tok_err("invalid tokenizer.json", e))?;
        check_templates(bytes)?;
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| tok_err("invalid tokenizer.json", e))?;
        let mut t = Tokenizer {
            inner,
            bos: None,
            eos: None,
            add_bos: false,
            add_eos: false,
            bytes_per_token: Default::default(),
        };
        // Encode a probe with and without special tokens: what appears before
        // the plain ids is the BOS, what appears after is the EOS.
        let plain = t
            .inner
            .encode("a", false)
            .map_err(|e| tok_err("probing tokenizer.json", e))?;
        let full = t
            .inner
            .encode("a", true)
            .map_err(|e| tok_err("probing tokenizer.json", e))?;
        let (p, f) = (plain.get_ids(), full.get_ids());
        if let Some(at) = f
            .windows(p.len().max(1))
            .position(|w| w == p)
            .filter(|_| !p.is_empty())
        {
            if at == 1 {
                t.bos = f.first().copied();
            }
            if f.len() == at + p.len() + 1 {
                t.eos = f.last().copied();
            }
        }
        Ok(t)
    }

    /// Builds the tokenizer a GGUF file describes (`tokenizer.ggml.*`).
    pub fn from_gguf(gguf: &GgufFile) -> Result<Self> {
        from_gguf::build(gguf)
    }

    /// Overrides the BOS and EOS ids (e.g. from `tokenizer_config.json`).
    pub fn with_bos_eos(mut self, bos: Option<u32>, eos: Option<u32>) -> Result<Self> {
        for id in [bos, eos].into_iter().flatten() {
            self.check_id(id)?;
        }
        self.bos = bos;
        self.eos = eos;
        Ok(self)
    }

    fn check_id(&self, id: u32) -> Result<()> {
        if (id as usize) < self.vocab_size() {
            Ok(())
        } else {
            Err(Error::Tokenizer(format!(
                "token id {id} is outside the vocabulary of {} tokens",
                self.vocab_size()
            )))
        }
    }

    /// Token ids for `text`. Special tokens written in the text (e.g.
    /// `<|im_start|>`) become their ids; `add_special` adds BOS/EOS as the
    /// vocabulary asks.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        Ok(self.encode_with_offsets(text, add_special)?.ids)
    }

    /// As [`Self::encode`], with the byte range of `text` behind each token.
    pub fn encode_with_offsets(&self, text: &str, add_special: bool) -> Result<Encoding> {
        let enc = self
            .inner
            .encode(text, add_special)
            .map_err(|e| tok_err(&format!("encoding {} bytes of text", text.len()), e))?;
        let mut ids = Vec::with_capacity(enc.len() + 2);
        let mut offsets = Vec::with_capacity(enc.len() + 2);
        if add_special && self.add_bos {
            if let Some(bos) = self.bos {
                ids.push(bos);
                offsets.push((0, 0));
            }
        }
        ids.extend_from_slice(enc.get_ids());
        offsets.extend_from_slice(enc.get_offsets());
        if add_special && self.add_eos {
            if let Some(eos) = self.eos {
                ids.push(eos);
                offsets.push((text.len(), text.len()));
            }
        }
        Ok(Encoding { ids, offsets })
    }

    /// Text for `ids`; `skip_special` drops special tokens. Ids outside the
    /// vocabulary are an error. Byte sequences that are not valid UTF-8
    /// (a multi-byte character cut between tokens) decode to U+FFFD.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        for &id in ids {
            self.check_id(id)?;
        }
        self.inner
            .decode(ids, skip_special)
            .map_err(|e| tok_err("decoding", e))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Number of ids, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The most bytes of input text that one token can stand for, when the
    /// tokenizer's steps bound it: then a text of `n` bytes is at least
    /// `n.div_ceil(b)` tokens, known before the text is tokenized (what the
    /// scorer's token limit uses to refuse a huge step without tokenizing
    /// it). `b` is the longest vocabulary entry (added tokens included; a
    /// byte-level entry is at least as long as the bytes it stands for),
    /// times what a normalizer can shrink a text by (4 for Unicode
    /// normalization or lowercasing: `𝐀` U+1D400 is 4 bytes, its NFKC `A`
    /// one). `None` where a step can drop text, so that a long text may be
    /// few tokens: a normalizer that strips or removes characters
    /// (BERT's, `Strip`, `StripAccents`, `Nmt`, a SentencePiece charsmap, a
    /// `Replace` with a regex or by nothing), a pre-tokenizer that removes
    /// whitespace or delimiters, or a model that fuses unknown text into
    /// one token (BPE with `fuse_unk`, WordPiece, WordLevel, Unigram).
    pub fn max_input_bytes_per_token(&self) -> Option<usize> {
        *self
            .bytes_per_token
            .get_or_init(|| bytes_per_token(&self.inner))
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }
}

/// See [`Tokenizer::max_input_bytes_per_token`].
fn bytes_per_token(inner: &tokenizers::Tokenizer) -> Option<usize> {
    match inner.get_model() {
        tokenizers::models::ModelWrapper::BPE(bpe)
            if !(bpe.fuse_unk && bpe.unk_token.is_some()) => {}
        _ => return None,
    }
    let shrink = match inner.get_normalizer() {
        None => 1,
        Some(n) => normalizer_shrink(&serde_json::to_value(n).ok()?)?,
    };
    if let Some(p) = inner.get_pre_tokenizer() {
        if !pre_tokenizer_keeps_text(&serde_json::to_value(p).ok()?) {
            return None;
        }
    }
    // An unknown character (BPE without byte fallback) is one token of up
    // to 4 bytes whatever its entry's length.
    let longest = inner.get_vocab(true).keys().map(String::len).max()?.max(4);
    longest.checked_mul(shrink)
}

/// How many bytes of input one byte of a normalizer's output can come
/// from, as the normalizer's JSON describes it; `None` when unbounded.
fn normalizer_shrink(n: &serde_json::Value) -> Option<usize> {
    match n.get("type")?.as_str()? {
        "NFC" | "NFD" | "NFKC" | "NFKD" | "Lowercase" => Some(4),
        "Prepend" | "ByteLevel" => Some(1),
        "Replace" => {
            let pattern = n.get("pattern")?.get("String")?.as_str()?;
            let content = n.get("content")?.as_str()?;
            if content.is_empty() {
                return None;
            }
            Some(pattern.len().div_ceil(content.len()).max(1))
        }
        "Sequence" => n
            .get("normalizers")?
            .as_array()?
            .iter()
            .try_fold(1usize, |acc, m| acc.checked_mul(normalizer_shrink(m)?)),
        _ => None,
    }
}

/// Whether a pre-tokenizer (as JSON) keeps every byte of its input.
fn pre_tokenizer_keeps_text(p: &serde_json::Value) -> bool {
    let kept =
        |p: &serde_json::Value| p.get("behavior").and_then(|b| b.as_str()) != Some("Removed");
    match p.get("type").and_then(|t| t.as_str()) {
        Some("ByteLevel" | "Metaspace" | "Digits" | "UnicodeScripts" | "FixedLength") => true,
        Some("Split" | "Punctuation") => kept(p),
        Some("Sequence") => p
            .get("pretokenizers")
            .and_then(|v| v.as_array())
            .is_some_and(|v| v.iter().all(pre_tokenizer_keeps_text)),
        _ => false,
    }
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("add_bos", &self.add_bos)
            .field("add_eos", &self.add_eos)
            .finish()
    }
}
