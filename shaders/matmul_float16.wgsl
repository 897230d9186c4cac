// y[y_base + t * out_stride + row_offset + r] = sum_k W[r, k] * x16[t, k]
//
// 16-bit float weights (F16 or BF16) against activations already rounded to
// the same 16-bit type (round_acts16.wgsl), the CPU engine's vec_dot_type
// for float weights. The runtime puts one format file before this skeleton
// (float16_f16_native.wgsl with `enable f16;`, float16_f16_words.wgsl, or
// float16_bf16.wgsl); it declares the weights `w` and activations `x` and
//   fn load_w(i: u32) -> Eight    eight weights of group i, widened to f32
//   fn load_x(i: u32) -> Eight    eight activations of group i, widened
// Every widening is exact, so all arithmetic is f32 and the format files
// for one type give the same bits.
//
// Layout (src/gpu/repack.rs): a row is padded with zeros to a multiple of 8
// values; group j (values 8j..8j+7) of weight row r is group j * rows + r
// (interleaved by row, so neighbouring invocations read neighbouring
// groups), group j of token t's activations is group t * groups + j.
//
// Summation order of the CPU engine's one f32 dot (dot_f32,
// quant/portable.rs): eight lane sums over the whole groups, the lanes added
// in order, plus the sum of the values past the last whole group. An invocation owns 1 row x
// 4 tokens, as in matmul_f32.wgsl (no workgroup memory or barriers).

struct Params {
    rows: u32,        // rows of this weight chunk
    cols: u32,
    n_tokens: u32,
    row_offset: u32,  // first output row of this chunk
    out_stride: u32,  // rows of the whole matrix (y's row length)
    y_base: u32,      // first element of y written (a KV cache position)
    groups: u32,      // 8-value groups of a padded row: ceil(cols / 8)
    _pad: u32,
}

struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TT: u32 = 4u;

// The lanes added in order, as `lanes.iter().sum()` does.
fn lane_sum(lo: vec4<f32>, hi: vec4<f32>) -> f32 {
    return ((((((lo.x + lo.y) + lo.z) + lo.w) + hi.x) + hi.y) + hi.z) + hi.w;
}

fn lane(e: Eight, l: u32) -> f32 {
    if (l < 4u) {
        return e.lo[l];
    }
    return e.hi[l - 4u];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t0 = gid.y * TT;
    if (r >= p.rows || t0 >= p.n_tokens) {
        return;
    }
    // Tokens past the end read the last token's row and are not written.
    let last = p.n_tokens - 1u;
    let xb = vec4<u32>(t0, min(t0 + 1u, last), min(t0 + 2u, last), min(t0 + 3u, last)) * p.groups;
    let full = p.cols / 8u;
    var a0l = vec4<f32>(0.0);
    var a0h = vec4<f32>(0.0);
    var a1l = vec4<f32>(0.0);
    var a1h = vec4<f32>(0.0);
    var a2l = vec4<f32>(0.0);
    var a2h = vec4<f32>(0.0);
    var a3l = vec4<f32>(0.0);
    var a3h = vec4<f32>(0.0);
    for (var j = 0u; j < full; j++) {
        let wv = load_w(j * p.rows + r);
        let x0 = load_x(xb.x + j);
        let x1 = load_x(xb.y + j);
        let x2 = load_x(xb.z + j);
        let x3 = load_x(xb.w + j);
        a0l += wv.lo * x0.lo;
        a0h += wv.hi * x0.hi;
        a1l += wv.lo * x1.lo;
        a1h += wv.hi * x1.hi;
        a2l += wv.lo * x2.lo;
        a2h += wv.hi * x2.hi;
        a3l += wv.lo * x3.lo;
        a3h += wv.hi * x3.hi;
    }
    let s = vec4<f32>(lane_sum(a0l, a0h), lane_sum(a1l, a1h), lane_sum(a2l, a2h), lane_sum(a3l, a3h));
    var tail = vec4<f32>(0.0);
    let rest = p.cols - full * 8u;
    if (rest > 0u) {
        let wv = load_w(full * p.rows + r);
        let x0 = load_x(xb.x + full);
        let x1 = load_x(xb.y + full);
        let x2 = load_x(xb.z + full);
        let x3 = load_x(xb.w + full);
        for (var l = 0u; l < rest; l++) {
            let wl = lane(wv, l);
            tail += wl * vec4<f32>(lane(x0, l), lane(x1, l), lane(x2, l), lane(x3, l));
        }
    }
    let total = s + tail;
    let o = p.row_offset + r;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            y[p.y_base + (t0 + i) * p.out_stride + o] = total[i];
        }
    }
}
