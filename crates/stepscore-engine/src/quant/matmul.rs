//! Quantized matrix x activations, the hot path of the CPU engine.
//!
//! Scheme (as ggml's CPU backend): activations are converted once to the
//! weight type's vec_dot_type, then each output is a block-wise dot product
//! with exact integer sums scaled per block. Weight rows are unpacked in
//! chunks into a uniform int8 layout (so one kernel serves every format and
//! the unpacking is paid once per row, not once per token), and each
//! unpacked row is multiplied with tiles of 8 tokens while those tokens'
//! activations sit in L1. Threads split the rows.

use super::act::{vec_dot_type, ActData, BlockQ8, BlockQ8K, QuantizedActs};
use super::blocks::{is_k, unpack32, unpack_k, KBlock};
use super::dequant::dequantize_row;
use super::portable::{self, Row32, RowK};
use crate::error::{Error, Result};
use crate::ggml::GgmlType;

/// A row-major matrix of `rows` x `cols` elements stored as ggml blocks
/// (each row is `cols / block_elems` whole blocks), borrowed from a model file.
#[derive(Debug, Clone, Copy)]
pub struct QMatrix<'a> {
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub data: &'a [u8],
}

impl<'a> QMatrix<'a> {
    /// Validates that `ty` has a CPU dot product and that `data` holds
    /// exactly `rows` rows of `cols` elements.
    pub fn new(ty: GgmlType, rows: usize, cols: usize, data: &'a [u8]) -> Result<Self> {
        if vec_dot_type(ty).is_none() {
            return Err(Error::InvalidArgument(format!(
                "QMatrix: {} is not a weight type",
                ty.name()
            )));
        }
        let row_bytes = usize::try_from(ty.bytes_for(cols as u64)?).map_err(|_| {
            Error::InvalidArgument(format!("QMatrix: {cols} {} columns overflow", ty.name()))
        })?;
        let need = row_bytes.checked_mul(rows);
        if need != Some(data.len()) {
            return Err(Error::InvalidArgument(format!(
                "QMatrix: {rows} x {cols} {} needs {} bytes, got {}",
                ty.name(),
                need.map_or_else(|| "an overflowing number of".to_string(), |b| b.to_string()),
                data.len()
            )));
        }
        Ok(QMatrix {
            ty,
            rows,
            cols,
            data,
        })
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.cols / self.ty.block_elems() * self.ty.block_bytes()
    }

    /// The raw blocks of row `r`.
    pub fn row(&self, r: usize) -> Result<&'a [u8]> {
        let rb = self.row_bytes();
        if r >= self.rows {
            return Err(Error::InvalidArgument(format!(
                "row {r} out of range for a matrix of {} rows",
                self.rows
            )));
        }
        self.data.get(r * rb..(r + 1) * rb).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "row {r}: matrix data of {} bytes is too short",
                self.data.len()
            ))
        })
    }

    /// Dequantizes row `r` into `dst` (`cols` values), e.g. an embedding lookup.
    pub fn dequantize_row(&self, r: usize, dst: &mut [f32]) -> Result<()> {
        dequantize_row(self.ty, self.row(r)?, dst)
    }
}

/// Which dot-product kernels to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simd {
    /// Plain Rust, auto-vectorized; runs everywhere (wasm32 included).
    Portable,
    /// x86_64 AVX2 + FMA intrinsics.
    Avx2,
    /// AVX2 + FMA, and AVX-VNNI (`vpdpbusd` on 256 bits) for the K-quant
    /// prefill tile: Intel's client cores since Alder Lake, which have it
    /// without AVX-512.
    AvxVnni,
    /// AVX2 + FMA, and AVX-512 BW + VNNI for the prefill tiles (K-quant and 32-element formats).
    Avx512,
    /// WebAssembly SIMD128 intrinsics (`wasm.rs`): wasm32 builds with the
    /// `simd128` target feature, which the module's validation checks at load.
    Wasm128,
    /// aarch64 Advanced SIMD (ARMv8.0, every aarch64 CPU): the `arm/` tiles
    /// with widening int8 multiplies.
    Neon,
    /// NEON and the dot-product extension (`sdot`, ARMv8.2+: Apple M1 on,
    /// Graviton 2 on, Cortex-A76 on), detected at run time.
    NeonDot,
}

