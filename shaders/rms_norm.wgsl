// RMSNorm per row: out[r][c] = x[r][c] * (1 / sqrt(mean_c(x[r]^2) + eps)) * w[c],
// with the CPU engine's bits (cpu/forward.rs `rms_norm` over
// `quant::dot`): the sum of squares in eight lanes (lane l: columns
// l, l + 8, ... below the last multiple of 8, in order), the lanes added in
// order, then the tail's sum, then the division by cols; each product and
// sum rounded on its own. One workgroup per row: invocations 0..7 own the
// lanes, invocation 0 reduces them, all scale the row.

struct Params {
    cols: u32,
    n_rows: u32,
    eps: f32,
    one: f32,    // 1.0 from the host: `one / sqrt(..)` stays a division
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> lane: array<f32, 8>;
var<workgroup> inv: f32;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    let base = r * p.cols;
    let n8 = p.cols / 8u * 8u;
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
        for (var c = n8; c < p.cols; c++) {
            let v = x[base + c];
            tail += v * v;
        }
        inv = p.one / sqrt((s + tail) / f32(p.cols) + p.eps);
    }
    workgroupBarrier();
    let k = inv;
    for (var c = li; c < p.cols; c += WG) {
        out[base + c] = x[base + c] * k * w[c];
    }
}
