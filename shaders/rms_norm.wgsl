// RMSNorm per row: out[r][c] = x[r][c] / sqrt(mean_c(x[r]^2) + eps) * w[c].
// One workgroup per row; the sum of squares is reduced in workgroup memory
// (64 partial sums, then a tree).

struct Params {
    cols: u32,
    n_rows: u32,
    eps: f32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> part: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    let base = r * p.cols;
    var s = 0.0;
    for (var c = li; c < p.cols; c += WG) {
        let v = x[base + c];
        s += v * v;
    }
    part[li] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (li < stride) {
            part[li] += part[li + stride];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / sqrt(part[0] / f32(p.cols) + p.eps);
    for (var c = li; c < p.cols; c += WG) {
        out[base + c] = x[base + c] * inv * w[c];
    }
}
