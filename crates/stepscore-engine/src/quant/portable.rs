//! Portable block dot products: one unpacked weight row against `T` tokens.
//!
//! Integer sums per block (exact), scaled per block in f32, like ggml's
//! `ggml_vec_dot_*` kernels. Written as plain fixed-length loops so LLVM
//! vectorizes them; `x86/` (AVX2, AVX-512) and `wasm/`
//! (SIMD128) compute the same shapes with the same bits: the float steps
//! here are the order every engine follows, so the CPU engine's results do
//! not depend on the instruction set (tests/quant_matmul.rs).

use super::act::{BlockQ8, BlockQ8K};

/// Unpacked 32-element-block row: `q` (cols), `d`/`m` (one per block).
pub(crate) struct Row32<'a> {
    pub q: &'a [i8],
    pub d: &'a [f32],
    pub m: &'a [f32],
}

/// Unpacked K-quant row: `q` (cols), `sc`/`mn` (one per 16 values),
/// `d`/`dmin` (one per 256).
pub(crate) struct RowK<'a> {
    pub q: &'a [i8],
    pub sc: &'a [i16],
    pub mn: &'a [i16],
    pub d: &'a [f32],
    pub dmin: &'a [f32],
}

/// A slice as consecutive fixed-size arrays (lengths here are always whole
/// multiples of N, so nothing is dropped).
#[inline(always)]
fn arrays<const N: usize>(s: &[i8]) -> impl Iterator<Item = &[i8; N]> {
    s.chunks_exact(N).filter_map(|c| c.try_into().ok())
}

/// Exact integer dot of two int8 runs of N (even) values: products fit i16 (|w| <= 128, |a| <= 127) and
/// pairs of them too, so LLVM can use pairwise multiply-add instructions.
#[inline(always)]
fn idot<const N: usize>(a: &[i8; N], b: &[i8; N]) -> i32 {
    let mut lanes = [0i32; 16];
    for l in 0..N / 2 {
        lanes[l] = a[2 * l] as i16 as i32 * b[2 * l] as i16 as i32
            + a[2 * l + 1] as i16 as i32 * b[2 * l + 1] as i16 as i32;
    }
    lanes.iter().sum()
}

/// The summation order every engine shares for the 32-element formats (the
/// portable, AVX2, SIMD128 and WGSL kernels all produce these bits): eight
/// f32 lanes per token, lane l taking `(d_w * d_a) * isum_l` for each block
/// in order, where isum_l is the exact integer dot of the block's elements
/// 4l..4l+3 (what AVX2's maddubs + madd leave in lane l) and the product and
/// the sum are rounded separately (no FMA: WGSL cannot promise one); the
/// `MIN` term `m_w * s_a` goes to its own accumulator; the result is
/// [`lane_tree`] of the lanes plus that accumulator.
#[inline(always)]
pub(crate) fn dot32<const T: usize, const MIN: bool>(
    w: &Row32,
    acts: &[&[BlockQ8]; T],
) -> [f32; T] {
    let mut lanes = [[0.0f32; 8]; T];
    let mut accm = [0.0f32; T];
    for (b, ((q, &d), &m)) in arrays::<32>(w.q).zip(w.d).zip(w.m).enumerate() {
        for t in 0..T {
            let a = &acts[t][b];
            let dd = d * a.d;
            for (l, lane) in lanes[t].iter_mut().enumerate() {
                let mut isum = 0i32;
                for k in 4 * l..4 * l + 4 {
                    isum += q[k] as i32 * a.qs[k] as i32;
                }
                *lane += dd * isum as f32;
            }
            if MIN {
                accm[t] += m * a.s;
            }
        }
    }
    let mut out = [0.0f32; T];
    for t in 0..T {
        out[t] = lane_tree(&lanes[t]) + accm[t];
    }
    out
}

/// The fixed reduction of eight lanes, ((0+4)+(2+6)) + ((1+5)+(3+7)): AVX2's
/// cheapest horizontal sum, so every engine sums its lanes this way.
#[inline(always)]
pub(crate) fn lane_tree(v: &[f32; 8]) -> f32 {
    ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
}

/// K-quant super-blocks: (d_w * d_a) * sum_g sc[g] * isum_g
/// - (dmin_w * d_a) * sum_g mn[g] * bsums[g].
#[inline(always)]
pub(crate) fn dot_k<const T: usize, const MIN: bool>(
    w: &RowK,
    acts: &[&[BlockQ8K]; T],
) -> [f32; T] {
    let mut acc = [0.0f32; T];
    let blocks =
        w.q.chunks_exact(256)
            .zip(w.sc.chunks_exact(16))
            .zip(w.mn.chunks_exact(16));
    for (b, ((q, sc), mn)) in blocks.enumerate() {
        let (d, dmin) = (w.d[b], w.dmin[b]);
        for t in 0..T {
            let a = &acts[t][b];
            let mut isum = 0i32;
            for ((qg, ag), &s) in arrays::<16>(q).zip(arrays::<16>(&a.qs)).zip(sc) {
                isum += s as i32 * idot::<16>(qg, ag);
            }
            acc[t] += (d * a.d) * isum as f32;
            if MIN {
                let summ: i32 = mn
                    .iter()
                    .zip(&a.bsums)
                    .map(|(&m, &s)| m as i32 * s as i32)
                    .sum();
                acc[t] -= (dmin * a.d) * summ as f32;
            }
        }
    }
    acc
}

