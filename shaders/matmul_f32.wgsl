// y[y_base + t * out_stride + row_offset + r] = sum_k w[r * cols + k] * x[t * cols + k]
//
// f32 weights, any shape. Register tiling: each invocation owns a 1-row x
// 4-token output tile (the four token accumulators are the lanes of one
// vec4), a workgroup a 64-row x 4-token tile; partial tiles at the row and
// token edges are masked. No workgroup memory or barriers: they are the slow
// path on software adapters (llvmpipe), and x rows are re-read from cache.

struct Params {
    rows: u32,        // rows of this weight chunk
    cols: u32,
    n_tokens: u32,
    row_offset: u32,  // first output row of this chunk
    out_stride: u32,  // rows of the whole matrix (y's row length)
    y_base: u32,      // first element of y written (a KV cache position)
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TT: u32 = 4u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t0 = gid.y * TT;
    if (r >= p.rows || t0 >= p.n_tokens) {
        return;
    }
    // Tokens past the end read the last token's row (no branch in the loop)
    // and are not written.
    let last = p.n_tokens - 1u;
    let xb = vec4<u32>(t0, min(t0 + 1u, last), min(t0 + 2u, last), min(t0 + 3u, last)) * p.cols;
    let wb = r * p.cols;
    var acc = vec4<f32>(0.0);
    for (var k = 0u; k < p.cols; k++) {
        acc += w[wb + k] * vec4<f32>(x[xb.x + k], x[xb.y + k], x[xb.z + k], x[xb.w + k]);
    }
    let o = p.row_offset + r;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            y[p.y_base + (t0 + i) * p.out_stride + o] = acc[i];
        }
    }
}
