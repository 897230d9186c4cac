//! tokenizer.json loading (the `tokenizers` crate's parser plus stepscore's
//! BOS/EOS probing), then encoding and decoding through whatever loaded.
//! Any input may be rejected; none may panic or allocate without bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscore::engine::Tokenizer;

fuzz_target!(|data: &[u8]| {
    let Ok(tok) = Tokenizer::from_json_bytes(data) else {
        return;
    };
    for text in [
        "Step 1: 12 + 30 = 42.\n\nSo the answer is 42.",
        "",
        "é日本🦀 <|im_start|>",
    ] {
        if let Ok(enc) = tok.encode_with_offsets(text, true) {
            assert_eq!(enc.ids.len(), enc.offsets.len());
            let _ = tok.decode(&enc.ids, false);
            let _ = tok.decode(&enc.ids, true);
        }
    }
});