/// The engine's one f32 dot product, for `T` rows of activations against one
/// weight row: eight lane sums over the whole runs of 8 (`lanes[l] += w[l] *
/// a[l]`), the lanes added in order, plus the tail's own sum. Every f32 dot
/// of the CPU engine (f32 and 16-bit weight rows, RMSNorm, attention's
/// query . key) is this sum; the SIMD twins (`x86.rs`, `wasm.rs`) and the WGSL
/// shaders (matmul_float16.wgsl, attention.wgsl) keep its order, so its bits.
#[inline(always)]
pub(crate) fn dot_f32<const T: usize>(w: &[f32], acts: &[&[f32]; T]) -> [f32; T] {
    let n = acts.iter().fold(w.len(), |n, a| n.min(a.len()));
    let n8 = n / 8 * 8;
    let mut lanes = [[0.0f32; 8]; T];
    let mut i = 0;
    while i < n8 {
        let wc = &w[i..i + 8];
        for (acc, a) in lanes.iter_mut().zip(acts) {
            let ac = &a[i..i + 8];
            for l in 0..8 {
                acc[l] += wc[l] * ac[l];
            }
        }
        i += 8;
    }
    let mut out = [0.0f32; T];
    for ((o, acc), a) in out.iter_mut().zip(&lanes).zip(acts) {
        let mut tail = 0.0f32;
        for j in n8..n {
            tail += w[j] * a[j];
        }
        *o = acc.iter().sum::<f32>() + tail;
    }
    out
}

/// [`dot_f32`] of one pair of vectors, always inlined so it takes the
/// caller's instruction set (the attention variants are compiled for AVX2
/// and AVX-512).
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_f32::<1>(a, &[b])[0]
}

/// Geometry of an attention tile: the query tokens at positions `pos0..`,
/// every head, over the cached keys and values (`cpu/attention.rs`).
pub(crate) struct TileShape {
    pub hd: usize,
    pub kvd: usize,
    pub qd: usize,
    /// Query heads per KV head.
    pub group: usize,
    pub kv_heads: usize,
    pub pos0: usize,
    /// Keys per block (the portable loops).
    pub key_block: usize,
    /// The factor of every score (`ModelConfig::attention_scale`).
    pub scale: f32,
}

/// Attention's weighted sum of values, added to `oh`: `oh[i] += sum_k
/// (scores[k] / sum) * v_{first+k}[off + i]`, one key after another (a
/// product, then an add). The order the SIMD twins (`x86/values.rs`,
/// `wasm/values.rs`) and attention.wgsl keep, so its bits.
#[inline(always)]
pub(crate) fn weigh_values(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    let hd = oh.len();
    for (k, sc) in scores.iter().enumerate() {
        let p = sc / sum;
        let j = first + k;
        let vj = &values[j * kvd + off..j * kvd + off + hd];
        for (o, v) in oh.iter_mut().zip(vj) {
            *o += p * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{dot, dot_f32};

    /// The one f32 dot, written out: lane `l` sums the products at `8k + l`
    /// in order, the lanes are added 0..8, then the tail's own sum.
    fn written_out(a: &[f32], b: &[f32]) -> f32 {
        let n8 = a.len() / 8 * 8;
        let mut lanes = [0.0f32; 8];
        for i in 0..n8 {
            lanes[i % 8] += a[i] * b[i];
        }
        let mut tail = 0.0f32;
        for i in n8..a.len() {
            tail += a[i] * b[i];
        }
        lanes.iter().sum::<f32>() + tail
    }

    #[test]
    fn every_width_gives_the_written_out_sum_bit_for_bit() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for n in [0, 1, 7, 8, 9, 15, 16, 17, 33, 64, 100] {
            let w: Vec<f32> = (0..n).map(|_| next()).collect();
            let xs: Vec<Vec<f32>> = (0..4).map(|_| (0..n).map(|_| next()).collect()).collect();
            let four = dot_f32::<4>(&w, &[&xs[0], &xs[1], &xs[2], &xs[3]]);
            for (x, got) in xs.iter().zip(four) {
                let want = written_out(&w, x);
                assert_eq!(got.to_bits(), want.to_bits(), "n {n}: 4 rows");
                assert_eq!(dot(&w, x).to_bits(), want.to_bits(), "n {n}: 1 row");
            }
        }
    }
}
