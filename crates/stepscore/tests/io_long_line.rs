//! A 100 MB line is rejected and skipped without ever holding 100 MB: the
//! input is generated lazily and a counting allocator records the peak of
//! live heap bytes. (Own test binary, so no other test's allocations count.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicUsize, Ordering};

use stepscore::io::{ReadOptions, TraceReader};
use stepscore::Error;

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn note_alloc(size: usize) {
    let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note_alloc(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            note_alloc(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Yields `head`, then `n` bytes of `x`, then `tail`, never materialising the middle.
struct Lazy {
    head: &'static [u8],
    n: u64,
    tail: &'static [u8],
}

impl Read for Lazy {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if !self.head.is_empty() {
            let k = self.head.len().min(out.len());
            out[..k].copy_from_slice(&self.head[..k]);
            self.head = &self.head[k..];
            return Ok(k);
        }
        if self.n > 0 {
            let k = (self.n.min(out.len() as u64)) as usize;
            out[..k].fill(b'x');
            self.n -= k as u64;
            return Ok(k);
        }
        let k = self.tail.len().min(out.len());
        out[..k].copy_from_slice(&self.tail[..k]);
        self.tail = &self.tail[k..];
        Ok(k)
    }
}

#[test]
fn hundred_megabyte_line_is_skipped_in_bounded_memory() {
    const N: u64 = 100 * 1024 * 1024;
    let input = Lazy {
        head: b"{\"problem\":\"p\",\"steps\":[\"a\"]}\n{\"problem\":\"",
        n: N,
        tail: b"\",\"steps\":[\"a\"]}\n{\"problem\":\"after\",\"steps\":[\"b\"],\"label\":0}\n",
    };
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let opts = ReadOptions {
        source_name: "big.jsonl".into(),
        ..Default::default()
    };
    let results: Vec<_> = TraceReader::new(BufReader::new(input), opts).collect();
    let peak = PEAK.load(Ordering::Relaxed) - base;

    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap().problem, "p");
    match &results[1] {
        Err(Error::Input { location, message }) => {
            assert_eq!((location.source.as_str(), location.line), ("big.jsonl", 2));
            let len = 12 + N + 16; // `{"problem":"` + x's + `","steps":["a"]}`
            assert!(
                message.contains(&format!("line of {len} bytes")),
                "{message}"
            );
            assert!(message.contains("16777216-byte limit"), "{message}");
        }
        other => panic!("expected the long line's error, got {other:?}"),
    }
    assert_eq!(results[2].as_ref().unwrap().problem, "after");
    // The default cap is 16 MiB; allow slack for the read buffer and results.
    assert!(
        peak < 24 << 20,
        "peak heap use {peak} bytes while reading a {N}-byte line"
    );
}
