//! Attention of a tile of query tokens in AVX-512 registers with the rows
//! in the lanes: sixteen (query token, head) rows of one KV head side by
//! side, so each key and value element is broadcast once for sixteen rows
//! and the softmax runs sixteen rows at a time. Every lane takes exactly
//! the operations of the portable one-query loops (`cpu/attention.rs`) in
//! their order, so the bits are the same:
//!
//! - score = (Σ over the eight dot lanes, in order, of q.k products summed
//!   lane by lane, `portable::dot_f32`) + the tail's sum, times the scale;
//! - max, then e^(score - max) (`quant::exp`'s steps) summed in key order;
//! - out = 0 + Σ over keys in order of (e / sum) * v (`portable::weigh_values`).
//!
//! A tile of one query token (a decode step) puts sixteen keys in the lanes
//! instead ([`attend_query`]): the same operations per head, in the same
//! order, with the keys transposed once for all of a KV head's heads.
//!
//! No fused multiply-add anywhere. A lane whose row does not see a key (the
//! causal edge inside a block of rows) is left untouched by a masked
//! operation, never given a zero that could flip the sign of a zero.

use std::arch::x86_64::*;
use std::ops::Range;

use crate::quant::exp::{C, LN2_HI, LN2_LO, LOG2_E, MAGIC};
use crate::quant::portable::TileShape;

/// Rows per block: the lanes of a zmm register.
const LANES: usize = 16;

/// Keys per block: one KV head's keys (or values) of a block, 16 KiB at
/// 128 dimensions, stay in L1 while every block of rows reads them.
const KEY_BLOCK: usize = 32;

