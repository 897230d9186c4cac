//! A one-shot channel whose receiving end is a future: how a buffer-map
//! callback hands its result to async code without an executor-specific
//! dependency (the same code runs in browsers, where the browser drives the
//! callback, and natively, where `device.poll` does).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    closed: bool,
    waker: Option<Waker>,
}

pub(crate) struct Sender<T>(Arc<Mutex<Slot<T>>>);
pub(crate) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub(crate) fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        closed: false,
        waker: None,
    }));
    (Sender(slot.clone()), Receiver(slot))
}

fn lock<T>(m: &Mutex<Slot<T>>) -> std::sync::MutexGuard<'_, Slot<T>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        lock(&self.0).value = Some(value);
        // Drop wakes the receiver.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut slot = lock(&self.0);
        slot.closed = true;
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    /// `None` when the sender was dropped without sending.
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut slot = lock(&self.0);
        if let Some(v) = slot.value.take() {
            return Poll::Ready(Some(v));
        }
        if slot.closed {
            return Poll::Ready(None);
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::oneshot;

    #[test]
    fn delivers_the_value_or_none_when_the_sender_is_dropped() {
        let (tx, rx) = oneshot();
        let h = std::thread::spawn(move || tx.send(7));
        assert_eq!(pollster::block_on(rx), Some(7));
        h.join().unwrap();
        let (tx, rx) = oneshot::<u8>();
        drop(tx);
        assert_eq!(pollster::block_on(rx), None);
    }
}
