//! `verify-stream`'s reader of a streamed completion (`StepStream`): the
//! server-sent-event decoder, the chunk parser (strict JSON, duplicate keys
//! refused) and the step cutter. The first byte picks how the input is
//! handed over: bit 7 set, as chunks without SSE framing (`push_chunk`,
//! one per line); otherwise as bytes in pieces of `sel & 0x7f` + 1 bytes
//! (any split: mid-line, mid-character). Any stream may fail; none may
//! panic, hang or allocate without bound. Every step that comes out is
//! non-empty, numbered in order, within `MAX_STEP_BYTES`, and its span
//! follows the one before; at most one `Finished` comes out, last, counting
//! the steps; nothing comes out after an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stepscore::stream::{StepStream, StreamItem, MAX_STEP_BYTES};

fn drain(s: &mut StepStream, seen: &mut Seen) {
    while let Some(item) = s.next_item() {
        assert!(
            !seen.failed && !seen.finished,
            "an item after the end: {item:?}"
        );
        match item {
            Ok(StreamItem::Text { .. }) => {}
            Ok(StreamItem::Step {
                step,
                text,
                start,
                end,
            }) => {
                assert_eq!(step, seen.steps);
                assert!(!text.is_empty() && text.len() <= MAX_STEP_BYTES);
                assert!(start <= end && start >= seen.end);
                seen.steps += 1;
                seen.end = end;
            }
            Ok(StreamItem::Finished(f)) => {
                assert_eq!(f.steps, seen.steps);
                seen.finished = true;
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                seen.failed = true;
            }
        }
    }
}

#[derive(Default)]
struct Seen {
    steps: usize,
    end: usize,
    finished: bool,
    failed: bool,
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let mut s = StepStream::new("fuzz");
    let mut seen = Seen::default();
    if sel & 0x80 != 0 {
        let Ok(text) = std::str::from_utf8(body) else {
            return;
        };
        for line in text.split('\n') {
            if line == "[DONE]" {
                s.end(None);
            } else if s.push_chunk(line).is_err() {
                seen.failed = true;
                break;
            }
            drain(&mut s, &mut seen);
        }
        if !seen.failed {
            s.end(Some("stop"));
            drain(&mut s, &mut seen);
        }
    } else {
        let piece = usize::from(sel & 0x7f) + 1;
        for part in body.chunks(piece) {
            s.push(part);
            drain(&mut s, &mut seen);
        }
        s.close();
        drain(&mut s, &mut seen);
        // A closed stream always ends: finished or failed.
        assert!(seen.finished || seen.failed);
        assert!(s.ended());
    }
});
