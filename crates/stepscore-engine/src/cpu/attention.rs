//! Causal grouped-query attention of the CPU engine over a sequence's cached
//! keys and values: the portable loops, and the same operations compiled for
//! AVX2 and AVX-512 (x86_64, chosen by [`Simd`]) and as SIMD128 intrinsics
//! (wasm32); the hand-written sums of values are `quant/x86/values.rs` and
//! `quant/wasm/values.rs`, the portable one `quant::weigh_values`. Every variant gives the portable loops' bits:
//! per head, scores q . k ([`dot`]) times the scale, their max, e^(score -
//! max), their sum in key order, then the values weighted by score / sum,
//! summed in key order. attention.wgsl follows the same order.
//!
//! A prefill computes tiles of query tokens ([`attend_tile`]): the rows of
//! a KV head's query heads for several tokens read each block of its key
//! and value rows while the block sits in L1, instead of every row
//! streaming the whole cache (on a 4k-token trace the cache of a layer is
//! megabytes). Each row still gets the one-query order above, so the bits.
//! On AVX-512 a tile is `quant/x86/attention.rs`: sixteen rows side by side
//! in a register's lanes, the softmax vectorized over rows (3.6x this
//! file's AVX-512 tile on a 4k-token trace, Zen 5, docs/BENCHMARKS.md);
//! a decode step's single token puts sixteen keys in the lanes there.

use crate::model::ModelConfig;
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use crate::quant::dot;
use crate::quant::exp::exp;
#[cfg(target_arch = "x86_64")]
use crate::quant::x86;
use crate::quant::{weigh_values, Simd, TileShape};

/// Causal grouped-query attention of `n` new queries (absolute positions
/// `start..start+n`) over all cached keys/values; writes `[n × q_dim]`.
/// Work is split over `threads` by interleaved blocks of query tokens,
/// since later tokens attend to more keys.
#[allow(clippy::too_many_arguments)]
pub(super) fn attention(
    c: &ModelConfig,
    layer: usize,
    threads: usize,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    start: usize,
    n: usize,
    out: &mut [f32],
) {
    let qd = c.q_dim();
    let window = c.window(layer);
    let all = crate::par::usable(threads);
    let simd = Simd::detect();
    if n < all && c.n_heads > 1 {
        // Fewer queries than threads (decode): split each query's heads.
        let threads = all.min(c.n_heads);
        let per = c.n_heads.div_ceil(threads) * c.head_dim;
        let mut jobs: Vec<Vec<(usize, usize, &mut [f32])>> =
            (0..threads).map(|_| Vec::new()).collect();
        for (t, orow) in out.chunks_exact_mut(qd).enumerate() {
            for (k, part) in orow.chunks_mut(per).enumerate() {
                if let Some(list) = jobs.get_mut(k % threads) {
                    list.push((t, k * per, part));
                }
            }
        }
        crate::par::for_each(jobs, |list| {
            let mut scratch = Vec::new();
            for (t, at, part) in list {
                let qs = &q[t * qd + at..t * qd + at + part.len()];
                let h0 = at / c.head_dim;
                let heads = h0..h0 + part.len() / c.head_dim.max(1);
                if window.is_none()
                    && attend_tile_lanes(
                        c,
                        simd,
                        heads,
                        qs,
                        keys,
                        values,
                        start + t,
                        part,
                        &mut scratch,
                    )
                {
                    continue;
                }
                attend_one(c, window, simd, qs, keys, values, start + t, h0, part);
            }
        });
        return;
    }
    let threads = all.min(n);
    let block = n.div_ceil(threads * 4).max(1);
    let mut jobs: Vec<Vec<(usize, &mut [f32])>> = (0..threads).map(|_| Vec::new()).collect();
    for (bi, chunk) in out.chunks_mut(block * qd).enumerate() {
        if let Some(list) = jobs.get_mut(bi % threads) {
            list.push((bi * block, chunk));
        }
    }
    let run = |list: Vec<(usize, &mut [f32])>| {
        // The tiles' scores, reused over the job's tiles.
        let mut scratch = Vec::new();
        for (t0, chunk) in list {
            if window.is_some() {
                // Rows of one tile would start at different keys: one by one.
                for (dt, orow) in chunk.chunks_exact_mut(qd).enumerate() {
                    let t = t0 + dt;
                    let qs = &q[t * qd..(t + 1) * qd];
                    attend_one(c, window, simd, qs, keys, values, start + t, 0, orow);
                }
                continue;
            }
            let tile = tile_tokens(simd, c.n_heads / c.n_kv_heads);
            for (ti, orows) in chunk.chunks_mut(tile * qd).enumerate() {
                let t = t0 + ti * tile;
                let qs = &q[t * qd..t * qd + orows.len()];
                attend_tile(c, simd, qs, keys, values, start + t, orows, &mut scratch);
            }
        }
    };
    crate::par::for_each(jobs, run);
}

