//! `stepscore serve`'s request bodies: the parsers of `/get_reward`,
//! `/v1/score_steps`, `/pooling` and `/classify` (the server's own files,
//! included here, so what is fuzzed is what is served), with no socket. Any body may be
//! refused; none may panic, hang or allocate without bound; a body that is
//! read gives at most `max_traces` slots, and every trace in a slot obeys
//! the server's per-trace bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscore::segment::Segmenter;

#[path = "../../crates/stepscore-cli/src/commands/serve/request.rs"]
#[allow(dead_code)]
mod request;

#[path = "../../crates/stepscore-cli/src/commands/serve/vllm.rs"]
#[allow(dead_code)]
mod vllm;

use request::{Limits, Slot};

/// Token ids as code points: the served tokenizer's stand-in.
fn decode(ids: &[u32]) -> Result<String, String> {
    ids.iter()
        .map(|&i| char::from_u32(i).ok_or_else(|| format!("no token {i}")))
        .collect()
}

const LIMITS: Limits = Limits {
    max_traces: 64,
    max_trace_bytes: 4096,
};

fn check(slots: &[Slot]) {
    assert!(slots.len() <= LIMITS.max_traces);
    for t in slots.iter().flatten() {
        let bytes = t.problem.len() + t.steps.iter().map(|s| s.text.len()).sum::<usize>();
        assert!(bytes <= LIMITS.max_trace_bytes);
        assert!(!t.steps.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    let seg = Segmenter::Auto;
    if let Ok(slots) = request::get_reward(data, &seg, &LIMITS) {
        check(&slots);
    }
    if let Ok(r) = request::score(data, &seg, &LIMITS) {
        check(&r.slots);
    }
    for route in [vllm::Route::Pooling, vllm::Route::Classify] {
        if let Ok(r) = vllm::read(data, route, &LIMITS, &seg, &decode) {
            check(&r.slots);
        }
    }
});
