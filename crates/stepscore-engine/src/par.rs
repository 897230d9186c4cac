//! The one way the CPU engine runs work in parallel: [`for_each`] and [`map`]
//! hand each item to its own thread, the first to the calling thread. Every
//! parallel site (matmuls, activation quantization, attention) calls these;
//! none names a thread API. The caller decides how work is split, so the
//! result of each output never depends on which thread computed it.
//!
//! - natively: a rayon pool per thread count, started on first use, so a
//!   scorer of N threads runs on N threads whatever the machine has
//!   ([`thread_count`] caps N at [`available`]). [`install`] runs a
//!   whole pass on one of its pool's threads, so each parallel site inside it hands
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
//! [`thread_count`] is the one rule for how many threads a scorer uses: what
//! it asked for, else the CPUs the process may use, capped by
//! `OMP_NUM_THREADS` (how Ray tells an actor its `num_cpus` and torchrun
//! each rank its share) and a scheduler's reservation, so N trainer ranks on
//! one machine do not each start every core's worth.

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
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    type Pools = BTreeMap<usize, Option<&'static rayon::ThreadPool>>;

    /// One pool per thread count, each built on first use and kept for the
    /// process (at most [`super::available`] of them, one per count).
    static POOLS: Mutex<Pools> = Mutex::new(BTreeMap::new());

    /// The pool of `threads` threads (1 to the CPUs); `None` when the OS
    /// refused its threads (then every site runs on the calling thread).
    pub(super) fn get(threads: usize) -> Option<&'static rayon::ThreadPool> {
        let threads = threads.clamp(1, super::available());
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        *pools.entry(threads).or_insert_with(|| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(move |i| format!("stepscore-par{threads}-{i}"))
                .build()
                .ok()?;
            Some(&*Box::leak(Box::new(pool)))
        })
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

/// How many engine threads a scorer gets, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadBudget {
    pub threads: usize,
    /// Where the count came from, for `info` and `doctor` output.
    pub source: String,
}

/// A scheduler's CPU reservation for this worker, read by the front end
/// that knows the scheduler (Python: the CPUs Ray reserved for an actor or
/// task), with its description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub cpus: usize,
    pub why: String,
}

/// The one rule for a thread count, used by every front end: a `requested`
/// count above 0 is kept, up to [`available`]; 0 is this
/// process's share: [`available`] (natively the CPUs this process may use:
/// its affinity mask and cgroup CPU quota, as `available_parallelism` reads
/// them), capped by `OMP_NUM_THREADS` when that says fewer (Ray sets it in
/// every worker to the CPUs it reserved, torchrun to 1 per rank), and by a
/// scheduler's `reserved` CPUs when fewer still.
pub fn thread_count(requested: usize, reserved: Option<Reservation>) -> ThreadBudget {
    if requested > 0 {
        // More threads than CPUs only adds contention (100,000 threads on
        // 2 cores ran 3.6x slower), so a request is capped at them.
        let threads = requested.min(available());
        return ThreadBudget {
            threads,
            source: match threads == requested {
                true => format!("{threads}: threads={requested}"),
                false => format!(
                    "{threads}: threads={requested} capped at the {threads} CPUs this process \
                     may use"
                ),
            },
        };
    }
    let share = budget(
        available(),
        std::env::var("OMP_NUM_THREADS").ok().as_deref(),
    );
    match reserved {
        Some(r) if r.cpus >= 1 && r.cpus <= share.threads => ThreadBudget {
            threads: r.cpus,
            source: format!("{}: {}", r.cpus, r.why),
        },
        _ => share,
    }
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
    if rayon::current_thread_index().is_some() {
        // Inside `install`: the pass's own pool, sized by its thread count.
        rayon::in_place_scope(|s| spread(s, items, f));
    } else if let Some(pool) = pool::get(items.len()) {
        // Outside a pass (the engine's own tests and kernel benchmarks; a
        // scorer's work all runs in passes): as many threads as parts.
        pool.in_place_scope(|s| spread(s, items, f));
    } else {
        items.into_iter().for_each(f);
    }
}

