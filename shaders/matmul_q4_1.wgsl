// Q4_1 block, 5 words as stored by ggml (20 bytes, already 4-byte aligned):
// word 0 = d (f16, low half) and m (f16, high half), words 1..4 = qs[16].
// Element j < 16 is the low nibble of byte j, element j + 16 its high
// nibble. value = q * d + m.

const WORDS: u32 = 5u;
const XV: u32 = 8u;
const AW: u32 = Q8_WORDS;

const LANE_SUMS: bool = true;

// Lanes as in Q4_0; the min times the activation block's sum goes to acc.
fn block_idot(wi: u32, xb: vec4<u32>) {
    let dm = unpack2x16float(wl(wi));
    let dd = dm.x * act_f32(xb, Q8_D);
    for (var i = 0u; i < 4u; i++) {
        let q = wl(wi + 1u + i);
        lanes[i] += dd * vec4<f32>(idot4x(q & 0x0F0F0F0Fu, xb, Q8_QS + i));
        lanes[4u + i] += dd * vec4<f32>(idot4x((q >> 4u) & 0x0F0F0F0Fu, xb, Q8_QS + 4u + i));
    }
    acc += dm.y * act_f32(xb, Q8_S);
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access): low nibbles of qs word v for v < 4, high
// nibbles of word v - 4 after.
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let dm = unpack2x16float(wl(wi));
    let q = bytes4(wl(wi + 1u + v % 4u)) >> vec4<u32>(4u * (v / 4u));
    return vec4<f32>(q & vec4<u32>(0xFu)) * dm.x + dm.y;
}
