// Grouped-query causal attention for a prefill of n_tokens queries at
// absolute positions start..start+n_tokens over one layer's KV cache
// (positions 0..start+n_tokens already written):
//   out[t][h] = sum_j softmax_j(q[t][h] . k[j][h/group] * scale) v[j][h/group]
// over keys j in [first, pos] (first = pos + 1 - window with a sliding
// window, else 0).
//
// One invocation per (query, head), with the CPU engine's bits
// (cpu/attention.rs `attend_one_body`): scores q . k (eight lanes,
// lanes added in order, then the tail: `quant::dot`) times scale, their
// max, e^(score - max) by exp_cpu (exp.wgsl), their sum in key order, then
// out = sum over keys in order of (e / sum) * v, every product and sum
// rounded on its own. The CPU keeps the exponentials; here the scores are
// recomputed in each of the three passes (max, sum, weighted values) so
// memory does not grow with the sequence. No workgroup memory or barrier
// (slow on llvmpipe). head_dim <= 256.

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

const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

// q . k of key j (cache row offset kb), times scale, as the CPU sums it.
fn score(kb: u32, hd: u32) -> f32 {
    var l: array<f32, 8>;
    let n8 = hd / 8u * 8u;
    for (var c = 0u; c < n8; c += 8u) {
        for (var i = 0u; i < 8u; i++) {
            l[i] += qv[c + i] * k[kb + c + i];
        }
    }
    var s = l[0];
    for (var i = 1u; i < 8u; i++) {
        s += l[i];
    }
    var tail = 0.0;
    for (var e = n8; e < hd; e++) {
        tail += qv[e] * k[kb + e];
    }
    return (s + tail) * p.scale;
}

var<private> qv: array<f32, 256>;

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
    for (var e = 0u; e < hd; e++) {
        qv[e] = q[qo + e];
    }
    var m = NEG;
    for (var j = first; j <= pos; j++) {
        m = max(m, score(j * p.kv_stride + ko, hd));
    }
    var sum = 0.0;
    for (var j = first; j <= pos; j++) {
        sum += exp_cpu(score(j * p.kv_stride + ko, hd) - m);
    }
    var acc: array<f32, 256>;
    for (var j = first; j <= pos; j++) {
        let pj = exp_cpu(score(j * p.kv_stride + ko, hd) - m) / sum;
        let vb = j * p.kv_stride + ko;
        for (var e = 0u; e < hd; e++) {
            acc[e] += pj * v[vb + e];
        }
    }
    for (var e = 0u; e < hd; e++) {
        out[qo + e] = acc[e];
    }
}
