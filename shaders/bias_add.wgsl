// Per-channel bias, in place, on n_rows rows of `len` channels starting at
// element `base` of x (a row is `stride` elements):
//   x[base + t * stride + c] += b[c], then max(., 0) when relu == 1
// (the score head's Linear -> ReLU). One invocation per (channel, row).

struct Params {
    n_rows: u32,
    len: u32,
    stride: u32,
    base: u32,
    relu: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if (c >= p.len || t >= p.n_rows) {
        return;
    }
    let i = p.base + t * p.stride + c;
    var v = x[i] + b[c];
    if (p.relu == 1u) {
        v = max(v, 0.0);
    }
    x[i] = v;
}
