// Q4_0 block, repacked to 5 words: word 0 = d (f16, low half; high half 0),
// words 1..4 = qs[16]. Element j < 16 is the low nibble of byte j, element
// j + 16 its high nibble. value = (q - 8) * d.

const WORDS: u32 = 5u;
const XV: u32 = 8u;

fn block_dot(wi: u32, xo: u32, xb: vec4<u32>) -> vec4<f32> {
    let d = unpack2x16float(wl(wi)).x;
    var s = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(wl(wi + 1u + i));
        let lo = vec4<f32>(q & vec4<u32>(0xFu)) - 8.0;
        let hi = vec4<f32>(q >> vec4<u32>(4u)) - 8.0;
        s += dot4(lo, xb, xo + i) + dot4(hi, xb, xo + 4u + i);
    }
    return d * s;
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access): low nibbles of qs word v for v < 4, high
// nibbles of word v - 4 after.
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let d = unpack2x16float(wl(wi)).x;
    let q = bytes4(wl(wi + 1u + v % 4u)) >> vec4<u32>(4u * (v / 4u));
    return (vec4<f32>(q & vec4<u32>(0xFu)) - 8.0) * d;
}