/// `TileShape`'s attention of the query heads `heads` of the query tokens
/// at positions `pos0..`, written to `out`: `q` and `out` hold those heads
/// of each token (a token's row is `heads.len() * hd` values; all heads in
/// a prefill, a thread's share of them in a decode step). Returns false,
/// touching nothing, when the slices do not hold what the shape says (the
/// caller then runs the portable loops, which check every index).
///
/// # Safety
/// The CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn attend_tile(
    s: &TileShape,
    heads: Range<usize>,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> bool {
    let (hd, kvd, group) = (s.hd, s.kvd, s.group);
    let stride = heads.len() * hd;
    if stride == 0 || group == 0 || !out.len().is_multiple_of(stride) {
        return false;
    }
    let tokens = out.len() / stride;
    let width = s.pos0 + tokens;
    // The last key or value element read: row width - 1, last KV head.
    let reach = (width - 1) * kvd + heads.end.div_ceil(group) * hd;
    if q.len() < out.len()
        || heads.end > s.kv_heads * group
        || s.kv_heads * hd > kvd
        || keys.len() < reach
        || values.len() < reach
    {
        return false;
    }
    if tokens == 1 {
        attend_query(s, heads, q, keys, values, out, scratch);
        return true;
    }
    let rows_max = tokens * group.min(heads.len());
    let nrb = rows_max.div_ceil(LANES);
    // Per block of rows: its queries transposed (hd x 16), its scores by
    // key (width x 16) and its outputs transposed (hd x 16); then the
    // probabilities of one key block.
    let (qlen, slen) = (hd * LANES, width * LANES);
    let need = nrb * (2 * qlen + slen) + KEY_BLOCK * LANES;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (qts, rest) = scratch.split_at_mut(nrb * qlen);
    let (scs, rest) = rest.split_at_mut(nrb * slen);
    let (accs, probs) = rest.split_at_mut(nrb * qlen);
    let mut blocks = Vec::with_capacity(nrb);
    for g in heads.start / group..heads.end.div_ceil(group) {
        // This KV head's query heads among `heads`: rows (token t, head
        // h0 + j) numbered t * per + j.
        let h0 = heads.start.max(g * group);
        let per = heads.end.min((g + 1) * group) - h0;
        let row = |r: usize| (r / per, (h0 - heads.start + r % per) * hd);
        let rows = tokens * per;
        blocks.clear();
        for (bi, r0) in (0..rows).step_by(LANES).enumerate() {
            let n = (rows - r0).min(LANES);
            // Lane i is row r0 + i; it sees keys 0..pos0 + t + 1. Unused
            // lanes see none.
            let mut lim = [0i32; LANES];
            for (i, l) in lim.iter_mut().enumerate().take(n) {
                *l = (s.pos0 + row(r0 + i).0 + 1) as i32;
            }
            let qt = &mut qts[bi * qlen..(bi + 1) * qlen];
            for d in 0..hd {
                for (i, slot) in qt[d * LANES..(d + 1) * LANES].iter_mut().enumerate() {
                    *slot = if i < n {
                        let (t, at) = row(r0 + i);
                        q[t * stride + at + d]
                    } else {
                        0.0
                    };
                }
            }
            blocks.push(Block {
                hd,
                kvd,
                off: g * hd,
                first: lim[0] as usize,
                last: lim[n - 1] as usize,
                lim: _mm512_loadu_si512(lim.as_ptr().cast()),
                max: _mm512_set1_ps(f32::NEG_INFINITY),
                sum: _mm512_setzero_ps(),
            });
        }
        let end = blocks.last().map_or(0, |b| b.last);
        // Each block of keys is read once for all blocks of rows, while it
        // sits in L1.
        for k0 in (0..end).step_by(KEY_BLOCK) {
            for (bi, b) in blocks.iter_mut().enumerate().filter(|(_, b)| k0 < b.last) {
                let keys_here = k0..(k0 + KEY_BLOCK).min(b.last);
                let qt = &qts[bi * qlen..(bi + 1) * qlen];
                scores(
                    b,
                    qt,
                    keys,
                    s.scale,
                    keys_here,
                    &mut scs[bi * slen..(bi + 1) * slen],
                );
            }
        }
        for (bi, b) in blocks.iter_mut().enumerate() {
            softmax(b, &mut scs[bi * slen..(bi + 1) * slen]);
        }
        accs[..nrb * qlen].fill(0.0);
        for k0 in (0..end).step_by(KEY_BLOCK) {
            for (bi, b) in blocks.iter().enumerate().filter(|(_, b)| k0 < b.last) {
                let keys_here = k0..(k0 + KEY_BLOCK).min(b.last);
                let e = &scs[bi * slen..(bi + 1) * slen];
                let acc = &mut accs[bi * qlen..(bi + 1) * qlen];
                weigh(b, e, values, keys_here, probs, acc);
            }
        }
        for (bi, r0) in (0..rows).step_by(LANES).enumerate() {
            let acc = &accs[bi * qlen..(bi + 1) * qlen];
            for i in 0..(rows - r0).min(LANES) {
                let (t, at) = row(r0 + i);
                let o = &mut out[t * stride + at..t * stride + at + hd];
                for (d, v) in o.iter_mut().enumerate() {
                    *v = acc[d * LANES + i];
                }
            }
        }
    }
    true
}

/// One block of up to sixteen rows of one KV head.
struct Block {
    hd: usize,
    kvd: usize,
    /// The KV head's offset in a key or value row.
    off: usize,
    /// Keys the first lane sees (every lane sees at least these) and the
    /// last used lane sees (no lane sees more).
    first: usize,
    last: usize,
    /// Keys each lane sees (0 for unused lanes).
    lim: __m512i,
    /// Each lane's largest score so far, then its sum of e^(score - max).
    max: __m512,
    sum: __m512,
}

impl Block {
    /// The lanes that see key `k`.
    #[inline(always)]
    unsafe fn sees(&self, k: usize) -> __mmask16 {
        _mm512_cmpgt_epi32_mask(self.lim, _mm512_set1_epi32(k as i32))
    }
}

/// Keys whose scores are computed together: each query load serves this
/// many keys (a block's 32 keys are four of them).
const SCORE_KEYS: usize = 8;