/// Hands every item but the first to the scope's pool and runs the first on
/// the calling thread; in place, so on a pool thread (inside `install`) the
/// caller also runs any item no other thread has taken.
#[cfg(any(not(target_arch = "wasm32"), target_feature = "atomics"))]
fn spread<'s, T: Send + 's>(s: &rayon::Scope<'s>, items: Vec<T>, f: &'s (impl Fn(T) + Sync)) {
    let mut items = items.into_iter();
    let first = items.next();
    for item in items {
        s.spawn(move |_| f(item));
    }
    if let Some(item) = first {
        f(item);
    }
}

/// Runs `op` on a thread of the native pool of `threads` threads (at once
/// when already on it), so the parallel sites inside it never wait for a
/// thread that has not started and never use more than `threads`: what
/// the pool's other threads do not take, this one runs. Once per pass (a
/// forward, a vocabulary projection). Elsewhere `op()`.
pub fn install<R: Send>(threads: usize, op: impl FnOnce() -> R + Send) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(pool) = pool::get(threads) {
        return pool.install(op);
    }
    let _ = threads;
    op()
}

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
fn scoped<T: Send>(items: Vec<T>, f: &(impl Fn(T) + Sync)) {
    let Some(pool) = pool::POOL.get() else {
        items.into_iter().for_each(f);
        return;
    };
    // In place: the calling thread (a worker, or Node's main thread, never a
    // page's main thread, which cannot wait) runs the first item itself.
    pool.in_place_scope(|s| spread(s, items, f));
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
        let got = install(available(), || {
            map((0..4 * available() + 3).collect(), |i: usize| {
                map((0..5).collect(), |j: usize| i * 10 + j)
                    .into_iter()
                    .sum::<usize>()
            })
        });
        let want: Vec<usize> = (0..4 * available() + 3).map(|i| 50 * i + 10).collect();
        assert_eq!(got, want);
        // Already on a pool thread: runs at once, no second hop.
        assert_eq!(install(2, || install(2, || 7)), 7);
    }

    /// A pass of N threads runs on N threads, not on every core: `threads`
    /// bounds the threads that do the work.
    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn a_pass_uses_no_more_threads_than_its_count() {
        use std::collections::BTreeSet;
        for threads in 1..=available().min(4) {
            let ids = install(threads, || {
                map((0..64).collect(), |_: usize| {
                    // Long enough that idle threads would take some items.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    format!("{:?}", std::thread::current().id())
                })
            });
            let distinct: BTreeSet<String> = ids.into_iter().collect();
            assert!(distinct.len() <= threads, "{threads} threads: {distinct:?}");
        }
    }

    #[test]
    fn natively_requests_are_kept() {
        assert_eq!(usable(0), 1);
        assert_eq!(usable(16), 16);
        assert!(available() >= 1);
        assert!(pooled());
    }

    #[test]
    fn a_thread_count_is_the_request_else_the_share_else_the_reservation() {
        let cpus = available();
        assert_eq!(thread_count(1, None).threads, 1);
        let capped = thread_count(cpus + 7, None);
        assert_eq!(capped.threads, cpus);
        assert!(capped.source.contains("capped"), "{}", capped.source);
        // A request wins over a reservation; a reservation within the share wins over it.
        let ray = |cpus| {
            Some(Reservation {
                cpus,
                why: "Ray reserved CPU=1".into(),
            })
        };
        assert_eq!(thread_count(1, ray(1)).source, "1: threads=1");
        let share = thread_count(0, None);
        let reserved = thread_count(0, ray(1));
        assert_eq!(reserved.threads, 1);
        assert_eq!(reserved.source, "1: Ray reserved CPU=1");
        // More than the share (or none) leaves the share.
        assert_eq!(thread_count(0, ray(share.threads + 1)), share);
        assert_eq!(thread_count(0, ray(0)), share);
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
