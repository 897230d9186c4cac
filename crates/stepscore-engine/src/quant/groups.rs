//! The loop both prefill tile paths share (`x86/ktile.rs`, `x86/tile32.rs`, and wasm's): weight
//! rows unpacked a group at a time, then every token tile multiplied by the
//! group while it is in cache.

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
