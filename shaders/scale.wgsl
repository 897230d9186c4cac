// x[i] *= s for i < n, in place (Gemma's embedding scale). Elementwise; the
// dispatch may be 2-D, flattened with num_workgroups.

struct Params {
    n: u32,
    s: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = gid.y * nw.x * 64u + gid.x;
    if (i >= p.n) {
        return;
    }
    x[i] = x[i] * p.s;
}
