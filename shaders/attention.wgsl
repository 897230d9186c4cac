// Grouped-query causal attention for a prefill of n_tokens queries at
// absolute positions start..start+n_tokens over one layer's KV cache
// (positions 0..start+n_tokens already written):
//   out[t][h] = sum_j softmax_j(q[t][h] . k[j][h/group] * scale) v[j][h/group]
// over keys j in [first, pos] (first = pos + 1 - window with a sliding
// window, else 0).
//
// One workgroup per (head, query). Keys are processed in tiles of 64: each
// invocation scores one key of the tile into workgroup memory, then every
// invocation folds the tile into an online softmax (running max m, running
// sum l, rescaled accumulator) for the output dimensions it owns
// (d = li, li + 64, ..; head_dim <= 256). No score matrix is materialized,
// so memory does not grow with the sequence.

struct Params {
    n_tokens: u32,
    start: u32,
    head_dim: u32,
    n_heads: u32,
    group: u32,      // query heads per KV head
    q_stride: u32,   // elements per query/output row (n_heads * head_dim)
    kv_stride: u32,  // elements per cache row (n_kv_heads * head_dim)
    window: u32,     // 0: no sliding window
    scale: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const TK: u32 = 64u;
const SLOTS: u32 = 4u;
const NEG: f32 = -3.0e38;

var<workgroup> scores: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wg.x;
    let t = wg.y;
    // Workgroup-uniform exit: every invocation of the group leaves together.
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let pos = p.start + t;
    var first = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        first = pos + 1u - p.window;
    }
    let qo = t * p.q_stride + h * p.head_dim;
    let ko = (h / p.group) * p.head_dim;
    var m = NEG;
    var l = 0.0;
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var j0 = first; j0 <= pos; j0 += TK) {
        let j = j0 + li;
        var s = NEG;
        if (j <= pos) {
            let kb = j * p.kv_stride + ko;
            var d = 0.0;
            for (var e = 0u; e < p.head_dim; e++) {
                d += q[qo + e] * k[kb + e];
            }
            s = d * p.scale;
        }
        scores[li] = s;
        workgroupBarrier();
        let n = min(TK, pos + 1u - j0);
        var tm = m;
        for (var i = 0u; i < n; i++) {
            tm = max(tm, scores[i]);
        }
        let corr = exp(m - tm);
        l *= corr;
        for (var sl = 0u; sl < SLOTS; sl++) {
            acc[sl] *= corr;
        }
        for (var i = 0u; i < n; i++) {
            let pj = exp(scores[i] - tm);
            l += pj;
            let vb = (j0 + i) * p.kv_stride + ko;
            for (var sl = 0u; sl < SLOTS; sl++) {
                let d = li + sl * TK;
                if (d < p.head_dim) {
                    acc[sl] += pj * v[vb + d];
                }
            }
        }
        m = tm;
        // The next tile overwrites the scores everyone just read.
        workgroupBarrier();
    }
    for (var sl = 0u; sl < SLOTS; sl++) {
        let d = li + sl * TK;
        if (d < p.head_dim) {
            out[qo + d] = acc[sl] / l;
        }
    }
}
