// Q5_K super-block of 256 elements, 44 words as stored by ggml (176 bytes):
// word 0 = d, dmin (f16 pair); words 1..3 = scales[12] (scale_min in
// quant_k_scales.wgsl reads them); words 4..11 = qh[32]; words 12..43 =
// qs[128]. As in Q4_K, sub-block pair j (0..3) covers elements 64j..64j+63
// from qs bytes 32j..32j+31: element 64j + l is the low nibble of byte
// 32j + l plus bit 2j of qh[l] as its 5th bit (sub-block 2j), element
// 64j + 32 + l the high nibble plus bit 2j + 1 (sub-block 2j + 1).
// value = d * sc * q - dmin * m.

const WORDS: u32 = 44u;
const XV: u32 = 64u;
const AW: u32 = Q8K_WORDS;
const LANE_SUMS: bool = false;

fn block_idot(wi: u32, xb: vec4<u32>) {
    let dd = unpack2x16float(wl(wi));
    var isum = vec4<i32>(0);
    var summ = vec4<i32>(0);
    for (var j = 0u; j < 4u; j++) {
        let a = scale_min_u(wi, 2u * j);
        let b = scale_min_u(wi, 2u * j + 1u);
        var lo = vec4<i32>(0);
        var hi = vec4<i32>(0);
        for (var i = 0u; i < 8u; i++) {
            let q = wl(wi + 12u + 8u * j + i);
            let h = wl(wi + 4u + i) >> (2u * j);
            let ql = (q & 0x0F0F0F0Fu) | ((h & 0x01010101u) << 4u);
            let qh = ((q >> 4u) & 0x0F0F0F0Fu) | (((h >> 1u) & 0x01010101u) << 4u);
            lo += idot4x(ql, xb, Q8K_QS + 16u * j + i);
            hi += idot4x(qh, xb, Q8K_QS + 16u * j + 8u + i);
        }
        isum += i32(a.x) * lo + i32(b.x) * hi;
        let g = Q8K_BSUMS + 4u * j;
        summ += i32(a.y) * (act_i32(xb, g) + act_i32(xb, g + 1u))
              + i32(b.y) * (act_i32(xb, g + 2u) + act_i32(xb, g + 3u));
    }
    let da = act_f32(xb, Q8K_D);
    acc += (dd.x * da) * vec4<f32>(isum);
    acc -= (dd.y * da) * vec4<f32>(summ);
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access). Sub-block pair j = v / 16; the first 8 vec4s
// of a pair are low nibbles (sub-block 2j), the next 8 high nibbles (2j+1).
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let dd = unpack2x16float(wl(wi));
    let j = v / 16u;
    let hi = (v % 16u) / 8u;
    let sm = scale_min(wi, 2u * j + hi);
    let q = (bytes4(wl(wi + 12u + 8u * j + v % 8u)) >> vec4<u32>(4u * hi)) & vec4<u32>(0xFu);
    let h = (bytes4(wl(wi + 4u + v % 8u)) >> vec4<u32>(2u * j + hi)) & vec4<u32>(1u);
    return (dd.x * sm.x) * vec4<f32>(q | (h << vec4<u32>(4u))) - dd.y * sm.y;
}
