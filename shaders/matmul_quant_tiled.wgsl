// The quantized matmul for prefill: the same product as
// matmul_quant_common.wgsl,
//   y[y_base + t * out_stride + row_offset + r] = sum_k W[r, k] * x[t * cols + k],
// with a register tile of 2 rows x 4 tokens per invocation (two vec4
// accumulators): each x vec4 loaded serves two rows, so a dot product of 4
// costs 0.75 loads instead of 1.25. Larger tiles spill on llvmpipe, which
// keeps every scalar of an invocation in its own SIMD register across 8
// invocations. The runtime picks it for the 32-element formats when a call
// has 16 tokens or more. Weights are read with the format file's block_deq (the embedding
// gather's access), elements 4v..4v+3 of a block at a time. No workgroup
// memory or barriers: they are the slow path on software adapters
// (llvmpipe), and the x rows a workgroup shares stay in cache.
// The runtime appends quant_words.wgsl, the format's helper file (if any)
// and its format file.

struct Params {
    rows: u32,        // rows of this weight chunk
    cols: u32,        // a multiple of the block size
    n_tokens: u32,
    row_offset: u32,  // first output row of this chunk
    out_stride: u32,  // rows of the whole matrix (y's row length)
    y_base: u32,      // first element of y written (a KV cache position)
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TT: u32 = 4u;

var<private> row: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r0 = 2u * gid.x;
    let t0 = gid.y * TT;
    if (r0 >= p.rows || t0 >= p.n_tokens) {
        return;
    }
    // The second row of a tile past the end repeats the first (not written).
    let r1 = min(r0 + 1u, p.rows - 1u);
    let last = p.n_tokens - 1u;
    let cols4 = p.cols / 4u;
    let xb = min(vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(last)) * cols4;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    let nb = cols4 / XV;
    var wi = 0u;
    for (var b = 0u; b < nb; b++) {
        for (var v = 0u; v < XV; v++) {
            let xo = b * XV + v;
            let x0 = x[xb.x + xo];
            let x1 = x[xb.y + xo];
            let x2 = x[xb.z + xo];
            let x3 = x[xb.w + xo];
            row = r0;
            let w0 = block_deq(wi, v);
            row = r1;
            let w1 = block_deq(wi, v);
            a0 += vec4<f32>(dot(w0, x0), dot(w0, x1), dot(w0, x2), dot(w0, x3));
            a1 += vec4<f32>(dot(w1, x0), dot(w1, x1), dot(w1, x2), dot(w1, x3));
        }
        wi += WORDS;
    }
    let o = p.row_offset + r0;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            let at = p.y_base + (t0 + i) * p.out_stride + o;
            y[at] = a0[i];
            if (r0 + 1u < p.rows) {
                y[at + 1u] = a1[i];
            }
        }
    }
}
