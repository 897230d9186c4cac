// Word access shared by the quantized matmul and embedding-gather skeletons
// (both declare the weights `w`, `p.rows`, the private `row` and the
// activations `xq` this reads) and the format files.

// Word j of this row's blocks. Weights are interleaved by row (see
// repack.rs): word j of row r sits at w[j * rows + r], so neighbouring
// invocations read neighbouring words.
fn wl(j: u32) -> u32 {
    return w[j * p.rows + row];
}

// The four bytes of a word, lowest first.
fn bytes4(q: u32) -> vec4<u32> {
    return (vec4<u32>(q) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

// Four packed unsigned `bits`-bit quants (one a byte) minus 2^(bits - 1),
// as four packed signed bytes: the xor gives the bits-bit two's complement,
// the multiply copies its sign bit into the byte's top bits.
fn centered(v: u32, bits: u32) -> u32 {
    let s = (1u << (bits - 1u)) * 0x01010101u;
    let f = v ^ s;
    return f | ((f & s) * ((256u >> (bits - 1u)) - 2u));
}

// idot4 of four packed weight quants with activation word j of each token's
// block (xb: the blocks' first words).
fn idot4x(wq: u32, xb: vec4<u32>, j: u32) -> vec4<i32> {
    return vec4<i32>(idot4(wq, xq[xb.x + j]), idot4(wq, xq[xb.y + j]),
                     idot4(wq, xq[xb.z + j]), idot4(wq, xq[xb.w + j]));
}

// The f32 at word j of each token's activation block.
fn act_f32(xb: vec4<u32>, j: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(xq[xb.x + j], xq[xb.y + j], xq[xb.z + j], xq[xb.w + j]));
}

// The i32 at word j of each token's activation block.
fn act_i32(xb: vec4<u32>, j: u32) -> vec4<i32> {
    return bitcast<vec4<i32>>(vec4<u32>(xq[xb.x + j], xq[xb.y + j], xq[xb.z + j], xq[xb.w + j]));
}