/// Environment variable that caps the instruction set (`portable`, `avx2`,
/// `avxvnni`, `avx512`; on aarch64 `neon`, `neondot`): to measure or reproduce on this machine what an older CPU
/// runs. The results are the same bits whatever it says.
pub const SIMD_ENV: &str = "STEPSCORE_SIMD";

impl Simd {
    /// The backend every product runs: the fastest this CPU supports, capped
    /// by [`SIMD_ENV`] when it is set (read once per process).
    pub fn detect() -> Simd {
        static CHOSEN: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let best = Simd::hardware();
            match std::env::var(SIMD_ENV)
                .ok()
                .filter(|v| !v.trim().is_empty())
            {
                None => best,
                Some(v) => Simd::capped(best, &v).unwrap_or_else(|e| {
                    // Never `eprintln!`: it panics when stderr cannot be written.
                    use std::io::Write as _;
                    let _ = writeln!(std::io::stderr(), "stepscore: {e}; using {}", best.name());
                    best
                }),
            }
        })
    }

    /// `best` limited to the instruction set `cap` names (case-insensitive).
    fn capped(best: Simd, cap: &str) -> std::result::Result<Simd, String> {
        let rank = |s: Simd| match s {
            Simd::Portable => 0,
            Simd::Avx2 | Simd::Wasm128 | Simd::Neon => 1,
            Simd::AvxVnni | Simd::NeonDot => 2,
            Simd::Avx512 => 3,
        };
        let want = match cap.trim().to_ascii_lowercase().as_str() {
            "portable" => Simd::Portable,
            "avx2" => Simd::Avx2,
            "avxvnni" => Simd::AvxVnni,
            "avx512" => Simd::Avx512,
            "neon" => Simd::Neon,
            "neondot" => Simd::NeonDot,
            _ => {
                return Err(format!(
                "{SIMD_ENV}={cap:?} is not one of portable, avx2, avxvnni, avx512, neon, neondot"
            ))
            }
        };
        // A cap names one architecture's sets; another's leaves `best` alone.
        let arm = |s: Simd| matches!(s, Simd::Neon | Simd::NeonDot);
        let other_arch = want != Simd::Portable && best != Simd::Portable && arm(want) != arm(best);
        Ok(if other_arch || rank(want) >= rank(best) {
            best
        } else if want == Simd::AvxVnni && !Simd::has_avx_vnni() {
            // An AVX-512 CPU without AVX-VNNI (AMD Zen 4): the next set down.
            Simd::Avx2
        } else {
            want
        })
    }

    /// The name [`SIMD_ENV`] and `bench` use.
    pub fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            Simd::Avx2 => "avx2",
            Simd::AvxVnni => "avxvnni",
            Simd::Avx512 => "avx512",
            Simd::Wasm128 => "wasm128",
            Simd::Neon => "neon",
            Simd::NeonDot => "neondot",
        }
    }

    /// The fastest backend this CPU supports.
    fn hardware() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                if is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vnni")
                {
                    return Simd::Avx512;
                }
                if Simd::has_avx_vnni() {
                    return Simd::AvxVnni;
                }
                return Simd::Avx2;
            }
        }
        if cfg!(all(target_arch = "wasm32", target_feature = "simd128")) {
            return Simd::Wasm128;
        }
        #[cfg(target_arch = "aarch64")]
        return if std::arch::is_aarch64_feature_detected!("dotprod") {
            Simd::NeonDot
        } else {
            Simd::Neon
        };
        #[cfg(not(target_arch = "aarch64"))]
        Simd::Portable
    }

    /// Whether this CPU can run the backend's kernels ([`SIMD_ENV`] aside:
    /// an explicit choice, as in [`matmul_with`], is not capped).
    pub fn is_available(self) -> bool {
        let hw = Simd::hardware();
        match self {
            Simd::Portable => true,
            Simd::Avx2 => matches!(hw, Simd::Avx2 | Simd::AvxVnni | Simd::Avx512),
            Simd::AvxVnni => matches!(hw, Simd::AvxVnni | Simd::Avx512) && Simd::has_avx_vnni(),
            Simd::Avx512 => hw == Simd::Avx512,
            Simd::Wasm128 => hw == Simd::Wasm128,
            Simd::Neon => matches!(hw, Simd::Neon | Simd::NeonDot),
            Simd::NeonDot => hw == Simd::NeonDot,
        }
    }

    /// Whether the AVX2 kernels may run (AvxVnni and Avx512 imply them).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn avx2(self) -> bool {
        matches!(self, Simd::Avx2 | Simd::AvxVnni | Simd::Avx512)
    }

    /// Whether the CPU has AVX-VNNI (the VEX-encoded `vpdpbusd`) beside AVX2 and FMA.
    fn has_avx_vnni() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("avxvnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }
}