/// Where [`add_weighted_values`] holds a head's output row (the `V`
/// parameter of the bodies): memory (the portable loop), AVX2 or AVX-512
/// registers.
const PORTABLE: u8 = 0;
// Only the x86 bodies use the register variants.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const YMM: u8 = 1;
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const ZMM: u8 = 2;

/// Query tokens per tile: with a KV head's query heads, the rows that share
/// each block of its keys and values (4 x 6 for Qwen2.5-1.5B), few enough
/// that their scores (4k keys each) stay in L2.
const TILE_TOKENS: usize = 4;

/// Query tokens per tile for `simd` and `group` query heads per KV head:
/// the AVX-512 kernel puts sixteen rows in the lanes of a register and
/// reads each block of keys once for all of a tile's rows, so its tiles
/// hold twice the least multiple of sixteen rows (16 tokens x 6 heads on
/// Qwen2.5-1.5B, 32 x 3 on SmolLM2); the loops elsewhere take [`TILE_TOKENS`].
fn tile_tokens(simd: Simd, group: usize) -> usize {
    match simd {
        Simd::Avx512 => {
            let (mut a, mut b) = (group.max(1), 16);
            while b != 0 {
                (a, b) = (b, a % b);
            }
            32 / a
        }
        _ => TILE_TOKENS,
    }
}

/// Bytes of one KV head's key (or value) rows in a block: a block stays in
/// L1 (32 KiB or more on current x86 cores) while every row of a tile reads it.
const KEY_BLOCK_BYTES: usize = 16 * 1024;

/// Attention of the query tokens at absolute positions `pos0..` (as many
/// as `out` holds rows; no sliding window), all heads, per KV head: the
/// scores of all its rows by blocks of keys, each row's softmax, then the
/// weighted values by blocks of keys. Per row the operations and their
/// order are [`attend_one_body`]'s, so the bits are too. `scratch` holds
/// the scores (grown as needed, reused by the caller across tiles).
#[allow(clippy::too_many_arguments)]
fn attend_tile(
    c: &ModelConfig,
    simd: Simd,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    if attend_tile_lanes(c, simd, 0..c.n_heads, q, keys, values, pos0, out, scratch) {
        return;
    }
    let shape = tile_shape(c, pos0);
    match simd {
        // SAFETY: `Simd::detect` found the features the variants are compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 | Simd::AvxVnni => unsafe {
            attend_tile_avx2(&shape, q, keys, values, out, scratch)
        },
        _ => attend_tile_body::<PORTABLE>(&shape, q, keys, values, out, scratch),
    }
}

fn tile_shape(c: &ModelConfig, pos0: usize) -> TileShape {
    TileShape {
        hd: c.head_dim,
        kvd: c.kv_dim(),
        qd: c.q_dim(),
        group: c.n_heads / c.n_kv_heads,
        kv_heads: c.n_kv_heads,
        pos0,
        key_block: (KEY_BLOCK_BYTES / (4 * c.head_dim.max(1))).max(8),
        scale: c.attention_scale(),
    }
}

