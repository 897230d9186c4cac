// Shared body of the quantized matmul kernels: weights in ggml blocks times
// 8-bit activations, as the CPU engine (and llama.cpp) computes them:
//   y[y_base + t * out_stride + row_offset + r]
//     = sum over blocks b of the block's scaled integer dot product,
// summed in block order, where a block's integer sums are exact (i32) and
// its scales are applied in f32 exactly as quant/kernels.rs does:
//   32-element formats: acc += (d_w * d_a) * isum (+ m_w * s_a),
//   K-quants:           acc += (d_w * d_a) * sum_g sc_g * isum_g
//                            (- (dmin_w * d_a) * sum_g mn_g * bsums_g).
// The activations were quantized by quantize_q8.wgsl / quantize_q8_k.wgsl.
// The runtime appends quant_words.wgsl, one idot4 file (idot4_packed.wgsl
// or idot4_emulated.wgsl), the format's helper file if it has one, then the
// format file (matmul_q*.wgsl), which defines
//   const WORDS: u32   u32 words per (repacked) weight block,
//   const AW: u32      u32 words per activation block (Q8_WORDS or Q8K_WORDS),
//   fn block_idot(wi: u32, xb: vec4<u32>, acc: ptr<function, vec4<f32>>)
// which adds the block starting at word wi of this row, times the four
// token rows' activation blocks starting at words xb, to acc.
// Tiling as in matmul_f32.wgsl: an invocation owns 1 row x 4 tokens.

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
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

const TT: u32 = 4u;

// This invocation's row (wl in quant_words.wgsl reads its words).
var<private> row: u32;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    let t0 = gid.y * TT;
    if (r >= p.rows || t0 >= p.n_tokens) {
        return;
    }
    let last = p.n_tokens - 1u;
    let nb = p.cols / (XV * 4u);
    // Tokens past the end read the last token's row and are not written.
    let xrow = vec4<u32>(t0, min(t0 + 1u, last), min(t0 + 2u, last), min(t0 + 3u, last)) * (nb * AW);
    row = r;
    var acc = vec4<f32>(0.0);
    for (var b = 0u; b < nb; b++) {
        block_idot(b * WORDS, xrow + vec4<u32>(b * AW), &acc);
    }
    let o = p.row_offset + r;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            y[p.y_base + (t0 + i) * p.out_stride + o] = acc[i];
        }
    }
}
