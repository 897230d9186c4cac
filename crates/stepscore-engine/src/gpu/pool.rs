//! Device buffers: every buffer the engine creates is counted (live buffers
//! and bytes, for leak tests), and short-lived ones (activations, params,
//! readback staging) are recycled by size class instead of being recreated
//! on every call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};

/// What a buffer is for; buffers are only recycled within one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Usage {
    /// Kernel inputs/outputs: storage, copy source and destination.
    Storage,
    /// Small kernel parameters.
    Uniform,
    /// CPU-mappable staging for readback.
    Readback,
}

impl Usage {
    fn wgpu(self) -> wgpu::BufferUsages {
        use wgpu::BufferUsages as U;
        match self {
            Usage::Storage => U::STORAGE | U::COPY_DST | U::COPY_SRC,
            Usage::Uniform => U::UNIFORM | U::COPY_DST,
            Usage::Readback => U::MAP_READ | U::COPY_DST,
        }
    }
}

/// Counts of the device buffers this context holds, and of the bytes its
/// readback staging has carried to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Buffers alive on the device (weights, in-use and free pooled buffers).
    pub live_buffers: u64,
    pub live_bytes: u64,
    /// Of those, pooled buffers waiting for reuse.
    pub free_buffers: u64,
    pub free_bytes: u64,
    /// Bytes copied back to the host since the context was made.
    pub read_back_bytes: u64,
}

#[derive(Default)]
struct Counters {
    live_buffers: AtomicU64,
    live_bytes: AtomicU64,
    read_back_bytes: AtomicU64,
}

/// A device buffer that is counted while it lives.
pub(crate) struct TrackedBuffer {
    pub buffer: wgpu::Buffer,
    pub size: u64,
    counters: Arc<Counters>,
}

impl Drop for TrackedBuffer {
    fn drop(&mut self) {
        self.counters.live_buffers.fetch_sub(1, Ordering::Relaxed);
        self.counters
            .live_bytes
            .fetch_sub(self.size, Ordering::Relaxed);
    }
}

type FreeLists = HashMap<(Usage, u64), Vec<TrackedBuffer>>;

pub(crate) struct Pool {
    device: wgpu::Device,
    max_buffer_size: u64,
    counters: Arc<Counters>,
    free: Arc<Mutex<FreeLists>>,
}

/// A pooled buffer; dropping it returns it to its pool for reuse.
pub(crate) struct PooledBuffer {
    buf: Option<TrackedBuffer>,
    key: (Usage, u64),
    home: Weak<Mutex<FreeLists>>,
}

impl PooledBuffer {
    pub fn buffer(&self) -> Result<&wgpu::Buffer> {
        self.buf
            .as_ref()
            .map(|b| &b.buffer)
            .ok_or_else(|| Error::Gpu("pooled buffer used after release".into()))
    }
}

impl Drop for PooledBuffer {
    fn drop(&mut self) {
        if let (Some(buf), Some(home)) = (self.buf.take(), self.home.upgrade()) {
            lock(&home).entry(self.key).or_default().push(buf);
        }
    }
}

fn lock(m: &Mutex<FreeLists>) -> std::sync::MutexGuard<'_, FreeLists> {
    // A panic elsewhere while holding the lock leaves the lists consistent
    // (push/pop only), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The size a request of `size` bytes is rounded up to: powers of two up to
/// 1 MiB, then eighths of the next power of two (at most 12.5% slack), never
/// below 256 bytes.
pub(crate) fn size_class(size: u64) -> u64 {
    let size = size.max(256);
    let p = size.checked_next_power_of_two().unwrap_or(size);
    if p <= 1 << 20 || p == size {
        return p;
    }
    let step = p / 8;
    size.div_ceil(step).saturating_mul(step)
}

impl Pool {
    pub fn new(device: wgpu::Device, max_buffer_size: u64) -> Self {
        Pool {
            device,
            max_buffer_size,
            counters: Arc::default(),
            free: Arc::default(),
        }
    }

    /// A counted, unpooled buffer of exactly `size` bytes (model weights).
    pub fn create(
        &self,
        size: u64,
        usage: wgpu::BufferUsages,
        label: &str,
    ) -> Result<TrackedBuffer> {
        if size > self.max_buffer_size {
            return Err(Error::Gpu(format!(
                "{label}: a {size}-byte buffer is over the adapter's max_buffer_size of {} bytes",
                self.max_buffer_size
            )));
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        });
        self.counters.live_buffers.fetch_add(1, Ordering::Relaxed);
        self.counters.live_bytes.fetch_add(size, Ordering::Relaxed);
        Ok(TrackedBuffer {
            buffer,
            size,
            counters: self.counters.clone(),
        })
    }

    /// A buffer of at least `size` bytes, recycled when one is free.
    pub fn acquire(&self, usage: Usage, size: u64) -> Result<PooledBuffer> {
        let class = size_class(size).min(self.max_buffer_size).max(size);
        let key = (usage, class);
        let reused = lock(&self.free).get_mut(&key).and_then(Vec::pop);
        let buf = match reused {
            Some(b) => b,
            None => self.create(class, usage.wgpu(), "stepscore pooled buffer")?,
        };
        Ok(PooledBuffer {
            buf: Some(buf),
            key,
            home: Arc::downgrade(&self.free),
        })
    }

    /// Frees every pooled buffer not in use.
    pub fn trim(&self) {
        lock(&self.free).clear();
    }

    pub fn stats(&self) -> PoolStats {
        let free = lock(&self.free);
        let (free_buffers, free_bytes) = free
            .values()
            .flatten()
            .fold((0u64, 0u64), |(n, b), buf| (n + 1, b + buf.size));
        PoolStats {
            live_buffers: self.counters.live_buffers.load(Ordering::Relaxed),
            live_bytes: self.counters.live_bytes.load(Ordering::Relaxed),
            free_buffers,
            free_bytes,
            read_back_bytes: self.counters.read_back_bytes.load(Ordering::Relaxed),
        }
    }

    /// Counts `bytes` carried to the host by a readback.
    pub(crate) fn count_read_back(&self, bytes: u64) {
        self.counters
            .read_back_bytes
            .fetch_add(bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_the_request_with_bounded_slack() {
        assert_eq!(size_class(0), 256);
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(257), 512);
        assert_eq!(size_class(1 << 20), 1 << 20);
        // 1 MiB + 1: next power is 2 MiB, step 256 KiB -> 1.25 MiB.
        assert_eq!(size_class((1 << 20) + 1), (1 << 20) + (1 << 18));
        for s in [3u64, 1000, 70_000, 3_000_001, 123_456_789] {
            let c = size_class(s);
            assert!(c >= s && (c <= 256 || c - s <= c / 2), "{s} -> {c}");
        }
    }
}
