//! The one way the CPU engine runs work in parallel: [`for_each`] and [`map`]
//! hand each item to its own thread, the first to the calling thread. Every
//! parallel site (matmuls, activation quantization, attention) calls these;
//! none names a thread API. The caller decides how work is split, so the
//! result of each output never depends on which thread computed it.
//!
//! - natively: a rayon pool of [`available`] threads
//!   (`available_parallelism`), started on first use. [`install`] runs a
//!   whole pass on one of its threads, so each parallel site inside it hands
//!   its items to the pool's other threads and, when none of them is free
//!   (another process has the cores), runs them itself instead of waiting:
//!   a decode step has ~200 sites, and a thread started per site (or woken
//!   and waited for) cost more than the work on a loaded machine;
//! - wasm32 with the `atomics` target feature (the npm package's threaded
//!   build): a rayon pool whose threads are Web Workers or Node
//!   `worker_threads` that the JS host starts ([`build_pool`]); the calling
//!   thread takes the first item and the pool the rest;
//! - plain wasm32: one thread, the items in order.
//!
//! [`default_threads`] is the one rule for how many threads a process uses
//! when it names no count: the CPUs it may use, capped by `OMP_NUM_THREADS`
//! (how Ray tells an actor its `num_cpus` and torchrun each rank its share),
//! so N trainer ranks on one machine do not each start every core's worth.

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
mod pool {
    use std::sync::OnceLock;

    /// The pool, set once by [`super::build_pool`]. Not rayon's global pool:
    /// building that waits for every thread to start, and the thread that
    /// builds it is the one that starts the workers.
    pub(super) static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();

    pub(super) fn threads() -> usize {
        POOL.get().map_or(0, |p| p.current_num_threads())
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod pool {
    use std::sync::OnceLock;

    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

    /// The native pool, built on first use; `None` when the OS refused its
    /// threads (then every site runs on the calling thread).
    pub(super) fn get() -> Option<&'static rayon::ThreadPool> {
        POOL.get_or_init(|| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(super::available())
                .thread_name(|i| format!("stepscore-par-{i}"))
                .build()
                .ok()
        })
        .as_ref()
    }
}

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
mod pool {
    pub(super) fn threads() -> usize {
        0
    }
}

/// Threads this build can run at once: the cores natively, the pool plus the
/// calling thread in the threaded wasm build, else 1.
pub fn available() -> usize {
    #[cfg(target_arch = "wasm32")]
    return pool::threads() + 1;
    #[cfg(not(target_arch = "wasm32"))]
    return std::thread::available_parallelism().map_or(1, |n| n.get());
}

/// Threads a request of `requested` gets: natively what was asked (at least
/// 1); on wasm32 no more than [`available`].
pub fn usable(requested: usize) -> usize {
    if cfg!(target_arch = "wasm32") {
        requested.clamp(1, available())
    } else {
        requested.max(1)
    }
}

/// How many engine threads a process gets when it names no count, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBudget {
    pub threads: usize,
    /// Where the count came from, for `info` and `doctor` output.
    pub source: String,
}

/// The thread count for a request of 0: [`available`] (natively the CPUs this
/// process may use: its affinity mask and cgroup CPU quota, as
/// `available_parallelism` reads them), capped by `OMP_NUM_THREADS` when that
/// is set to a smaller count. Ray sets it in every worker to the CPUs the
/// actor or task reserved (at least 1), torchrun to 1 per rank; a process
/// that shares its cores that way gets its share, not every core.
pub fn default_threads() -> ThreadBudget {
    budget(
        available(),
        std::env::var("OMP_NUM_THREADS").ok().as_deref(),
    )
}

fn budget(cpus: usize, omp: Option<&str>) -> ThreadBudget {
    let cpus_source = || {
        if cfg!(target_arch = "wasm32") {
            format!("{cpus}: the threads of this wasm build")
        } else {
            format!("{cpus}: the CPUs this process may use (affinity, cgroup quota)")
        }
    };
    let Some(omp) = omp.map(str::trim).filter(|v| !v.is_empty()) else {
        return ThreadBudget {
            threads: cpus,
            source: cpus_source(),
        };
    };
    // OpenMP's syntax: a list for nested levels, the first is the outer one.
    let first = omp.split(',').next().unwrap_or("").trim();
    match first.parse::<usize>() {
        Ok(n) if n >= 1 && n < cpus => ThreadBudget {
            threads: n,
            source: format!("{n}: OMP_NUM_THREADS={omp} (of {cpus} CPUs this process may use)"),
        },
        Ok(n) if n >= 1 => ThreadBudget {
            threads: cpus,
            source: format!("{}; OMP_NUM_THREADS={omp} is not fewer", cpus_source()),
        },
        _ => ThreadBudget {
            threads: cpus,
            source: format!(
                "{}; OMP_NUM_THREADS={omp:?} is not a thread count and was not used",
                cpus_source()
            ),
        },
    }
}

/// Whether [`for_each`] runs items on more than one thread here: always
/// natively; in the threaded wasm build once its pool is started.
pub fn pooled() -> bool {
    #[cfg(target_arch = "wasm32")]
    return pool::threads() > 0;
    #[cfg(not(target_arch = "wasm32"))]
    return true;
}

