// Q6_K super-block of 256 elements, repacked to 53 words (210 bytes plus 2
// zero bytes at the end): words 0..31 = ql[128], 32..47 = qh[64], 48..51 =
// scales: i8[16], word 52 = d (f16, low half).
// Half h (0, 1) covers elements 128h..128h+127 from ql bytes 64h.., qh bytes
// 32h.., scales 8h..; for l in 0..32 and c in 0..4, element 128h + 32c + l is
//   c=0: low nibble of ql[64h + l]       | bits 0-1 of qh[32h + l] << 4
//   c=1: low nibble of ql[64h + 32 + l]  | bits 2-3 << 4
//   c=2: high nibble of ql[64h + l]      | bits 4-5 << 4
//   c=3: high nibble of ql[64h + 32 + l] | bits 6-7 << 4
// minus 32, scaled by d * scales[8h + l/16 + 2c].

const WORDS: u32 = 53u;
const XV: u32 = 64u;
const AW: u32 = Q8K_WORDS;
const LANE_SUMS: bool = false;

// Signed scale k (0..15).
fn scale_i(wi: u32, k: u32) -> i32 {
    let word = wl(wi + 48u + k / 4u);
    return bitcast<i32>(word << (24u - 8u * (k % 4u))) >> 24u;
}

fn block_idot(wi: u32, xb: vec4<u32>) {
    let d = unpack2x16float(wl(wi + 52u)).x;
    let m4 = 0x0F0F0F0Fu;
    let m2 = 0x03030303u;
    var isum = vec4<i32>(0);
    for (var h = 0u; h < 2u; h++) {
        for (var i = 0u; i < 8u; i++) {
            let a = wl(wi + 16u * h + i);
            let b = wl(wi + 16u * h + 8u + i);
            let qh = wl(wi + 32u + 8u * h + i);
            let q0 = centered((a & m4) | ((qh & m2) << 4u), 6u);
            let q1 = centered((b & m4) | (((qh >> 2u) & m2) << 4u), 6u);
            let q2 = centered(((a >> 4u) & m4) | (((qh >> 4u) & m2) << 4u), 6u);
            let q3 = centered(((b >> 4u) & m4) | (((qh >> 6u) & m2) << 4u), 6u);
            // l = 4i..4i+3 share the group l/16 = i/4.
            let k = 8u * h + i / 4u;
            let xi = Q8K_QS + 32u * h + i;
            isum += scale_i(wi, k) * idot4x(q0, xb, xi);
            isum += scale_i(wi, k + 2u) * idot4x(q1, xb, xi + 8u);
            isum += scale_i(wi, k + 4u) * idot4x(q2, xb, xi + 16u);
            isum += scale_i(wi, k + 6u) * idot4x(q3, xb, xi + 24u);
        }
    }
    acc += (d * act_f32(xb, Q8K_D)) * vec4<f32>(isum);
}

// Elements 4v..4v+3 (v < XV) of the block at word wi, dequantized (the
// embedding gather's access): half h = v / 32, quarter c = (v % 32) / 8,
// l = 4 * (v % 8), as in the layout above.
fn block_deq(wi: u32, v: u32) -> vec4<f32> {
    let d = unpack2x16float(wl(wi + 52u)).x;
    let h = v / 32u;
    let c = (v % 32u) / 8u;
    let i = v % 8u;
    // c = 0, 2 read ql bytes 64h + l; c = 1, 3 read 64h + 32 + l.
    let ql = bytes4(wl(wi + 16u * h + 8u * (c % 2u) + i)) >> vec4<u32>(4u * (c / 2u));
    let qh = bytes4(wl(wi + 32u + 8u * h + i)) >> vec4<u32>(2u * c);
    let q = vec4<i32>((ql & vec4<u32>(0xFu)) | ((qh & vec4<u32>(3u)) << vec4<u32>(4u))) - 32;
    return (d * f32(scale_i(wi, 8u * h + i / 4u + 2u * c))) * vec4<f32>(q);
}