/// `out[t * w.rows + r] = dot(row r of w, row t of x)` for all rows and the
/// `n_tokens` rows of `x` (`n_tokens` x `w.cols`, row-major).
/// `threads` of 0 or 1 runs on the calling thread (always so on wasm32).
pub fn matmul(
    w: &QMatrix,
    x: &[f32],
    n_tokens: usize,
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    let acts = QuantizedActs::for_weight_threaded(w.ty, x, n_tokens, w.cols, threads)?;
    matmul_quantized(w, &acts, out, threads)
}

/// Like [`matmul`] for the listed rows only:
/// `out[t * rows.len() + i] = dot(row rows[i] of w, row t of x)`.
#[cfg(any(test, feature = "testing"))]
pub fn matmul_rows(
    w: &QMatrix,
    rows: &[usize],
    x: &[f32],
    n_tokens: usize,
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    let acts = QuantizedActs::for_weight_threaded(w.ty, x, n_tokens, w.cols, threads)?;
    matmul_rows_quantized(w, rows, &acts, out, threads)
}

/// [`matmul`] with activations already converted (reuse them across
/// matrices that share an input).
pub fn matmul_quantized(
    w: &QMatrix,
    acts: &QuantizedActs,
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    run(w, RowSel::All, acts, out, threads, Simd::detect())
}

/// [`matmul_rows`] with activations already converted.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn matmul_rows_quantized(
    w: &QMatrix,
    rows: &[usize],
    acts: &QuantizedActs,
    out: &mut [f32],
    threads: usize,
) -> Result<()> {
    run(w, RowSel::List(rows), acts, out, threads, Simd::detect())
}

/// Full control: an optional row list and an explicit backend (for tests and
/// benchmarks comparing backends). Errors if the backend is not available.
#[cfg(any(test, feature = "testing"))]
pub fn matmul_with(
    w: &QMatrix,
    rows: Option<&[usize]>,
    acts: &QuantizedActs,
    out: &mut [f32],
    threads: usize,
    backend: Simd,
) -> Result<()> {
    if !backend.is_available() {
        return Err(Error::InvalidArgument(format!(
            "{backend:?} kernels are not supported on this CPU"
        )));
    }
    run(
        w,
        rows.map_or(RowSel::All, RowSel::List),
        acts,
        out,
        threads,
        backend,
    )
}

#[derive(Clone, Copy)]
enum RowSel<'r> {
    All,
    // Row lists come from the kernels' test entry points only (`matmul_rows`).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    List(&'r [usize]),
}

impl RowSel<'_> {
    #[inline]
    fn row(self, i: usize) -> usize {
        match self {
            RowSel::All => i,
            RowSel::List(l) => l[i],
        }
    }
}

/// Up to this many tokens, x86_64 multiplies each packed weight row directly
/// (`rowdot.rs`, the decode path): the tile paths' unpacking costs more than
/// it saves when a row is used this few times.
#[cfg(target_arch = "x86_64")]
const ROW_KERNEL_MAX_TOKENS: usize = 3;

/// Minimum multiply-adds before another thread is worth its start-up cost.
const WORK_PER_THREAD: usize = 1 << 18;
/// Tokens per tile: a weight row is read once per tile.
const TILE: usize = 8;