/// Scores of keys `keys_here` into `sc` (key-major, lanes = rows), each
/// the portable dot of the lane's query and the key, times `scale`, and
/// the lanes' running max over the keys they see.
///
/// Eight keys at a time, one dot lane at a time: lane l's partial sum of a
/// key (its dimensions l, l + 8, ... in order, from zero) is complete
/// before it joins the key's running sum of lanes, so each key's sum is
/// `((0 + lane 0) + lane 1) + ... + lane 7` as in `portable::dot_f32`,
/// while each query element loaded serves eight keys (the loads, not the
/// multiplies, bounded the two-keys-at-a-time loop this replaced).
#[inline(always)]
unsafe fn scores(
    b: &mut Block,
    qt: &[f32],
    keys: &[f32],
    scale: f32,
    keys_here: Range<usize>,
    sc: &mut [f32],
) {
    let n8 = b.hd / 8 * 8;
    let scale = _mm512_set1_ps(scale);
    let qt = qt.as_ptr();
    let mut k = keys_here.start;
    while k < keys_here.end {
        let nk = (keys_here.end - k).min(SCORE_KEYS);
        // A short last group repeats its last key in the unused slots; their
        // scores are dropped.
        let kp: [*const f32; SCORE_KEYS] =
            std::array::from_fn(|i| keys.as_ptr().add((k + i.min(nk - 1)) * b.kvd + b.off));
        let mut sum = [_mm512_setzero_ps(); SCORE_KEYS];
        for l in 0..8 {
            let mut acc = [_mm512_setzero_ps(); SCORE_KEYS];
            let mut d = l;
            while d < n8 {
                let qv = _mm512_loadu_ps(qt.add(d * LANES));
                for (a, p) in acc.iter_mut().zip(&kp) {
                    *a = _mm512_add_ps(*a, _mm512_mul_ps(qv, _mm512_set1_ps(*p.add(d))));
                }
                d += 8;
            }
            for (s, a) in sum.iter_mut().zip(&acc) {
                *s = _mm512_add_ps(*s, *a);
            }
        }
        for (i, (s, p)) in sum.iter().zip(&kp).enumerate().take(nk) {
            let v = finish(b, *s, qt, *p, scale);
            _mm512_storeu_ps(sc.as_mut_ptr().add((k + i) * LANES), v);
            b.max = running_max(b, k + i, v);
        }
        k += nk;
    }
}

/// The lanes' max with key `k`'s scores where they see it, as `f32::max`
/// folds: vmaxps returns its second operand (the max so far) when either
/// is NaN.
#[inline(always)]
unsafe fn running_max(b: &Block, k: usize, v: __m512) -> __m512 {
    if k < b.first {
        _mm512_max_ps(v, b.max)
    } else {
        _mm512_mask_max_ps(b.max, b.sees(k), v, b.max)
    }
}

/// One key's scores from its lanes' sum (the eight dot lanes added in
/// order), plus the sum of the products past the last whole eight, times
/// `scale`. (A function, not a closure: closures do not take the caller's
/// `target_feature`, and their intrinsics would become calls.)
#[inline(always)]
unsafe fn finish(b: &Block, sum: __m512, qt: *const f32, kp: *const f32, scale: __m512) -> __m512 {
    let mut tail = _mm512_setzero_ps();
    for d in b.hd / 8 * 8..b.hd {
        let p = _mm512_mul_ps(
            _mm512_loadu_ps(qt.add(d * LANES)),
            _mm512_set1_ps(*kp.add(d)),
        );
        tail = _mm512_add_ps(tail, p);
    }
    _mm512_mul_ps(_mm512_add_ps(sum, tail), scale)
}

/// Each lane's e^(score - max) over the keys it sees, in place, and their
/// sum in key order (the division by the sum is [`weigh`]'s).
#[inline(always)]
unsafe fn softmax(b: &mut Block, sc: &mut [f32]) {
    let p = sc.as_mut_ptr();
    let mut sum = _mm512_setzero_ps();
    for k in 0..b.first {
        let e = exp(_mm512_sub_ps(_mm512_loadu_ps(p.add(k * LANES)), b.max));
        _mm512_storeu_ps(p.add(k * LANES), e);
        sum = _mm512_add_ps(sum, e);
    }
    for k in b.first..b.last {
        let e = exp(_mm512_sub_ps(_mm512_loadu_ps(p.add(k * LANES)), b.max));
        _mm512_storeu_ps(p.add(k * LANES), e);
        sum = _mm512_mask_add_ps(sum, b.sees(k), sum, e);
    }
    b.sum = sum;
}