/// The query heads `heads` of the tokens at `pos0..` (`q` and `out` hold
/// those heads of each token) on the AVX-512 kernel with sixteen rows in
/// the lanes (`quant/x86/attention.rs`), the prefill's tiles and a decode
/// step's share of heads alike; false where it did not run (another
/// instruction set, or slices it refuses), and the caller's loops take over.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn attend_tile_lanes(
    c: &ModelConfig,
    simd: Simd,
    heads: std::ops::Range<usize>,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if simd == Simd::Avx512 {
        let shape = tile_shape(c, pos0);
        // SAFETY: `Simd::detect` found AVX-512.
        return unsafe {
            x86::attention::attend_tile(&shape, heads, q, keys, values, out, scratch)
        };
    }
    false
}

/// [`attend_tile_body`] compiled with AVX2 (see [`attend_one_avx2`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_tile_avx2(
    s: &TileShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    attend_tile_body::<YMM>(s, q, keys, values, out, scratch)
}

#[inline(always)]
fn attend_tile_body<const V: u8>(
    s: &TileShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let (hd, kvd, qd, group, scale) = (s.hd, s.kvd, s.qd, s.group, s.scale);
    let tokens = out.len() / qd;
    // Row r = (token t, head g * group + gh) with r = t * group + gh; the
    // last token reads `width` keys, token t reads pos0 + t + 1.
    let width = s.pos0 + tokens;
    let rows = tokens * group;
    if scratch.len() < rows * width {
        scratch.resize(rows * width, 0.0);
    }
    let mut sums = vec![0.0f32; rows];
    out.fill(0.0);
    for g in 0..s.kv_heads {
        let off = g * hd;
        let head = |r: usize| (r / group, g * group + r % group);
        for kb in (0..width).step_by(s.key_block) {
            for r in 0..rows {
                let (t, h) = head(r);
                let lim = (kb + s.key_block).min(s.pos0 + t + 1);
                let qh = &q[t * qd + h * hd..t * qd + (h + 1) * hd];
                let row = &mut scratch[r * width..(r + 1) * width];
                for (j, sc) in row.iter_mut().enumerate().take(lim).skip(kb) {
                    *sc = attn_dot(qh, &keys[j * kvd + off..j * kvd + off + hd]) * scale;
                }
            }
        }
        for (r, sum) in sums.iter_mut().enumerate() {
            let (t, _) = head(r);
            let row = &mut scratch[r * width..r * width + s.pos0 + t + 1];
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            *sum = 0.0;
            for sc in row.iter_mut() {
                *sc = exp(*sc - max);
                *sum += *sc;
            }
        }
        for kb in (0..width).step_by(s.key_block) {
            for (r, &sum) in sums.iter().enumerate() {
                let (t, h) = head(r);
                let lim = (kb + s.key_block).min(s.pos0 + t + 1);
                if kb >= lim {
                    continue;
                }
                let scores = &scratch[r * width + kb..r * width + lim];
                let oh = &mut out[t * qd + h * hd..t * qd + (h + 1) * hd];
                add_weighted_values::<V>(scores, sum, values, kvd, off, kb, oh);
            }
        }
    }
}

/// One query token at absolute position `pos`: heads `h0..` (as many
/// as `q` and `out` hold; every head is computed on its own).
#[allow(clippy::too_many_arguments)]
fn attend_one(
    c: &ModelConfig,
    window: Option<usize>,
    simd: Simd,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos: usize,
    h0: usize,
    out: &mut [f32],
) {
    let first = match window {
        Some(w) => (pos + 1).saturating_sub(w),
        None => 0,
    };
    let shape = AttnShape {
        hd: c.head_dim,
        kvd: c.kv_dim(),
        group: c.n_heads / c.n_kv_heads,
        first,
        pos,
        h0,
        scale: c.attention_scale(),
    };
    match simd {
        // SAFETY: `Simd::detect` found the features the variants are compiled for.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { attend_one_avx512(&shape, q, keys, values, out) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 | Simd::AvxVnni => unsafe { attend_one_avx2(&shape, q, keys, values, out) },
        _ => attend_one_body::<PORTABLE>(&shape, q, keys, values, out),
    }
}

/// Geometry of one query's attention (see [`attend_one_body`]).
struct AttnShape {
    hd: usize,
    kvd: usize,
    group: usize,
    first: usize,
    pos: usize,
    /// Head index of the first head in the query and output slices.
    h0: usize,
    scale: f32,
}

