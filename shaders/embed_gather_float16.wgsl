// Embedding gather over 16-bit float rows (F16, or BF16 when p.bf16 != 0):
// out[t * cols + c] = table[ids[t] - row_offset][c] widened to f32 (exact:
// unpack2x16float for f16, a 16-bit shift for bf16; core WGSL, so one
// shader serves devices with and without `shader-f16`), for the tokens whose
// id falls in this chunk of the table. The table has the layout of
// matmul_float16.wgsl: value c of row r in group (c / 8) * rows + r.
// One invocation per (column, token).

struct Params {
    rows: u32,        // rows of this chunk
    cols: u32,
    n_tokens: u32,
    row_offset: u32,  // first table row of this chunk
    bf16: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<storage, read> table: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if (c >= p.cols || t >= p.n_tokens) {
        return;
    }
    let id = ids[t];
    if (id < p.row_offset || id - p.row_offset >= p.rows) {
        return;
    }
    let word = table[(c / 8u) * p.rows + id - p.row_offset][(c % 8u) / 2u];
    let odd = (c & 1u) == 1u;
    var v: f32;
    if (p.bf16 != 0u) {
        v = bitcast<f32>(select(word << 16u, word & 0xffff0000u, odd));
    } else {
        let h = unpack2x16float(word);
        v = select(h.x, h.y, odd);
    }
    out[t * p.cols + c] = v;
}
