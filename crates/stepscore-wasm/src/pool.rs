//! The threaded build's thread pool (wasm32 with `atomics`): the JS host
//! (pkg/src/threads.js) makes a [`PoolBuilder`] and calls
//! [`PoolBuilder::build`]: the core's pool (`stepscore::engine::build_pool`) puts one rayon
//! thread per worker into a channel, and waits for none. The host then
//! starts one worker per thread, each instantiating this module on the same
//! shared memory and calling [`pool_worker_run`] with a
//! [`PoolBuilder::receiver`] handle, which takes a thread out of the channel
//! (already there: no wait) and runs it. Jobs given to the pool before its
//! workers run simply wait for them.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};

use stepscore::engine::{build_pool, ThreadBuilder};
use wasm_bindgen::prelude::*;

type Handoff = Mutex<Receiver<ThreadBuilder>>;

/// A pool about to start: `threads` workers besides the calling thread.
#[wasm_bindgen]
pub struct PoolBuilder {
    threads: usize,
    sender: SyncSender<ThreadBuilder>,
    receiver: Arc<Handoff>,
}

#[wasm_bindgen]
impl PoolBuilder {
    #[wasm_bindgen(constructor)]
    pub fn new(threads: usize) -> PoolBuilder {
        // Capacity for every thread: `build` never waits on a send.
        let (sender, receiver) = sync_channel(threads.max(1));
        PoolBuilder {
            threads,
            sender,
            receiver: Arc::new(Mutex::new(receiver)),
        }
    }

    #[wasm_bindgen(getter)]
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// A handle for one worker's [`pool_worker_run`]: an address in the
    /// shared memory holding its own reference to the channel, so the
    /// builder may be freed before the worker takes its thread.
    pub fn receiver(&self) -> usize {
        Arc::into_raw(Arc::clone(&self.receiver)) as usize
    }

    /// Builds the pool, its threads queued for [`pool_worker_run`]; call it
    /// before starting the workers.
    pub fn build(&self) -> Result<(), JsValue> {
        let sender = self.sender.clone();
        build_pool(self.threads, move |thread| {
            sender
                .send(thread)
                .map_err(|_| std::io::Error::other("the pool's channel is closed"))
        })
        .map_err(|e| JsValue::from(js_sys::Error::new(&e.to_string())))
    }
}

/// A pool worker's life: takes its rayon thread (queued by
/// [`PoolBuilder::build`]), then runs it for good: the worker's event loop
/// stays in here.
///
/// # Safety (of the handle)
/// `receiver` must come from [`PoolBuilder::receiver`], once per call.
#[wasm_bindgen(js_name = poolWorkerRun)]
pub fn pool_worker_run(receiver: usize) -> Result<(), JsValue> {
    // SAFETY: the address is an `Arc::into_raw` of a live `Arc<Handoff>`
    // (PoolBuilder::receiver), taken back exactly once here.
    let handoff = unsafe { Arc::from_raw(receiver as *const Handoff) };
    let thread = handoff
        .lock()
        .map_err(|_| JsValue::from_str("the pool's channel is poisoned"))?
        .try_recv()
        .map_err(|_| JsValue::from_str("no pool thread is waiting for this worker"))?;
    drop(handoff);
    thread.run();
    Ok(())
}