/// Sixteen lanes of `quant::exp::exp`, step for step.
#[inline(always)]
unsafe fn exp(x: __m512) -> __m512 {
    let n = _mm512_sub_ps(
        _mm512_add_ps(
            _mm512_mul_ps(x, _mm512_set1_ps(LOG2_E)),
            _mm512_set1_ps(MAGIC),
        ),
        _mm512_set1_ps(MAGIC),
    );
    let r = _mm512_sub_ps(
        _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(LN2_HI))),
        _mm512_mul_ps(n, _mm512_set1_ps(LN2_LO)),
    );
    let mut poly = _mm512_set1_ps(C[0]);
    for c in &C[1..] {
        poly = _mm512_add_ps(_mm512_mul_ps(poly, r), _mm512_set1_ps(*c));
    }
    let one = _mm512_set1_ps(1.0);
    poly = _mm512_add_ps(_mm512_mul_ps(poly, r), one);
    poly = _mm512_add_ps(_mm512_mul_ps(poly, r), one);
    let bits = _mm512_slli_epi32::<23>(_mm512_add_epi32(
        _mm512_cvttps_epi32(n),
        _mm512_set1_epi32(127),
    ));
    let mut e = _mm512_mul_ps(poly, _mm512_castsi512_ps(bits));
    e = _mm512_mask_mov_ps(
        e,
        _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_set1_ps(-85.0)),
        _mm512_setzero_ps(),
    );
    e = _mm512_mask_mov_ps(
        e,
        _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, _mm512_set1_ps(88.0)),
        _mm512_set1_ps(f32::MAX),
    );
    _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), x)
}

/// Adds keys `keys_here` to the lanes' weighted sums of values, `acc`
/// (hd x 16, element-major): p = e / sum for each key once (into `probs`),
/// then sixteen elements of all lanes at a time, 0 + Σ_k p_k v_k[c] in key
/// order over the calls.
#[inline(always)]
unsafe fn weigh(
    b: &Block,
    e: &[f32],
    values: &[f32],
    keys_here: Range<usize>,
    probs: &mut [f32],
    acc: &mut [f32],
) {
    for (j, k) in keys_here.clone().enumerate() {
        let p = _mm512_div_ps(_mm512_loadu_ps(e.as_ptr().add(k * LANES)), b.sum);
        _mm512_storeu_ps(probs.as_mut_ptr().add(j * LANES), p);
    }
    for c0 in (0..b.hd).step_by(LANES) {
        let w = (b.hd - c0).min(LANES);
        let part = acc.as_mut_ptr().add(c0 * LANES);
        // A whole chunk has a constant count, so its accumulators stay in registers.
        if w == LANES {
            weigh_chunk(b, probs, values, keys_here.clone(), c0, LANES, part);
        } else {
            weigh_chunk(b, probs, values, keys_here.clone(), c0, w, part);
        }
    }
}

/// Elements `c0..c0 + w` of every lane's weighted sum of values, loaded
/// from and stored back to `part` (see [`weigh`]); inlined where `w` is a
/// constant.
#[inline(always)]
unsafe fn weigh_chunk(
    b: &Block,
    probs: &[f32],
    values: &[f32],
    keys_here: Range<usize>,
    c0: usize,
    w: usize,
    part: *mut f32,
) {
    let mut acc = [_mm512_setzero_ps(); LANES];
    for (c, a) in acc.iter_mut().enumerate().take(w) {
        *a = _mm512_loadu_ps(part.add(c * LANES));
    }
    let p = probs.as_ptr();
    let start = keys_here.start;
    for k in start..keys_here.end.min(b.first) {
        let pk = _mm512_loadu_ps(p.add((k - start) * LANES));
        let v = values.as_ptr().add(k * b.kvd + b.off + c0);
        for (c, a) in acc.iter_mut().enumerate().take(w) {
            *a = _mm512_add_ps(*a, _mm512_mul_ps(pk, _mm512_set1_ps(*v.add(c))));
        }
    }
    for k in start.max(b.first)..keys_here.end {
        let (pk, m) = (_mm512_loadu_ps(p.add((k - start) * LANES)), b.sees(k));
        let v = values.as_ptr().add(k * b.kvd + b.off + c0);
        for (c, a) in acc.iter_mut().enumerate().take(w) {
            *a = _mm512_mask_add_ps(*a, m, *a, _mm512_mul_ps(pk, _mm512_set1_ps(*v.add(c))));
        }
    }
    for (c, a) in acc.iter().enumerate().take(w) {
        _mm512_storeu_ps(part.add(c * LANES), *a);
    }
}