/// Runs `f` on every item, each on its own thread, the first on the calling
/// thread; returns when all are done. A panic in `f` propagates (as
/// `std::thread::scope` does).
pub fn for_each<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    if items.len() <= 1 || !pooled() {
        items.into_iter().for_each(f);
    } else {
        scoped(items, &f);
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn scoped<T: Send>(items: Vec<T>, f: &(impl Fn(T) + Sync)) {
    let Some(pool) = pool::get() else {
        items.into_iter().for_each(f);
        return;
    };
    let mut items = items.into_iter();
    let first = items.next();
    // In place: the calling thread runs the first item; on a pool thread
    // (inside `install`) it also runs any item no other thread has taken.
    pool.in_place_scope(|s| {
        for item in items {
            s.spawn(move |_| f(item));
        }
        if let Some(item) = first {
            f(item);
        }
    });
}

/// Runs `op` on a thread of the native pool (at once when already on one),
/// so the parallel sites inside it never wait for a thread that has not
/// started: what the pool's other threads do not take, this one runs. Once
/// per pass (a forward, a vocabulary projection). Elsewhere `op()`.
pub fn install<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(pool) = pool::get() {
        return pool.install(op);
    }
    op()
}

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn scoped<T: Send>(items: Vec<T>, f: &(impl Fn(T) + Sync)) {
    let Some(pool) = pool::POOL.get() else {
        items.into_iter().for_each(f);
        return;
    };
    let mut items = items.into_iter();
    let first = items.next();
    // In place: the calling thread (a worker, or Node's main thread, never a
    // page's main thread, which cannot wait) runs the first item itself.
    pool.in_place_scope(|s| {
        for item in items {
            s.spawn(move |_| f(item));
        }
        if let Some(item) = first {
            f(item);
        }
    });
}

#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
fn scoped<T: Send>(items: Vec<T>, f: &(impl Fn(T) + Sync)) {
    items.into_iter().for_each(f);
}

/// [`for_each`] that keeps each item's result, in item order.
pub fn map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let jobs: Vec<(T, &mut Option<R>)> = items.into_iter().zip(slots.iter_mut()).collect();
    for_each(jobs, |(item, slot)| *slot = Some(f(item)));
    // Every slot was filled: for_each returns only after each job ran.
    slots.into_iter().flatten().collect()
}

/// What a wasm host must do with each of the pool's threads: run it (its
/// `run()`) on a worker that shares this module's memory.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub use rayon::ThreadBuilder;

/// Builds the threaded wasm build's pool of `threads` threads (the calling
/// thread comes on top), handing each to `spawn`, which must not wait for it
/// to run: the pool's jobs wait until the host starts the threads. Once per
/// module instance: a second call fails, as does `threads == 0`.
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub fn build_pool(
    threads: usize,
    mut spawn: impl FnMut(ThreadBuilder) -> std::io::Result<()> + 'static,
) -> Result<(), crate::error::Error> {
    if threads == 0 {
        return Err(crate::error::Error::InvalidArgument(
            "a thread pool needs at least one thread".into(),
        ));
    }
    if pool::POOL.get().is_some() {
        return Err(crate::error::Error::InvalidArgument(
            "the thread pool is already built".into(),
        ));
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .spawn_handler(move |t| spawn(t))
        .build()
        .map_err(|e| crate::error::Error::InvalidArgument(format!("the thread pool: {e}")))?;
    pool::POOL.set(built).map_err(|_| {
        crate::error::Error::InvalidArgument("the thread pool is already built".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_each_runs_every_item_once() {
        let mut out = vec![0u64; 7];
        let jobs: Vec<(u64, &mut u64)> = (0..7).zip(out.iter_mut()).collect();
        for_each(jobs, |(i, o)| *o = i * i + 1);
        assert_eq!(out, [1, 2, 5, 10, 17, 26, 37]);
        for_each(Vec::<u8>::new(), |_| unreachable!("no items"));
    }

    #[test]
    fn map_keeps_item_order() {
        let got = map((0..9).collect(), |i: usize| i * 10);
        assert_eq!(got, (0..9).map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(map(vec!["a"], str::len), [1]);
    }

    /// A pass inside `install` runs its sites on the pool, nested and with
    /// more items than the pool has threads, and gets every result in order.
    #[test]
    fn install_runs_nested_sites_to_completion() {
        let got = install(|| {
            map((0..4 * available() + 3).collect(), |i: usize| {
                map((0..5).collect(), |j: usize| i * 10 + j)
                    .into_iter()
                    .sum::<usize>()
            })
        });
        let want: Vec<usize> = (0..4 * available() + 3).map(|i| 50 * i + 10).collect();
        assert_eq!(got, want);
        // Already on a pool thread: runs at once, no second hop.
        assert_eq!(install(|| install(|| 7)), 7);
    }

    #[test]
    fn natively_requests_are_kept() {
        assert_eq!(usable(0), 1);
        assert_eq!(usable(16), 16);
        assert!(available() >= 1);
        assert!(pooled());
    }

    #[test]
    fn default_threads_follow_omp_num_threads_when_fewer() {
        let b = budget(8, None);
        assert_eq!(b.threads, 8);
        assert!(b.source.contains("may use"), "{}", b.source);
        // Ray's actor with num_cpus=2, torchrun's rank.
        assert_eq!(budget(8, Some("2")).threads, 2);
        assert!(budget(8, Some("2")).source.contains("OMP_NUM_THREADS=2"));
        assert_eq!(budget(8, Some("1")).threads, 1);
        assert_eq!(budget(8, Some(" 3,2 ")).threads, 3);
        // More than this process may use: the CPUs, said so.
        let more = budget(2, Some("16"));
        assert_eq!(more.threads, 2);
        assert!(more.source.contains("not fewer"), "{}", more.source);
        // Not a count: not used, and said so (never a silent reinterpretation).
        for bad in ["0", "-1", "four", "1.5"] {
            let b = budget(4, Some(bad));
            assert_eq!(b.threads, 4, "{bad}");
            assert!(
                b.source.contains("not a thread count"),
                "{bad}: {}",
                b.source
            );
        }
        assert_eq!(budget(4, Some("")).threads, 4);
    }
}
