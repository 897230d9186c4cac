//! The loop every prefill tile path shares (`x86/`, `wasm/`, `arm/`): weight
//! rows unpacked a group at a time, then every token tile multiplied by the
//! group while it is in cache; and the unpacked 32-element block the wasm
//! and NEON tiles share.

/// Selection indices `lo..hi` (`row_of` maps them to matrix rows) in groups
/// of `ROWS`: `fill(rows, group)` unpacks a group's rows (fewer at the end),
/// `kernel(group, tokens)` multiplies it by `TOKENS` tokens' activations
/// (`nb` blocks each in `acts`); `outs[t][i - lo]` receives token t. A short
/// last tile repeats its last token, whose extra results are dropped.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<G: Clone, A, const ROWS: usize, const TOKENS: usize>(
    zero: G,
    nb: usize,
    row_of: impl Fn(usize) -> usize,
    lo: usize,
    hi: usize,
    acts: &[A],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
    mut fill: impl FnMut(&[usize], &mut [G]),
    kernel: impl Fn(&[G], &[&[A]; TOKENS]) -> [[f32; ROWS]; TOKENS],
) {
    let mut group = vec![zero; nb];
    let mut rows = Vec::with_capacity(ROWS);
    let mut r0 = lo;
    while r0 < hi {
        let r1 = (r0 + ROWS).min(hi);
        rows.clear();
        rows.extend((r0..r1).map(&row_of));
        fill(&rows, &mut group);
        let mut t0 = 0;
        while t0 < n_tokens {
            let a: [&[A]; TOKENS] = std::array::from_fn(|k| {
                let t = (t0 + k).min(n_tokens - 1);
                &acts[t * nb..(t + 1) * nb]
            });
            let res = kernel(&group, &a);
            for (t, row) in res.iter().enumerate().take(n_tokens - t0) {
                let dst = &mut outs[t0 + t][r0 - lo..r1 - lo];
                if let Ok(full) = <&mut [f32; ROWS]>::try_from(&mut *dst) {
                    // A fixed-size copy is inlined (the general one calls memcpy).
                    *full = *row;
                } else {
                    dst.copy_from_slice(&row[..r1 - r0]);
                }
            }
            t0 += TOKENS;
        }
        r0 = r1;
    }
}

/// One 32-element block of `R` weight rows, the quants widened to `Q` (what
/// the instruction set multiplies: i16 on wasm, i8 on NEON), for the
/// 32-element formats' tiles (`wasm/tile32.rs`, `arm/tile32.rs`).
#[cfg(any(
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(crate) struct Rows32<Q, const R: usize> {
    pub q: [[Q; 32]; R],
    pub d: [f32; R],
    /// The min term's weight (`m`, zero for formats without one).
    pub m: [f32; R],
}

#[cfg(any(
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
impl<Q: Copy + Default + From<i8>, const R: usize> Rows32<Q, R> {
    pub fn zero() -> Self {
        Rows32 {
            q: [[Q::default(); 32]; R],
            d: [0.0; R],
            m: [0.0; R],
        }
    }

    /// Unpacks `rows` (at most `R`; missing rows are zero and give 0) of
    /// `data` into `out`, one per block.
    pub fn fill(
        ty: crate::ggml::GgmlType,
        data: &[u8],
        row_bytes: usize,
        rows: &[usize],
        out: &mut [Self],
    ) {
        let bb = ty.block_bytes();
        if rows.len() < R {
            out.fill(Self::zero());
        }
        let mut q = [0i8; 32];
        for (r, &row) in rows.iter().enumerate() {
            let src = &data[row * row_bytes..(row + 1) * row_bytes];
            for (g, b) in out.iter_mut().zip(src.chunks_exact(bb)) {
                let (d, m) = super::blocks::unpack32(ty, b, &mut q);
                g.q[r] = q.map(Q::from);
                g.d[r] = d;
                g.m[r] = m;
            }
        }
    }
}