/// One query token's heads `heads` (a decode step) with keys in the lanes:
/// a token has few heads per KV head (6 on Qwen2.5-1.5B), so rows in the
/// lanes would leave most of them idle. Each block of sixteen keys is
/// transposed once (dimension-major) for all of the KV head's query heads,
/// and a head's scores of the block are its eight dot lanes as eight
/// registers, the portable sum's steps lane by lane; the max and e^x run
/// sixteen keys at a time, the sum key by key as the portable loop adds,
/// and the weighted values hold sixteen output elements per register. The
/// caller checked the slices ([`attend_tile`]).
#[inline(always)]
unsafe fn attend_query(
    s: &TileShape,
    heads: Range<usize>,
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let (hd, group) = (s.hd, s.group);
    let n = s.pos0 + 1;
    let padded = n.div_ceil(LANES) * LANES;
    // A block of key rows as read, the block transposed (hd x 16 each),
    // then each head's scores, later its probabilities, padded to whole
    // blocks.
    let need = 2 * hd * LANES + heads.len() * padded;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (rows, rest) = scratch.split_at_mut(hd * LANES);
    let (kt, scs) = rest.split_at_mut(hd * LANES);
    let scale = _mm512_set1_ps(s.scale);
    out.fill(0.0);
    for g in heads.start / group..heads.end.div_ceil(group) {
        // This KV head's query heads, as indices into `heads`.
        let first = heads.start.max(g * group) - heads.start;
        let end = heads.end.min((g + 1) * group) - heads.start;
        let off = g * hd;
        for k0 in (0..n).step_by(LANES) {
            transpose_keys(keys, s.kvd, off, hd, k0, (n - k0).min(LANES), rows, kt);
            let mut h = first;
            while h < end {
                // Two heads at a time: sixteen accumulators hide the add latency.
                let h1 = if h + 1 < end { h + 1 } else { h };
                let (s0, s1) = key_scores(
                    kt,
                    q.as_ptr().add(h * hd),
                    q.as_ptr().add(h1 * hd),
                    hd,
                    scale,
                );
                _mm512_storeu_ps(scs.as_mut_ptr().add(h * padded + k0), s0);
                _mm512_storeu_ps(scs.as_mut_ptr().add(h1 * padded + k0), s1);
                h += 2;
            }
        }
        for h in first..end {
            softmax_keys(&mut scs[h * padded..(h + 1) * padded], n);
        }
        for k0 in (0..n).step_by(KEY_BLOCK) {
            let count = (n - k0).min(KEY_BLOCK);
            let v = values.as_ptr().add(k0 * s.kvd + off);
            for h in first..end {
                let p = scs.as_ptr().add(h * padded + k0);
                let o = out.as_mut_ptr().add(h * hd);
                let mut c0 = 0;
                // Up to eight registers of output elements at a time.
                while c0 < hd {
                    let w = (hd - c0).min(8 * LANES);
                    let (vc, oc) = (v.add(c0), o.add(c0));
                    match w.div_ceil(LANES) {
                        8 => weigh_keys::<8>(p, vc, s.kvd, count, oc, w),
                        7 => weigh_keys::<7>(p, vc, s.kvd, count, oc, w),
                        6 => weigh_keys::<6>(p, vc, s.kvd, count, oc, w),
                        5 => weigh_keys::<5>(p, vc, s.kvd, count, oc, w),
                        4 => weigh_keys::<4>(p, vc, s.kvd, count, oc, w),
                        3 => weigh_keys::<3>(p, vc, s.kvd, count, oc, w),
                        2 => weigh_keys::<2>(p, vc, s.kvd, count, oc, w),
                        _ => weigh_keys::<1>(p, vc, s.kvd, count, oc, w),
                    }
                    c0 += w;
                }
            }
        }
    }
}

