// Word access shared by the quantized matmul skeletons
// (matmul_quant_common.wgsl, matmul_quant_tiled.wgsl), the embedding-gather
// skeleton and the format files. Each skeleton declares the weights `w`,
// `p.rows`, the activations `x` (vec4s) and the private `row` used here.

// Word j of this row's blocks. Weights are interleaved by row (see
// repack.rs): word j of row r sits at w[j * rows + r], so neighbouring
// invocations read neighbouring words.
fn wl(j: u32) -> u32 {
    return w[j * p.rows + row];
}

// Dot products of one vec4 of weights with the same 4 columns of each of
// four tokens (xb: the tokens' first vec4 of x).
fn dot4(wv: vec4<f32>, xb: vec4<u32>, i: u32) -> vec4<f32> {
    return vec4<f32>(dot(wv, x[xb.x + i]), dot(wv, x[xb.y + i]),
                     dot(wv, x[xb.z + i]), dot(wv, x[xb.w + i]));
}

// The four bytes of a word, lowest first.
fn bytes4(q: u32) -> vec4<u32> {
    return (vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}
