// Q4_1 block, 5 words as stored by ggml (20 bytes, already 4-byte aligned):
// word 0 = d (f16, low half) and m (f16, high half), words 1..4 = qs[16].
// Element j < 16 is the low nibble of byte j, element j + 16 its high
// nibble. value = q * d + m.

const WORDS: u32 = 5u;
const XV: u32 = 8u;

fn block_dot(wi: u32, xo: u32, xb: vec4<u32>) -> vec4<f32> {
    let dm = unpack2x16float(wl(wi));
    var s = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let q = bytes4(wl(wi + 1u + i));
        let lo = vec4<f32>(q & vec4<u32>(0xFu)) * dm.x + dm.y;
        let hi = vec4<f32>(q >> vec4<u32>(4u)) * dm.x + dm.y;
        s += dot4(lo, xb, xo + i) + dot4(hi, xb, xo + 4u + i);
    }
    return s;
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access): low nibbles of qs word v for v < 4, high
// nibbles of word v - 4 after.
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let dm = unpack2x16float(wl(wi));
    let q = bytes4(wl(wi + 1u + v % 4u)) >> vec4<u32>(4u * (v / 4u));
    return vec4<f32>(q & vec4<u32>(0xFu)) * dm.x + dm.y;
}