/// The lanes `0..w` set.
#[inline(always)]
fn first_lanes(w: usize) -> __mmask16 {
    ((1u32 << w.min(LANES)) - 1) as __mmask16
}

/// Keys `k0..k0 + m` (m <= 16) of the KV head at `off`, transposed into
/// `kt` (hd x 16: row d holds dimension d of the sixteen keys; lanes past
/// `m` hold zeros). The rows are first copied whole, one after another, into
/// `rows` (16 x hd): read in memory order the cache's lines stream in (read
/// 16 rows at a time, a third of the decode step's time waited on them,
/// Zen 5); then 16 x 16 blocks are transposed in registers from there.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn transpose_keys(
    keys: &[f32],
    kvd: usize,
    off: usize,
    hd: usize,
    k0: usize,
    m: usize,
    rows: &mut [f32],
    kt: &mut [f32],
) {
    let full = hd / LANES * LANES;
    let tail = first_lanes(hd - full);
    for i in 0..m {
        let src = keys.as_ptr().add((k0 + i) * kvd + off);
        let dst = rows.as_mut_ptr().add(i * hd);
        for d in (0..full).step_by(LANES) {
            _mm512_storeu_ps(dst.add(d), _mm512_loadu_ps(src.add(d)));
        }
        if full < hd {
            _mm512_mask_storeu_ps(
                dst.add(full),
                tail,
                _mm512_maskz_loadu_ps(tail, src.add(full)),
            );
        }
    }
    for d0 in (0..hd).step_by(LANES) {
        let w = (hd - d0).min(LANES);
        let mut r = [_mm512_setzero_ps(); LANES];
        for (i, row) in r.iter_mut().enumerate().take(m) {
            *row = _mm512_maskz_loadu_ps(first_lanes(w), rows.as_ptr().add(i * hd + d0));
        }
        transpose16(&mut r);
        for (j, row) in r.iter().enumerate().take(w) {
            _mm512_storeu_ps(kt.as_mut_ptr().add((d0 + j) * LANES), *row);
        }
    }
}

/// A 16 x 16 transpose in registers: 32-bit then 64-bit interleaves within
/// 128-bit blocks, then two rounds of 128-bit block shuffles.
#[inline(always)]
unsafe fn transpose16(r: &mut [__m512; LANES]) {
    let mut t = [_mm512_setzero_ps(); LANES];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4i + c]'s block b: dimension 4b + c of rows 4i..4i + 4.
    let mut u = [_mm512_setzero_ps(); LANES];
    for i in 0..4 {
        let (a, b) = (_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2]));
        let (c, d) = (
            _mm512_castps_pd(t[4 * i + 1]),
            _mm512_castps_pd(t[4 * i + 3]),
        );
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for c in 0..4 {
        let (x, y, z, w) = (u[c], u[4 + c], u[8 + c], u[12 + c]);
        let v0 = _mm512_shuffle_f32x4::<0x44>(x, y);
        let v1 = _mm512_shuffle_f32x4::<0xEE>(x, y);
        let v2 = _mm512_shuffle_f32x4::<0x44>(z, w);
        let v3 = _mm512_shuffle_f32x4::<0xEE>(z, w);
        r[c] = _mm512_shuffle_f32x4::<0x88>(v0, v2);
        r[4 + c] = _mm512_shuffle_f32x4::<0xDD>(v0, v2);
        r[8 + c] = _mm512_shuffle_f32x4::<0x88>(v1, v3);
        r[12 + c] = _mm512_shuffle_f32x4::<0xDD>(v1, v3);
    }
}