/// [`attend_one_body`] compiled with AVX2 (the baseline x86_64 target only
/// has SSE2): the same operations in the same order, so the same results,
/// with twice the vector width. Attention is the engine's largest cost
/// outside the quantized matmuls, and this is the cheapest way to speed it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn attend_one_avx2(s: &AttnShape, q: &[f32], keys: &[f32], values: &[f32], out: &mut [f32]) {
    attend_one_body::<YMM>(s, q, keys, values, out)
}

/// [`attend_one_avx2`] with the weighted sum of values in AVX-512 registers
/// (`x86::values::weigh_values_avx512`): the same per-element operations, so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
unsafe fn attend_one_avx512(
    s: &AttnShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    attend_one_body::<ZMM>(s, q, keys, values, out)
}

/// Softmax attention of one query row (all heads) over keys/values
/// `first..=pos`; inlined into each instruction-set variant.
/// `V`: where the weighted sum of values is held ([`add_weighted_values`]).
#[inline(always)]
fn attend_one_body<const V: u8>(
    s: &AttnShape,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
) {
    let (hd, kvd, scale) = (s.hd, s.kvd, s.scale);
    let mut scores = vec![0.0f32; s.pos + 1 - s.first];
    for (h, (qh, oh)) in q.chunks_exact(hd).zip(out.chunks_exact_mut(hd)).enumerate() {
        let off = ((s.h0 + h) / s.group) * hd;
        let mut max = f32::NEG_INFINITY;
        for (sc, j) in scores.iter_mut().zip(s.first..=s.pos) {
            let kj = &keys[j * kvd + off..j * kvd + off + hd];
            *sc = attn_dot(qh, kj) * scale;
            max = max.max(*sc);
        }
        let mut sum = 0.0f32;
        for sc in scores.iter_mut() {
            *sc = exp(*sc - max);
            sum += *sc;
        }
        oh.fill(0.0);
        add_weighted_values::<V>(&scores, sum, values, kvd, off, s.first, oh);
    }
}

