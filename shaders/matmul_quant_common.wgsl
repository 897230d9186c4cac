// Shared body of the quantized matmul kernels for few tokens (decode and
// short prompts; matmul_quant_tiled.wgsl takes prefills of 16 tokens or
// more); the runtime appends quant_words.wgsl, the format's helper file if
// it has one (quant_k_scales.wgsl for Q4_K/Q5_K, quant_q5_high_bits.wgsl
// for Q5_0/Q5_1), then one format file
// (matmul_q*.wgsl) that defines
//   const WORDS: u32   u32 words per (repacked) block,
//   const XV: u32      vec4s of x covered by one block (block elements / 4),
//   fn block_dot(wi: u32, xo: u32, xb: vec4<u32>) -> vec4<f32>
// which dequantizes the block starting at word wi of this row (read with
// wl) and returns its dot product with the four token rows of x (vec4
// indices xb + xo + ...), and block_deq (the tiled kernel's and the
// embedding gather's access).
//
// y[y_base + t * out_stride + row_offset + r] = sum_k W[r, k] * x[t * cols + k].
// Weights stay in ggml block form (padded to 4-byte multiples and
// interleaved by row at upload, see src/gpu/repack.rs) and are dequantized
// here; activations are f32.
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
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
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
    let cols4 = p.cols / 4u;
    let xb = vec4<u32>(t0, min(t0 + 1u, last), min(t0 + 2u, last), min(t0 + 3u, last)) * cols4;
    let nb = cols4 / XV;
    row = r;
    var wi = 0u;
    var acc = vec4<f32>(0.0);
    for (var b = 0u; b < nb; b++) {
        acc += block_dot(wi, b * XV, xb);
        wi += WORDS;
    }
    let o = p.row_offset + r;
    for (var i = 0u; i < TT; i++) {
        if (t0 + i < p.n_tokens) {
            y[p.y_base + (t0 + i) * p.out_stride + o] = acc[i];
        }
    }
}
