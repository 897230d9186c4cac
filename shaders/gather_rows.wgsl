// The heads' input: out[i][c] = src[idx[i]][c], the hidden states at the
// step markers (or, for the confidence family, at the positions that
// predict each step token). One invocation per (column, selected row).

struct Params {
    cols: u32,
    n_rows: u32,   // rows selected
    src_rows: u32, // rows in src (indices past it are skipped)
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> idx: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let i = gid.y;
    if (c >= p.cols || i >= p.n_rows) {
        return;
    }
    let r = idx[i];
    if (r >= p.src_rows) {
        return;
    }
    out[i * p.cols + c] = src[r * p.cols + c];
}
