// Q8_0 block, repacked to 9 words: word 0 = d (f16, low half; high half 0),
// words 1..8 = the 32 signed 8-bit quants in order. value = q * d.

const WORDS: u32 = 9u;
const XV: u32 = 8u;

fn block_dot(wi: u32, xo: u32, xb: vec4<u32>) -> vec4<f32> {
    let d = unpack2x16float(wl(wi)).x;
    var s = vec4<f32>(0.0);
    for (var i = 0u; i < 8u; i++) {
        let q = wl(wi + 1u + i);
        // Sign-extend each byte: move it to the top, arithmetic shift down.
        let qi = vec4<i32>(bitcast<i32>(q << 24u), bitcast<i32>(q << 16u),
                           bitcast<i32>(q << 8u), bitcast<i32>(q)) >> vec4<u32>(24u);
        s += dot4(vec4<f32>(qi), xb, xo + i);
    }
    return d * s;
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
