// Q5_0 block, repacked to 6 words: word 0 = d (f16, low half; high half 0),
// word 1 = qh, words 2..5 = qs[16] (q5_quants in quant_q5_high_bits.wgsl
// reads them). value = (q - 16) * d.

const WORDS: u32 = 6u;
const XV: u32 = 8u;
const AW: u32 = Q8_WORDS;

const LANE_SUMS: bool = true;

// q5_packed(wi, v) holds elements 4v..4v+3: lane v.
fn block_idot(wi: u32, xb: vec4<u32>) {
    let dd = unpack2x16float(wl(wi)).x * act_f32(xb, Q8_D);
    for (var v = 0u; v < XV; v++) {
        lanes[v] += dd * vec4<f32>(idot4x(centered(q5_packed(wi, v), 5u), xb, Q8_QS + v));
    }
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access).
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let d = unpack2x16float(wl(wi)).x;
    return (vec4<f32>(q5_quants(wi, v)) - 16.0) * d;
}
