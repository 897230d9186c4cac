// The MLP's gated activation, in place: g[i] = act(g[i]) * u[i], as the CPU
// engine writes it (cpu/forward.rs, gate_activation): SiLU a / (1 + exp(-a)),
// or GELU's tanh form a / (1 + exp(-2z)), 2z = 2 sqrt(2/pi) (a + 0.044715 a^3)
// (the same function: 0.5 a (1 + tanh z)). Elementwise over n values; the
// dispatch may be 2-D (more than 65535 workgroups), flattened with
// num_workgroups.

struct Params {
    n: u32,
    gelu: u32,    // 1: GELU (tanh form), 0: SiLU
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
    var z = a;
    if (p.gelu == 1u) {
        z = 1.5957691 * (a + 0.044715 * a * a * a);
    }
    g[i] = a / (1.0 + exp_cpu(-z)) * u[i];
}