/// Two heads' scores of the sixteen keys in `kt`: per head the eight dot
/// lanes added in order, plus the tail's sum, times `scale`.
#[inline(always)]
unsafe fn key_scores(
    kt: &[f32],
    q0: *const f32,
    q1: *const f32,
    hd: usize,
    scale: __m512,
) -> (__m512, __m512) {
    let n8 = hd / 8 * 8;
    let kt = kt.as_ptr();
    let mut a0 = [_mm512_setzero_ps(); 8];
    let mut a1 = [_mm512_setzero_ps(); 8];
    let mut d = 0;
    while d < n8 {
        for l in 0..8 {
            let k = _mm512_loadu_ps(kt.add((d + l) * LANES));
            a0[l] = _mm512_add_ps(a0[l], _mm512_mul_ps(_mm512_set1_ps(*q0.add(d + l)), k));
            a1[l] = _mm512_add_ps(a1[l], _mm512_mul_ps(_mm512_set1_ps(*q1.add(d + l)), k));
        }
        d += 8;
    }
    let (mut s0, mut s1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for l in 0..8 {
        s0 = _mm512_add_ps(s0, a0[l]);
        s1 = _mm512_add_ps(s1, a1[l]);
    }
    let (mut t0, mut t1) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for d in n8..hd {
        let k = _mm512_loadu_ps(kt.add(d * LANES));
        t0 = _mm512_add_ps(t0, _mm512_mul_ps(_mm512_set1_ps(*q0.add(d)), k));
        t1 = _mm512_add_ps(t1, _mm512_mul_ps(_mm512_set1_ps(*q1.add(d)), k));
    }
    (
        _mm512_mul_ps(_mm512_add_ps(s0, t0), scale),
        _mm512_mul_ps(_mm512_add_ps(s1, t1), scale),
    )
}

/// One head's scores of keys `0..n` (`sc`, padded to whole blocks) become
/// probabilities in place: the max (NaN scores skipped, as `f32::max`
/// folds; the order of a max does not change it), e^(score - max) sixteen
/// at a time, their sum key by key in order, then e / sum.
#[inline(always)]
unsafe fn softmax_keys(sc: &mut [f32], n: usize) {
    let p = sc.as_mut_ptr();
    let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
    for k0 in (0..n).step_by(LANES) {
        let v = _mm512_loadu_ps(p.add(k0));
        // vmaxps returns its second operand (the max so far) when either is NaN.
        max = _mm512_mask_max_ps(max, first_lanes(n - k0), v, max);
    }
    let max = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    for k0 in (0..n).step_by(LANES) {
        let e = exp(_mm512_sub_ps(_mm512_loadu_ps(p.add(k0)), max));
        _mm512_storeu_ps(p.add(k0), e);
    }
    let mut sum = 0.0f32;
    for e in &sc[..n] {
        sum += e;
    }
    let sum = _mm512_set1_ps(sum);
    for k0 in (0..n).step_by(LANES) {
        let e = _mm512_loadu_ps(p.add(k0));
        _mm512_storeu_ps(p.add(k0), _mm512_div_ps(e, sum));
    }
}

/// Output elements `0..w` (C registers; the last may be partial) of one
/// head: `o += p_k * v_k` for `count` keys in order, `v` the first key's
/// value row at these elements, `kvd` apart.
#[inline(always)]
unsafe fn weigh_keys<const C: usize>(
    p: *const f32,
    v: *const f32,
    kvd: usize,
    count: usize,
    o: *mut f32,
    w: usize,
) {
    let last = first_lanes(w - (C - 1) * LANES);
    let mut acc = [_mm512_setzero_ps(); C];
    for (c, a) in acc.iter_mut().enumerate() {
        *a = _mm512_maskz_loadu_ps(if c + 1 == C { last } else { !0 }, o.add(c * LANES));
    }
    for k in 0..count {
        let pk = _mm512_set1_ps(*p.add(k));
        let row = v.add(k * kvd);
        for (c, a) in acc.iter_mut().enumerate() {
            let m = if c + 1 == C { last } else { !0 };
            let x = _mm512_maskz_loadu_ps(m, row.add(c * LANES));
            *a = _mm512_add_ps(*a, _mm512_mul_ps(pk, x));
        }
    }
    for (c, a) in acc.iter().enumerate() {
        _mm512_mask_storeu_ps(o.add(c * LANES), if c + 1 == C { last } else { !0 }, *a);
    }
}