fn run(
    w: &QMatrix,
    sel: RowSel,
    acts: &QuantizedActs,
    out: &mut [f32],
    threads: usize,
    backend: Simd,
) -> Result<()> {
    // The fields are public: re-check a hand-built matrix before indexing it.
    QMatrix::new(w.ty, w.rows, w.cols, w.data)?;
    let want = vec_dot_type(w.ty).ok_or_else(|| {
        Error::InvalidArgument(format!("matmul: {} is not a weight type", w.ty.name()))
    })?;
    if acts.ty != want {
        return Err(Error::InvalidArgument(format!(
            "matmul: {} weights need {} activations, got {}",
            w.ty.name(),
            want.name(),
            acts.ty.name()
        )));
    }
    if acts.cols != w.cols {
        return Err(Error::InvalidArgument(format!(
            "matmul: activations have {} columns, the matrix {}",
            acts.cols, w.cols
        )));
    }
    let n_sel = match sel {
        RowSel::All => w.rows,
        RowSel::List(l) => {
            if let Some(&r) = l.iter().find(|&&r| r >= w.rows) {
                return Err(Error::InvalidArgument(format!(
                    "matmul: row {r} out of range for a matrix of {} rows",
                    w.rows
                )));
            }
            l.len()
        }
    };
    let n_tokens = acts.n_tokens;
    if n_tokens.checked_mul(n_sel) != Some(out.len()) {
        return Err(Error::InvalidArgument(format!(
            "matmul: output needs {n_tokens} tokens x {n_sel} rows, got {} values",
            out.len()
        )));
    }
    if out.is_empty() {
        return Ok(());
    }

    let work = n_sel.saturating_mul(w.cols).saturating_mul(n_tokens);
    let nt = crate::par::usable(threads)
        .min(n_sel)
        .min(work / WORK_PER_THREAD + 1);
    let bounds: Vec<usize> = (0..=nt).map(|k| k * n_sel / nt).collect();
    // Hand each thread, for every token, the slice of that token's output row
    // covering its rows: disjoint borrows, no copying afterwards.
    let mut parts: Vec<Vec<&mut [f32]>> = (0..nt).map(|_| Vec::with_capacity(n_tokens)).collect();
    for tok_out in out.chunks_exact_mut(n_sel) {
        let mut rest = tok_out;
        for (k, part) in parts.iter_mut().enumerate() {
            let (mine, tail) = rest.split_at_mut(bounds[k + 1] - bounds[k]);
            part.push(mine);
            rest = tail;
        }
    }
    if nt == 1 {
        if let Some(part) = parts.pop() {
            worker(w, sel, 0, n_sel, acts, part, backend);
        }
        return Ok(());
    }
    let jobs: Vec<_> = parts.into_iter().enumerate().collect();
    crate::par::for_each(jobs, |(k, part)| {
        worker(w, sel, bounds[k], bounds[k + 1], acts, part, backend)
    });
    Ok(())
}

/// Unpacked weight rows of one chunk, in the layouts `portable` expects.
#[derive(Default)]
struct Unpacked {
    n: usize,
    q: Vec<i8>,
    d: Vec<f32>,
    m: Vec<f32>,
    sc: Vec<i16>,
    mn: Vec<i16>,
    f: Vec<f32>,
}

impl Unpacked {
    fn fill(&mut self, w: &QMatrix, rows: impl Iterator<Item = usize>) {
        let cols = w.cols;
        let rb = w.row_bytes();
        let bb = w.ty.block_bytes();
        self.n = 0;
        self.q.clear();
        self.d.clear();
        self.m.clear();
        self.sc.clear();
        self.mn.clear();
        self.f.clear();
        let mut q32 = [0i8; 32];
        let mut kb = KBlock::new();
        for r in rows {
            let row = &w.data[r * rb..(r + 1) * rb];
            self.n += 1;
            match w.ty {
                GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
                    let start = self.f.len();
                    self.f.resize(start + cols, 0.0);
                    // sizes were validated by QMatrix::new
                    let _ = dequantize_row(w.ty, row, &mut self.f[start..]);
                }
                ty if is_k(ty) => {
                    for blk in row.chunks_exact(bb) {
                        unpack_k(ty, blk, &mut kb);
                        self.q.extend_from_slice(&kb.q);
                        self.sc.extend_from_slice(&kb.sc);
                        self.mn.extend_from_slice(&kb.mn);
                        self.d.push(kb.d);
                        self.m.push(kb.dmin);
                    }
                }
                ty => {
                    for blk in row.chunks_exact(bb) {
                        let (d, m) = unpack32(ty, blk, &mut q32);
                        self.q.extend_from_slice(&q32);
                        self.d.push(d);
                        self.m.push(m);
                    }
                }
            }
        }
    }
}

