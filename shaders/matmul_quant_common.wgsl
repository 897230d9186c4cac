// Shared body of the quantized matmul kernels: weights in ggml blocks times
// 8-bit activations, with the CPU engine's bits (quant/portable.rs, the one
// float order of every engine): a block's integer sums are exact (i32), and
//   32-element formats: eight lanes per token, lane l += (d_w * d_a) * isum_l
//     (isum_l: the block's elements 4l..4l+3), acc += m_w * s_a for the
//     formats with a min, the result lane_tree(lanes) + acc;
//   K-quants: acc += (d_w * d_a) * sum_g sc_g * isum_g
//             (then acc -= (dmin_w * d_a) * sum_g mn_g * bsums_g), per
//     super-block in order, the result acc;
// every product and sum rounded on its own (llvmpipe lowers fma to a
// multiply and an add; the CPU kernels use none).
// The activations were quantized by quantize_q8.wgsl / quantize_q8_k.wgsl.
// The runtime appends quant_words.wgsl, one idot4 file (idot4_packed.wgsl
// or idot4_emulated.wgsl), the format's helper file if it has one, then the
// format file (matmul_q*.wgsl), which defines
//   const WORDS: u32       u32 words per (repacked) weight block,
//   const AW: u32          u32 words per activation block (Q8_WORDS or Q8K_WORDS),
//   const LANE_SUMS: bool  whether it adds to `lanes` (32-element formats),
//   fn block_idot(wi: u32, xb: vec4<u32>)
// which adds the block starting at word wi of this row, times the four
// token rows' activation blocks starting at words xb, to `lanes` / `acc`
// (vec4s: one component per token).
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

// This invocation's row (wl in quant_words.wgsl reads its words) and its
// sums (see above).
var<private> row: u32;
var<private> lanes: array<vec4<f32>, 8>;
var<private> acc: vec4<f32>;

// The CPU's reduction of the eight lanes (portable.rs `lane_tree`).
fn lane_tree() -> vec4<f32> {
    return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6]))
         + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

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
    for (var b = 0u; b < nb; b++) {
        block_idot(b * WORDS, xrow + vec4<u32>(b * AW));
    }
    var total = acc;
    if (LANE_SUMS) {
        total = lane_tree() + acc;
    }
    let o = p.row_offset + r;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            y[p.y_base + (t0 + i) * p.out_stride + o] = total[i];
        }
    }
}
