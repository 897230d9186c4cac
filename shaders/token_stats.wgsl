// The confidence family's per-token statistics from a row of logits over
// the vocabulary and the token that actually followed:
//   out[3r]     = log Z = max + ln sum_v exp(l_v - max)
//   out[3r + 1] = l_target            (log-prob = l_target - log Z, on the host)
//   out[3r + 2] = entropy = ln S - sum_v e_v (l_v - max) / S,
//                 with e_v = exp(l_v - max), S = sum_v e_v
// (the centred form avoids cancelling two large terms). Rows are written
// at out_row + r so several calls can fill one output.
// One workgroup per row: a max reduction, then one pass for both sums.

struct Params {
    vocab: u32,
    n_rows: u32,
    out_row: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read> target_ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> red_a: array<f32, 64>;
var<workgroup> red_b: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wg.x;
    if (r >= p.n_rows) {
        return;
    }
    let base = r * p.vocab;
    var mx = -3.0e38;
    for (var c = li; c < p.vocab; c += WG) {
        mx = max(mx, logits[base + c]);
    }
    red_a[li] = mx;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (li < s) {
            red_a[li] = max(red_a[li], red_a[li + s]);
        }
        workgroupBarrier();
    }
    let m = red_a[0];
    // Everyone has read the max before red_a is reused.
    workgroupBarrier();
    var se = 0.0;
    var sel = 0.0;
    for (var c = li; c < p.vocab; c += WG) {
        let d = logits[base + c] - m;
        let e = exp(d);
        se += e;
        sel += e * d;
    }
    red_a[li] = se;
    red_b[li] = sel;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (li < s) {
            red_a[li] += red_a[li + s];
            red_b[li] += red_b[li + s];
        }
        workgroupBarrier();
    }
    if (li == 0u) {
        let o = 3u * (p.out_row + r);
        let tid = min(target_ids[r], p.vocab - 1u);
        out[o] = m + log(red_a[0]);
        out[o + 1u] = logits[base + tid];
        out[o + 2u] = log(red_a[0]) - red_b[0] / red_a[0];
    }
}
