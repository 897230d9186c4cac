//! SentencePiece vocabularies in GGUF (`tokenizer.ggml.model = "llama"`:
//! Llama 2, Mistral, Math-Shepherd, Gemma). llama.cpp tokenizes them by repeatedly
//! joining the adjacent pair whose joined text is the highest-scoring token,
//! with spaces written as "▁", a "▁" before each text run, and unknown
//! characters spelled as `<0xXX>` byte tokens. A BPE whose merges are ranked
//! by the score of the token they produce makes the same choices; the GGUF
//! stores scores, not merges, so the merges are derived here.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::AddedToken;

use super::Tokenizer;
use crate::error::{Error, Result};
use crate::format::gguf::GgufFile;

use super::gguf_vocab::{
    as_tokenizer_error, TYPE_BYTE, TYPE_CONTROL, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_USER_DEFINED,
};

/// Longest token (in chars) whose splits are searched for merges; real
/// vocabularies stay far below, a hostile one cannot make this quadratic.
const MAX_TOKEN_CHARS: usize = 256;

pub(super) fn build(g: &GgufFile) -> Result<Tokenizer> {
    let file = g.file_name.as_str();
    let err = |msg: String| Error::Tokenizer(format!("{file}: {msg}"));
    let meta = as_tokenizer_error;
    let tokens = g.get_str_array("tokenizer.ggml.tokens").map_err(meta)?;
    let n = tokens.len();
    if n == 0 || n > u32::MAX as usize {
        return Err(err(format!("tokenizer.ggml.tokens has {n} entries")));
    }
    let scores = g.get_f32_array("tokenizer.ggml.scores").map_err(meta)?;
    let types = g.get_i32_array("tokenizer.ggml.token_type").map_err(meta)?;
    if scores.len() != n || types.len() != n {
        return Err(err(format!(
            "{n} tokens but {} scores and {} token types",
            scores.len(),
            types.len()
        )));
    }
    let mut vocab = Vocab::with_capacity(n);
    for (id, tok) in tokens.iter().enumerate() {
        if let Some(first) = vocab.insert(tok.clone(), id as u32) {
            return Err(err(format!(
                "token {tok:?} appears twice (ids {first} and {id})"
            )));
        }
    }
    // Every way of writing a normal token as two tokens is a merge, ranked by
    // the produced token's score (higher first), then by its id.
    let mut ranked: Vec<(f32, u32, String, String)> = Vec::new();
    for (id, tok) in tokens.iter().enumerate() {
        if types[id] != TYPE_NORMAL && types[id] != TYPE_USER_DEFINED {
            continue;
        }
        let bounds: Vec<usize> = tok.char_indices().map(|(i, _)| i).skip(1).collect();
        if bounds.len() + 1 > MAX_TOKEN_CHARS {
            continue;
        }
        for i in bounds {
            let (l, r) = tok.split_at(i);
            let (Some(&li), Some(&ri)) = (vocab.get(l), vocab.get(r)) else {
                continue;
            };
            let pieces_normal = [li, ri].iter().all(|&p| {
                types[p as usize] == TYPE_NORMAL || types[p as usize] == TYPE_USER_DEFINED
            });
            if pieces_normal {
                ranked.push((scores[id], id as u32, l.to_string(), r.to_string()));
            }
        }
    }
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let merges = ranked.into_iter().map(|(_, _, l, r)| (l, r)).collect();
    let unk = types
        .iter()
        .position(|&t| t == TYPE_UNKNOWN)
        .map(|i| tokens[i].clone());
    let mut builder = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .byte_fallback(types.contains(&TYPE_BYTE));
    if let Some(u) = unk {
        builder = builder.unk_token(u);
    }
    let bpe = builder
        .build()
        .map_err(|e| err(format!("building the SentencePiece model: {e}")))?;

    let mut inner = tokenizers::Tokenizer::new(bpe);
    let add_space_prefix = g
        .opt_bool("tokenizer.ggml.add_space_prefix")
        .map_err(meta)?
        .unwrap_or(true);
    let mut norm = Vec::new();
    if add_space_prefix {
        norm.push(Prepend::new("▁".to_string()).into());
    }
    norm.push(
        Replace::new(" ", "▁")
            .map_err(|e| err(format!("normalizer: {e}")))?
            .into(),
    );
    inner
        .with_normalizer(Some(NormalizerSequence::new(norm)))
        .map_err(|e| err(format!("normalizer: {e}")))?;
    let mut dec = vec![
        Replace::new("▁", " ")
            .map_err(|e| err(format!("decoder: {e}")))?
            .into(),
        ByteFallback::default().into(),
        Fuse::default().into(),
    ];
    if add_space_prefix {
        dec.push(Strip::new(' ', 1, 0).into());
    }
    inner.with_decoder(Some(DecoderSequence::new(dec)));

    let special: Vec<AddedToken> = tokens
        .iter()
        .zip(types)
        .filter(|(t, &ty)| !t.is_empty() && (ty == TYPE_CONTROL || ty == TYPE_UNKNOWN))
        .map(|(t, _)| AddedToken::from(t.clone(), true))
        .collect();
    inner
        .add_special_tokens(special)
        .map_err(|e| err(format!("adding control tokens: {e}")))?;
    // llama.cpp matches user-defined tokens in the raw text before the
    // SentencePiece merges, special tokens parsed or not: Gemma's runs of
    // spaces and newlines are such tokens ("    " is one token, not four "▁").
    let user: Vec<AddedToken> = tokens
        .iter()
        .zip(types)
        .filter(|(t, &ty)| !t.is_empty() && ty == TYPE_USER_DEFINED)
        .map(|(t, _)| AddedToken::from(t.clone(), false).normalized(false))
        .collect();
    if !user.is_empty() {
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
    Ok(Tokenizer {
        inner,
        bos: id_key("tokenizer.ggml.bos_token_id")?,
        eos: id_key("tokenizer.ggml.eos_token_id")?,
        // SentencePiece models add BOS unless told otherwise (llama.cpp's default).
        add_bos: g
            .opt_bool("tokenizer.ggml.add_bos_token")
            .map_err(meta)?
            .unwrap_or(true),
        add_eos: g
            .opt_bool("tokenizer.ggml.add_eos_token")
            .map_err(meta)?
            .unwrap_or(false),
        bytes_per_token: Default::default(),
    })
}
