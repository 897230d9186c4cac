//! Builds a byte-level BPE tokenizer from GGUF `tokenizer.ggml.*` metadata,
//! following llama.cpp's reading of the same keys: tokens are ids in order,
//! merges are "left right" pairs by rank, control/unknown tokens are special
//! and, with user-defined ones, are matched in the raw text before splitting.

use super::gguf_vocab::{as_tokenizer_error, TYPE_CONTROL, TYPE_UNKNOWN, TYPE_USER_DEFINED};
use super::pretok::PreTokenizer;
use super::Tokenizer;
use crate::error::{Error, Result};
use crate::format::gguf::GgufFile;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

pub(super) fn build(g: &GgufFile) -> Result<Tokenizer> {
    let file = g.file_name.as_str();
    let err = |msg: String| Error::Tokenizer(format!("{file}: {msg}"));
    let meta = as_tokenizer_error;

    let model = g.get_str("tokenizer.ggml.model").map_err(meta)?;
    if model == "llama" {
        return super::spm::build(g);
    }
    if model != "gpt2" {
        return Err(err(format!(
            "tokenizer.ggml.model `{model}` is not supported (byte-level BPE `gpt2`, SentencePiece `llama`)"
        )));
    }
    let pre_name = g
        .opt_str("tokenizer.ggml.pre")
        .map_err(meta)?
        .ok_or_else(|| err("missing tokenizer.ggml.pre: cannot tell how to split text".into()))?;
    let pre = PreTokenizer::from_ggml_pre(pre_name).map_err(|e| err(e.to_string()))?;

    let tokens = g.get_str_array("tokenizer.ggml.tokens").map_err(meta)?;
    if tokens.is_empty() || tokens.len() > u32::MAX as usize {
        return Err(err(format!(
            "tokenizer.ggml.tokens has {} entries",
            tokens.len()
        )));
    }
    let n = tokens.len();
    let types = g.opt_i32_array("tokenizer.ggml.token_type").map_err(meta)?;
    if let Some(t) = types {
        if t.len() != n {
            return Err(err(format!(
                "tokenizer.ggml.token_type has {} entries for {n} tokens",
                t.len()
            )));
        }
    }

    let mut vocab = Vocab::with_capacity(n);
    for (id, tok) in tokens.iter().enumerate() {
        if let Some(first) = vocab.insert(tok.clone(), id as u32) {
            return Err(err(format!(
                "token {tok:?} appears twice in tokenizer.ggml.tokens (ids {first} and {id})"
            )));
        }
    }

    let merges_raw = g.get_str_array("tokenizer.ggml.merges").map_err(meta)?;
    let mut merges = Vec::with_capacity(merges_raw.len());
    for (rank, m) in merges_raw.iter().enumerate() {
        // Split at the first space after the first character, as llama.cpp
        // does, so a merge whose left side is itself a space still parses.
        let split = m
            .char_indices()
            .skip(1)
            .find(|&(_, c)| c == ' ')
            .map(|(i, _)| i);
        let Some(i) = split else {
            return Err(err(format!(
                "tokenizer.ggml.merges[{rank}] = {m:?} is not two tokens separated by a space"
            )));
        };
        let (left, right) = (&m[..i], &m[i + 1..]);
        for side in [left, right] {
            if !vocab.contains_key(side) {
                return Err(err(format!(
                    "tokenizer.ggml.merges[{rank}] = {m:?}: {side:?} is not in the vocabulary"
                )));
            }
        }
        merges.push((left.to_string(), right.to_string()));
    }

    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .ignore_merges(PreTokenizer::ignore_merges(pre_name))
        .build()
        .map_err(|e| err(format!("building the BPE model: {e}")))?;

    let mut splits: Vec<PreTokenizerWrapper> = Vec::new();
    for re in pre.regexes() {
        let s = Split::new(
            SplitPattern::Regex((*re).to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| err(format!("compiling the `{pre_name}` split regex: {e}")))?;
        splits.push(s.into());
    }
    // Bytes to the GPT-2 printable alphabet, after the regex splits.
    splits.push(ByteLevel::new(false, false, false).into());

    let mut inner = tokenizers::Tokenizer::new(bpe);
    inner.with_pre_tokenizer(Some(Sequence::new(splits)));
    inner.with_decoder(Some(ByteLevelDecoder::default()));

    if let Some(types) = types {
        let mut special = Vec::new();
        let mut user = Vec::new();
        for (tok, &ty) in tokens.iter().zip(types) {
            if tok.is_empty() {
                continue;
            }
            match ty {
                TYPE_CONTROL | TYPE_UNKNOWN => special.push(AddedToken::from(tok.clone(), true)),
                TYPE_USER_DEFINED => user.push(AddedToken::from(tok.clone(), false)),
                _ => {}
            }
        }
        inner
            .add_special_tokens(special)
            .map_err(|e| err(format!("adding control tokens: {e}")))?;
        inner
            .add_tokens(user)
            .map_err(|e| err(format!("adding user-defined tokens: {e}")))?;
    }

    let id_key = |key: &str| -> Result<Option<u32>> {
        match g.opt_u32(key).map_err(meta)? {
            Some(id) if id as usize >= n => Err(err(format!(
                "{key} = {id} is outside the vocabulary of {n} tokens"
            ))),
            other => Ok(other),
        }
    };
    let bos = id_key("tokenizer.ggml.bos_token_id")?;
    let eos = id_key("tokenizer.ggml.eos_token_id")?;
    // llama.cpp's defaults when the keys are absent: BOS for Llama 3 names.
    let add_bos = g
        .opt_bool("tokenizer.ggml.add_bos_token")
        .map_err(meta)?
        .unwrap_or(pre == PreTokenizer::Llama3);
    let add_eos = g
        .opt_bool("tokenizer.ggml.add_eos_token")
        .map_err(meta)?
        .unwrap_or(false);

    Ok(Tokenizer {
        inner,
        bos,
        eos,
        add_bos,
        add_eos,
        bytes_per_token: Default::default(),
    })
}
