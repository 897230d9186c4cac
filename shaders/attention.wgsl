// Grouped-query causal attention for a prefill of n_tokens queries at
// absolute positions start..start+n_tokens over one layer's KV cache
// (positions 0..start+n_tokens already written):
//   out[t][h] = sum_j softmax_j(q[t][h] . k[j][h/group] * scale) v[j][h/group]
// over keys j in [first, pos] (first = pos + 1 - window with a sliding
// window, else 0).
//
// One invocation per (query, head); a workgroup holds 64 consecutive
// queries of one head, which read the same keys. Keys are taken in tiles of
// 8: the tile's scores are computed into registers, then folded into an
// online softmax (running max m, running sum l, accumulator rescaled by
// exp(m_old - m_new) once per tile). No score matrix is materialized, so
// memory does not grow with the sequence, and there is no workgroup memory
// or barrier: on software adapters (llvmpipe) barriers split every
// workgroup into slow co-routines, and a first version that shared key
// tiles through workgroup memory made a 1,024-token prefix cost 6x a plain
// 32-token forward there. head_dim <= 256.

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

const TK: u32 = 8u;
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x;
    let h = gid.y;
    if (t >= p.n_tokens || h >= p.n_heads) {
        return;
    }
    let hd = min(p.head_dim, MAXD);
    let pos = p.start + t;
    var first = 0u;
    if (p.window > 0u && pos + 1u > p.window) {
        first = pos + 1u - p.window;
    }
    let qo = t * p.q_stride + h * p.head_dim;
    let ko = (h / p.group) * p.head_dim;
    var qv: array<f32, 256>;
    var acc: array<f32, 256>;
    for (var e = 0u; e < hd; e++) {
        qv[e] = q[qo + e];
        acc[e] = 0.0;
    }
    var s: array<f32, 8>;
    var m = NEG;
    var l = 0.0;
    for (var j0 = first; j0 <= pos; j0 += TK) {
        let n = min(TK, pos + 1u - j0);
        var tm = m;
        for (var i = 0u; i < n; i++) {
            let kb = (j0 + i) * p.kv_stride + ko;
            var d = 0.0;
            for (var e = 0u; e < hd; e++) {
                d += qv[e] * k[kb + e];
            }
            s[i] = d * p.scale;
            tm = max(tm, s[i]);
        }
        let corr = exp(m - tm);
        l *= corr;
        for (var e = 0u; e < hd; e++) {
            acc[e] *= corr;
        }
        for (var i = 0u; i < n; i++) {
            let pj = exp(s[i] - tm);
            l += pj;
            let vb = (j0 + i) * p.kv_stride + ko;
            for (var e = 0u; e < hd; e++) {
                acc[e] += pj * v[vb + e];
            }
        }
        m = tm;
    }
    for (var e = 0u; e < hd; e++) {
        out[qo + e] = acc[e] / l;
    }
}
