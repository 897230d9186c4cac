// Embedding gather over f32 rows: out[t * cols + c] = table[ids[t] - row_offset][c]
// for the tokens whose id falls in this chunk of the table (a table larger
// than the storage binding limit is split by rows, one dispatch per chunk).
// One invocation per (column, token).

struct Params {
    rows: u32,        // rows of this chunk
    cols: u32,
    n_tokens: u32,
    row_offset: u32,  // first table row of this chunk
}

@group(0) @binding(0) var<storage, read> table: array<f32>;
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
    out[t * p.cols + c] = table[(id - p.row_offset) * p.cols + c];
}