/// Computes selection indices `lo..hi`; `outs[t][i - lo]` receives token t.
fn worker(
    w: &QMatrix,
    sel: RowSel,
    lo: usize,
    hi: usize,
    acts: &QuantizedActs,
    mut outs: Vec<&mut [f32]>,
    backend: Simd,
) {
    // Enough rows per chunk to amortize the act tile, few enough to stay in L1/L2.
    let chunk = (16 * 1024 / w.cols.max(1)).clamp(1, 64);
    let mut buf = Unpacked::default();
    let n_tokens = acts.n_tokens;
    #[cfg(target_arch = "x86_64")]
    if backend.avx2()
        && n_tokens <= ROW_KERNEL_MAX_TOKENS
        && super::x86::rowdot::has_row_kernel(w.ty)
        && rows_direct(w, sel, lo, hi, acts, &mut outs)
    {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let (Simd::Avx512 | Simd::AvxVnni | Simd::Avx2, ActData::Q8K(x)) = (backend, &acts.data) {
        if super::x86::ktile::has_tiles(w.ty) {
            let kernel: super::x86::ktile::TileKernel = match backend {
                Simd::Avx512 => super::x86::avx512::tile,
                Simd::AvxVnni => super::x86::tile_k_vnni,
                _ => super::x86::tile_k,
            };
            let row_of = |i| sel.row(i);
            super::x86::ktile::worker(
                w.ty, w.data, w.cols, row_of, lo, hi, x, n_tokens, &mut outs, kernel,
            );
            return;
        }
    }
    #[cfg(target_arch = "x86_64")]
    if let (Simd::Avx512 | Simd::AvxVnni | Simd::Avx2, ActData::Q8(x)) = (backend, &acts.data) {
        if super::x86::tile32::has_tiles(w.ty) {
            use super::x86::tile32::Layout;
            let (min, signed) = flavour(w.ty);
            let (kernel, layout): (super::x86::tile32::TileKernel, _) = match (backend, min, signed)
            {
                (Simd::Avx512, true, false) => {
                    (super::x86::avx512::tile32::<true, false>, Layout::Pairs)
                }
                (Simd::Avx512, true, true) => {
                    (super::x86::avx512::tile32::<true, true>, Layout::Pairs)
                }
                (Simd::Avx512, false, false) => {
                    (super::x86::avx512::tile32::<false, false>, Layout::Pairs)
                }
                (Simd::Avx512, false, true) => {
                    (super::x86::avx512::tile32::<false, true>, Layout::Pairs)
                }
                (_, true, false) => (super::x86::tile32::<true, false>, Layout::Lanes),
                (_, true, true) => (super::x86::tile32::<true, true>, Layout::Lanes),
                (_, false, false) => (super::x86::tile32::<false, false>, Layout::Lanes),
                (_, false, true) => (super::x86::tile32::<false, true>, Layout::Lanes),
            };
            let row_of = |i| sel.row(i);
            super::x86::tile32::worker(
                w.ty, w.data, w.cols, signed, layout, row_of, lo, hi, x, n_tokens, &mut outs,
                kernel,
            );
            return;
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if backend == Simd::Wasm128 {
        let row_of = |i| sel.row(i);
        let (min, _) = flavour(w.ty);
        match &acts.data {
            ActData::Q8K(x) => {
                return super::wasm::ktile::worker(
                    w.ty, w.data, w.cols, min, row_of, lo, hi, x, n_tokens, &mut outs,
                )
            }
            ActData::Q8(x) => {
                return super::wasm::tile32::worker(
                    w.ty, w.data, w.cols, min, row_of, lo, hi, x, n_tokens, &mut outs,
                )
            }
            ActData::F32(_) => {}
        }
    }
    #[cfg(target_arch = "aarch64")]
    if let Simd::Neon | Simd::NeonDot = backend {
        let row_of = |i| sel.row(i);
        let (min, _) = flavour(w.ty);
        let dot = backend == Simd::NeonDot;
        match &acts.data {
            ActData::Q8K(x) => {
                return super::arm::ktile::worker(
                    w.ty, w.data, w.cols, min, dot, row_of, lo, hi, x, n_tokens, &mut outs,
                )
            }
            ActData::Q8(x) => {
                return super::arm::tile32::worker(
                    w.ty, w.data, w.cols, min, dot, row_of, lo, hi, x, n_tokens, &mut outs,
                )
            }
            ActData::F32(_) => {}
        }
    }
    let mut c0 = lo;
    while c0 < hi {
        let c1 = (c0 + chunk).min(hi);
        buf.fill(w, (c0..c1).map(|i| sel.row(i)));
        let mut t = 0;
        while t + TILE <= n_tokens {
            tile::<TILE>(w, &buf, acts, t, c0 - lo, &mut outs, backend);
            t += TILE;
        }
        while t < n_tokens {
            tile::<1>(w, &buf, acts, t, c0 - lo, &mut outs, backend);
            t += 1;
        }
        c0 = c1;
    }
}

/// The decode path (`rowdot.rs`): selection indices `lo..hi` from the packed
/// rows, each token in turn. False (nothing done) for f32 activations.
/// Only for backends with AVX2 and FMA, and types `has_row_kernel` accepts.
#[cfg(target_arch = "x86_64")]
fn rows_direct(
    w: &QMatrix,
    sel: RowSel,
    lo: usize,
    hi: usize,
    acts: &QuantizedActs,
    outs: &mut [&mut [f32]],
) -> bool {
    let rb = w.row_bytes();
    let rows = (lo..hi).map(|i| (i - lo, sel.row(i)));
    match &acts.data {
        ActData::Q8K(x) => {
            let nb = w.cols / 256;
            for (j, r) in rows {
                let row = &w.data[r * rb..(r + 1) * rb];
                for (t, out) in outs.iter_mut().enumerate() {
                    // SAFETY: the caller checked AVX2 and FMA; `row` and the
                    // token's slice both hold `nb` blocks (validated in `run`).
                    out[j] =
                        unsafe { super::x86::rowdot::dot_k(w.ty, row, &x[t * nb..(t + 1) * nb]) };
                }
            }
        }
        ActData::Q8(x) => {
            let nb = w.cols / 32;
            for (j, r) in rows {
                let row = &w.data[r * rb..(r + 1) * rb];
                for (t, out) in outs.iter_mut().enumerate() {
                    // SAFETY: as above.
                    out[j] =
                        unsafe { super::x86::rowdot::dot32(w.ty, row, &x[t * nb..(t + 1) * nb]) };
                }
            }
        }
        ActData::F32(_) => return false,
    }
    true
}

/// Kernel flavour of a weight type: (has a min term, unpacked quants can be negative).
fn flavour(ty: GgmlType) -> (bool, bool) {
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q2K | GgmlType::Q4K | GgmlType::Q5K => {
            (true, false)
        }
        _ => (false, true),
    }
}

fn tile<const T: usize>(
    w: &QMatrix,
    buf: &Unpacked,
    acts: &QuantizedActs,
    t0: usize,
    local0: usize,
    outs: &mut [&mut [f32]],
    backend: Simd,
) {
    let cols = w.cols;
    let (min, signed) = flavour(w.ty);
    for j in 0..buf.n {
        let res: [f32; T] = match &acts.data {
            ActData::F32(x) => {
                let a: [&[f32]; T] =
                    std::array::from_fn(|k| &x[(t0 + k) * cols..(t0 + k + 1) * cols]);
                let wr = &buf.f[j * cols..(j + 1) * cols];
                match backend {
                    // SAFETY: as in dispatch32.
                    #[cfg(target_arch = "x86_64")]
                    b if b.avx2() => unsafe { super::x86::dot_f32::<T>(wr, &a) },
                    // SAFETY: every token slice is `cols` long, as the row.
                    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
                    Simd::Wasm128 => unsafe { super::wasm::dot_f32::<T>(wr, &a) },
                    // SAFETY: as for wasm; NEON is part of every aarch64 CPU.
                    #[cfg(target_arch = "aarch64")]
                    Simd::Neon | Simd::NeonDot => unsafe { super::arm::dot_f32::<T>(wr, &a) },
                    _ => portable::dot_f32::<T>(wr, &a),
                }
            }
            ActData::Q8(x) => {
                let nb = cols / 32;
                let a: [&[BlockQ8]; T] =
                    std::array::from_fn(|k| &x[(t0 + k) * nb..(t0 + k + 1) * nb]);
                let row = Row32 {
                    q: &buf.q[j * cols..(j + 1) * cols],
                    d: &buf.d[j * nb..(j + 1) * nb],
                    m: &buf.m[j * nb..(j + 1) * nb],
                };
                dispatch32::<T>(&row, &a, min, signed, backend)
            }
            ActData::Q8K(x) => {
                let nb = cols / 256;
                let a: [&[BlockQ8K]; T] =
                    std::array::from_fn(|k| &x[(t0 + k) * nb..(t0 + k + 1) * nb]);
                let row = RowK {
                    q: &buf.q[j * cols..(j + 1) * cols],
                    sc: &buf.sc[j * nb * 16..(j + 1) * nb * 16],
                    mn: &buf.mn[j * nb * 16..(j + 1) * nb * 16],
                    d: &buf.d[j * nb..(j + 1) * nb],
                    dmin: &buf.m[j * nb..(j + 1) * nb],
                };
                dispatch_k::<T>(&row, &a, min, signed, backend)
            }
        };
        for (k, v) in res.into_iter().enumerate() {
            outs[t0 + k][local0 + j] = v;
        }
    }
}

#[inline(always)]
fn dispatch32<const T: usize>(
    row: &Row32,
    a: &[&[BlockQ8]; T],
    min: bool,
    signed: bool,
    backend: Simd,
) -> [f32; T] {
    match backend {
        // SAFETY: Avx2/Avx512 are only chosen when the CPU has AVX2 and FMA (Simd::detect /
        // matmul_with check), and `tile` slices every row and token to `nb` blocks.
        #[cfg(target_arch = "x86_64")]
        b if b.avx2() => unsafe {
            match (min, signed) {
                (true, false) => super::x86::dot32::<T, true, false>(row, a),
                (true, true) => super::x86::dot32::<T, true, true>(row, a),
                (false, false) => super::x86::dot32::<T, false, false>(row, a),
                (false, true) => super::x86::dot32::<T, false, true>(row, a),
            }
        },
        _ => {
            let _ = signed; // the portable kernels multiply signed values directly
            if min {
                portable::dot32::<T, true>(row, a)
            } else {
                portable::dot32::<T, false>(row, a)
            }
        }
    }
}

#[inline(always)]
fn dispatch_k<const T: usize>(
    row: &RowK,
    a: &[&[BlockQ8K]; T],
    min: bool,
    signed: bool,
    backend: Simd,
) -> [f32; T] {
    match backend {
        // SAFETY: as in dispatch32.
        #[cfg(target_arch = "x86_64")]
        b if b.avx2() => unsafe {
            match (min, signed) {
                (true, false) => super::x86::dot_k::<T, true, false>(row, a),
                (true, true) => super::x86::dot_k::<T, true, true>(row, a),
                (false, false) => super::x86::dot_k::<T, false, false>(row, a),
                (false, true) => super::x86::dot_k::<T, false, true>(row, a),
            }
        },
        _ => {
            let _ = signed;
            if min {
                portable::dot_k::<T, true>(row, a)
            } else {
                portable::dot_k::<T, false>(row, a)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Simd;

    #[test]
    fn the_simd_cap_lowers_never_raises_and_names_bad_values() {
        assert_eq!(Simd::capped(Simd::Avx512, "avx2"), Ok(Simd::Avx2));
        assert_eq!(Simd::capped(Simd::Avx512, " Portable "), Ok(Simd::Portable));
        assert_eq!(Simd::capped(Simd::Avx2, "avx512"), Ok(Simd::Avx2));
        assert_eq!(Simd::capped(Simd::AvxVnni, "avx512"), Ok(Simd::AvxVnni));
        assert_eq!(Simd::capped(Simd::AvxVnni, "AVX2"), Ok(Simd::Avx2));
        // Capping an AVX-512 CPU to AVX-VNNI gives it only where the CPU has AVX-VNNI.
        let want = if Simd::has_avx_vnni() {
            Simd::AvxVnni
        } else {
            Simd::Avx2
        };
        assert_eq!(Simd::capped(Simd::Avx512, "avxvnni"), Ok(want));
        assert_eq!(Simd::capped(Simd::Wasm128, "avx2"), Ok(Simd::Wasm128));
        assert_eq!(Simd::capped(Simd::NeonDot, "neon"), Ok(Simd::Neon));
        assert_eq!(Simd::capped(Simd::Neon, "NeonDot"), Ok(Simd::Neon));
        assert_eq!(Simd::capped(Simd::NeonDot, "portable"), Ok(Simd::Portable));
        // A cap for another architecture's sets leaves the CPU's best alone.
        assert_eq!(Simd::capped(Simd::NeonDot, "avx2"), Ok(Simd::NeonDot));
        assert_eq!(Simd::capped(Simd::Avx512, "neon"), Ok(Simd::Avx512));
        let e = Simd::capped(Simd::Avx2, "sse4").unwrap_err();
        assert!(e.contains("STEPSCORE_SIMD") && e.contains("sse4"), "{e}");
    }
}
