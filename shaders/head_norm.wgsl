// RMSNorm of each head of the queries or keys, in place (Qwen3's q_norm and
// k_norm): n_tokens rows of n_heads heads of head_dim contiguous elements,
// starting at element `base` of x (the query buffer, or the new positions of
// a layer's key cache), every head scaled by the same head_dim gains w.
// The arithmetic is rms_norm.wgsl's, with a head as the row (the CPU
// engine's `rms_norm_in_place`): squares summed in eight lanes in order,
// the lanes added in order, then the tail, then the division by head_dim.
// One workgroup per (head, token).

struct Params {
    head_dim: u32,
    n_heads: u32,
    base: u32,
    eps: f32,
    one: f32,    // 1.0 from the host: `one / sqrt(..)` stays a division
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> lane: array<f32, 8>;
var<workgroup> inv: f32;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wg.x;
    let t = wg.y;
    if (h >= p.n_heads) {
        return;
    }
    let cols = p.head_dim;
    let base = p.base + (t * p.n_heads + h) * cols;
    let n8 = cols / 8u * 8u;
    if (li < 8u) {
        var s = 0.0;
        for (var c = li; c < n8; c += 8u) {
            let v = x[base + c];
            s += v * v;
        }
        lane[li] = s;
    }
    workgroupBarrier();
    if (li == 0u) {
        var s = lane[0];
        for (var l = 1u; l < 8u; l++) {
            s += lane[l];
        }
        var tail = 0.0;
        for (var c = n8; c < cols; c++) {
            let v = x[base + c];
            tail += v * v;
        }
        inv = p.one / sqrt((s + tail) / f32(cols) + p.eps);
    }
    workgroupBarrier();
    let k = inv;
    for (var c = li; c < cols; c += WG) {
        x[base + c] = x[base + c] * k * w[c];
    }
}