/// `oh[i] += Σ_k (scores[k] / sum) * v_{first+k}[off + i]`, keys in order:
/// in registers when `V` is [`YMM`] or [`ZMM`] (set only by the AVX2 and
/// AVX-512F variants), SIMD128 ones on wasm32, else the portable loop; all
/// with its bits.
#[inline(always)]
fn add_weighted_values<const V: u8>(
    scores: &[f32],
    sum: f32,
    values: &[f32],
    kvd: usize,
    off: usize,
    first: usize,
    oh: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if V == YMM {
        // SAFETY: `YMM` is only set by the AVX2 variants, whose callers
        // checked for AVX2; it checks the value rows are in bounds.
        unsafe { x86::values::weigh_values_avx2(scores, sum, values, kvd, off, first, oh) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if V == ZMM {
        // SAFETY: `ZMM` is only set by the AVX-512 variants, whose callers
        // checked for AVX-512F; it checks the value rows are in bounds.
        unsafe { x86::values::weigh_values_avx512(scores, sum, values, kvd, off, first, oh) };
        return;
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if crate::quant::wasm::values::weigh_values(scores, sum, values, kvd, off, first, oh) {
        return;
    }
    weigh_values(scores, sum, values, kvd, off, first, oh);
}

/// Query . key: the engine's one [`dot`], as SIMD128 intrinsics on wasm32
/// (the same lanes summed in the same order, so the same bits).
#[inline(always)]
fn attn_dot(a: &[f32], b: &[f32]) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        let n = a.len().min(b.len());
        // SAFETY: both slices are cut to n values.
        return unsafe { crate::quant::wasm::dot_f32::<1>(&a[..n], &[&b[..n]])[0] };
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    dot(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On wasm32 (wasm-bindgen-test, scripts/test/test-wasm-kernels.sh): the
    /// SIMD128 attention sums against this file's portable loops, bit for bit,
    /// for head sizes with and without a tail.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    #[wasm_bindgen_test::wasm_bindgen_test]
    fn simd128_attention_sums_equal_the_portable_loops() {
        use crate::quant::wasm::values as simd128;
        use crate::quant::{dot, wasm};
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for (hd, kv_heads, keys, first) in
            [(64, 3, 37, 0), (72, 2, 9, 1), (6, 1, 3, 0), (130, 1, 5, 2)]
        {
            let kvd = hd * kv_heads;
            let values: Vec<f32> = (0..(first + keys) * kvd).map(|_| next()).collect();
            let scores: Vec<f32> = (0..keys).map(|_| (next() * 4.0).exp()).collect();
            let sum: f32 = scores.iter().sum();
            for h in 0..kv_heads {
                let off = h * hd;
                // Added to what `oh` holds (a tile's earlier key blocks).
                let mut want: Vec<f32> = (0..hd).map(|_| next()).collect();
                let mut got = want.clone();
                weigh_values(&scores, sum, &values, kvd, off, first, &mut want);
                assert!(simd128::weigh_values(
                    &scores, sum, &values, kvd, off, first, &mut got
                ));
                assert!(
                    got.iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()),
                    "hd {hd}, head {h}: {got:?} vs {want:?}"
                );
                let (q, k) = (&values[off..off + hd], &values[kvd + off..kvd + off + hd]);
                // SAFETY: q and k are hd long.
                let simd = unsafe { wasm::dot_f32::<1>(q, &[k])[0] };
                assert_eq!(simd.to_bits(), dot(q, k).to_bits());
            }
            // Rows past the cache: refused, the portable loop takes over.
            let mut out = vec![0.0f32; hd];
            assert!(!simd128::weigh_values(
                &scores,
                sum,
                &values[..kvd],
                kvd,
                0,
                first,
                &mut out
            ));
        }
    }

    /// The AVX2 and AVX-512 weighted sums of values keep each element's
    /// operations (0 + p_0 v_0 + p_1 v_1 ..., no fused multiply-add), so they
    /// must give the portable loop's bits, for head sizes with and without
    /// a tail (of 16 and of 8 values).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_weighted_values_equal_the_portable_loop_bit_for_bit() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        let avx512 = std::is_x86_feature_detected!("avx512f");
        if !avx2 {
            eprintln!("no AVX2 on this CPU: the register weighted sums are not exercised");
            return;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        for (hd, kv_heads, keys, first) in [
            (128, 2, 37, 0),
            (64, 3, 5, 2),
            (72, 2, 9, 1),
            (8, 1, 3, 0),
            (272, 1, 4, 0),
            (70, 2, 6, 1),
            (6, 1, 3, 0),
        ] {
            let kvd = hd * kv_heads;
            let values: Vec<f32> = (0..(first + keys) * kvd).map(|_| next()).collect();
            let scores: Vec<f32> = (0..keys).map(|_| (next() * 4.0).exp()).collect();
            let sum: f32 = scores.iter().sum();
            for h in 0..kv_heads {
                let off = h * hd;
                // Added to what `oh` holds (a tile's earlier key blocks).
                let start: Vec<f32> = (0..hd).map(|_| next()).collect();
                let mut want = start.clone();
                weigh_values(&scores, sum, &values, kvd, off, first, &mut want);
                let mut got = start.clone();
                // SAFETY: AVX2 checked above.
                unsafe {
                    x86::values::weigh_values_avx2(&scores, sum, &values, kvd, off, first, &mut got)
                };
                let same = |g: &[f32]| g.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(same(&got), "AVX2, hd {hd}, head {h}: {got:?} vs {want:?}");
                if avx512 {
                    let mut got = start.clone();
                    // SAFETY: AVX-512F checked above.
                    unsafe {
                        x86::values::weigh_values_avx512(
                            &scores, sum, &values, kvd, off, first, &mut got,
                        )
                    };
                    assert!(
                        same(&got),
                        "AVX-512, hd {hd}, head {h}: {got:?} vs {want:?}"
                    );
                }
            }
        }
    }

    fn config(n_heads: usize, n_kv_heads: usize, head_dim: usize) -> ModelConfig {
        ModelConfig {
            arch: crate::model::Arch::Llama,
            hidden_size: n_heads * head_dim,
            intermediate_size: 8,
            n_layers: 1,
            n_heads,
            n_kv_heads,
            head_dim,
            vocab_size: 8,
            rms_norm_eps: 1e-5,
            rope_theta: 10000.0,
            rope_scaling: crate::model::RopeScaling::None,
            max_position_embeddings: 1 << 16,
            tie_word_embeddings: false,
            attention_bias: false,
            o_bias: false,
            sliding_window: None,
            local_layers: vec![false],
            rope_local_theta: None,
            query_pre_attn_scalar: head_dim,
            activation: crate::model::Activation::Silu,
            architectures: vec![],
        }
    }

    /// Tiles of query tokens (the prefill path, several key blocks) give
    /// each row the one-query loops' bits, on this CPU's kernels and on the
    /// portable ones, for head sizes with and without a SIMD tail, partial
    /// tiles, and new tokens after cached ones; natively and on wasm32
    /// (SIMD128, scripts/test/test-wasm-kernels.sh).
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(
        all(target_arch = "wasm32", target_feature = "simd128"),
        wasm_bindgen_test::wasm_bindgen_test
    )]
    fn query_tiles_equal_one_query_at_a_time_bit_for_bit() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        };
        for (heads, kv_heads, hd, start, n) in [
            (12, 2, 128, 0, 70),
            (9, 3, 64, 5, 11),
            (4, 4, 72, 300, 9),
            (2, 1, 6, 0, 3),
            (6, 2, 130, 40, 1 + 2 * TILE_TOKENS),
            // One-token tiles: keys in the lanes on AVX-512.
            (12, 2, 128, 500, 1),
            (8, 1, 70, 33, 1),
        ] {
            let c = config(heads, kv_heads, hd);
            let (qd, kvd) = (c.q_dim(), c.kv_dim());
            let total = start + n;
            let keys: Vec<f32> = (0..total * kvd).map(|_| next()).collect();
            let values: Vec<f32> = (0..total * kvd).map(|_| next()).collect();
            let q: Vec<f32> = (0..n * qd).map(|_| next()).collect();
            for simd in [Simd::detect(), Simd::Portable] {
                let mut want = vec![f32::NAN; n * qd];
                for (t, orow) in want.chunks_exact_mut(qd).enumerate() {
                    let qs = &q[t * qd..(t + 1) * qd];
                    attend_one(&c, None, simd, qs, &keys, &values, start + t, 0, orow);
                }
                let mut got = vec![f32::NAN; n * qd];
                let mut scratch = Vec::new();
                let tile = tile_tokens(simd, heads / kv_heads);
                for (ti, orows) in got.chunks_mut(tile * qd).enumerate() {
                    let t = ti * tile;
                    let qs = &q[t * qd..t * qd + orows.len()];
                    attend_tile(&c, simd, qs, &keys, &values, start + t, orows, &mut scratch);
                }
                let differ = got
                    .iter()
                    .zip(&want)
                    .position(|(g, w)| g.to_bits() != w.to_bits());
                assert_eq!(
                    differ, None,
                    "{heads} heads / {kv_heads} kv, hd {hd}, {start}+{n} tokens, {simd:?}"
                );
                // The whole pass, threads and all, is the tiles' result.
                let mut whole = vec![f32::NAN; n * qd];
                attention(&c, 0, 2, &q, &keys, &values, start, n, &mut whole);
                if simd == Simd::detect() {
                    assert!(whole
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits()));
                    // A decode step (one token, heads split over threads)
                    // of the last token: its row of the same result.
                    let last = (n - 1) * qd;
                    let mut step = vec![f32::NAN; qd];
                    attention(
                        &c,
                        0,
                        2,
                        &q[last..],
                        &keys,
                        &values,
                        start + n - 1,
                        1,
                        &mut step,
                    );
                    assert!(
                        step.iter()
                            .zip(&want[last..])
                            .all(|(g, w)| g.to_bits() == w.to_bits()),
                        "decode step, {heads} heads / {kv_heads} kv, hd {hd}, {simd:?}"
                    );
                }
            }
        }
    }
}
