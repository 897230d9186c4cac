// Embedding gather over ggml block rows, dequantized here: the runtime
// appends quant_words.wgsl, idot4_emulated.wgsl, the format's helper file
// (if any) and its format file (matmul_q*.wgsl), whose
//   fn block_deq(wi: u32, v: u32) -> vec4<f32>
// returns elements 4v..4v+3 of the block starting at word wi of this row.
// The table is the same upload the matmul kernels read (padded blocks,
// interleaved by row: see src/gpu/repack.rs), so a tied embedding serves
// both the gather and the vocabulary projection from one buffer.
// One invocation per (vec4 of columns, token); tokens outside this chunk
// of rows are skipped (another dispatch covers them).

struct Params {
    rows: u32,        // rows of this chunk
    cols: u32,        // a multiple of the block size
    n_tokens: u32,
    row_offset: u32,  // first table row of this chunk
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;
// Declared only because the format file's block_idot (the matmul's access)
// names it; this entry point never reads it, so it is not in the layout.
@group(0) @binding(4) var<storage, read> xq: array<u32>;

var<private> row: u32;
// The matmul's sums, which the format file's block_idot names (unused here).
var<private> lanes: array<vec4<f32>, 8>;
var<private> acc: vec4<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c4 = gid.x;
    let t = gid.y;
    let cols4 = p.cols / 4u;
    if (c4 >= cols4 || t >= p.n_tokens) {
        return;
    }
    let id = ids[t];
    if (id < p.row_offset || id - p.row_offset >= p.rows) {
        return;
    }
    row = id - p.row_offset;
    out[t * cols4 + c4] = block_deq((c4 / XV) * WORDS, c4 % XV);
}
