// SwiGLU, in place: g[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u, as the
// CPU engine writes it. Elementwise over n values; the dispatch may be 2-D
// (more than 65535 workgroups), flattened with num_workgroups.

struct Params {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> g: array<f32>;
@group(0) @binding(1) var<storage, read> u: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>) {
    let i = gid.y * nw.x * 64u + gid.x;
    if (i >= p.n) {
        return;
    }
    let a = g[i];
    g[i] = a / (1.0 + exp_cpu(-a)) * u[i];
}
