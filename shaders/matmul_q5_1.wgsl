// Q5_1 block, 6 words as stored by ggml (24 bytes, already 4-byte aligned):
// word 0 = d (f16, low half) and m (f16, high half), word 1 = qh, words
// 2..5 = qs[16] (q5_quants in quant_q5_high_bits.wgsl reads them).
// value = q * d + m.

const WORDS: u32 = 6u;
const XV: u32 = 8u;
const AW: u32 = Q8_WORDS;

const LANE_SUMS: bool = true;

// Lanes as in Q5_0; the min times the activation block's sum goes to acc.
fn block_idot(wi: u32, xb: vec4<u32>) {
    let dm = unpack2x16float(wl(wi));
    let dd = dm.x * act_f32(xb, Q8_D);
    for (var v = 0u; v < XV; v++) {
        lanes[v] += dd * vec4<f32>(idot4x(q5_packed(wi, v), xb, Q8_QS + v));
    }
    acc += dm.y * act_f32(xb, Q8_S);
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access).
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let dm = unpack2x16float(wl(wi));
    return vec4<f32>(q5_quants(wi, v)) * dm.x + dm.y;
}
