// Q8_0 block, repacked to 9 words: word 0 = d (f16, low half; high half 0),
// words 1..8 = the 32 signed 8-bit quants in order. value = q * d.

const WORDS: u32 = 9u;
const XV: u32 = 8u;
const AW: u32 = Q8_WORDS;
const LANE_SUMS: bool = true;

// Quant word i holds elements 4i..4i+3: lane i.
fn block_idot(wi: u32, xb: vec4<u32>) {
    let dd = unpack2x16float(wl(wi)).x * act_f32(xb, Q8_D);
    for (var i = 0u; i < 8u; i++) {
        lanes[i] += dd * vec4<f32>(idot4x(wl(wi + 1u + i), xb, Q8_QS + i));
    }
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access).
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let d = unpack2x16float(wl(wi)).x;
    let q = wl(wi + 1u + v);
    let qi = vec4<i32>(bitcast<i32>(q << 24u), bitcast<i32>(q << 16u),
                       bitcast<i32>(q << 8u), bitcast<i32>(q)) >> vec4<u32>(24u);
    return vec4<f32>(qi) * d;
}
