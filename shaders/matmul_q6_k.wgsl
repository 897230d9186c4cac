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

// Signed scale k (0..15).
fn scale(wi: u32, k: u32) -> f32 {
    let word = wl(wi + 48u + k / 4u);
    return f32(bitcast<i32>(word << (24u - 8u * (k % 4u))) >> 24u);
}

fn block_dot(wi: u32, xo: u32, xb: vec4<u32>) -> vec4<f32> {
    let d = unpack2x16float(wl(wi + 52u)).x;
    var s = vec4<f32>(0.0);
    for (var h = 0u; h < 2u; h++) {
        for (var i = 0u; i < 8u; i++) {
            let a = bytes4(wl(wi + 16u * h + i));
            let b = bytes4(wl(wi + 16u * h + 8u + i));
            let qh = bytes4(wl(wi + 32u + 8u * h + i));
            let three = vec4<u32>(3u);
            let q0 = vec4<i32>((a & vec4<u32>(0xFu)) | ((qh & three) << vec4<u32>(4u))) - 32;
            let q1 = vec4<i32>((b & vec4<u32>(0xFu)) | (((qh >> vec4<u32>(2u)) & three) << vec4<u32>(4u))) - 32;
            let q2 = vec4<i32>((a >> vec4<u32>(4u)) | (((qh >> vec4<u32>(4u)) & three) << vec4<u32>(4u))) - 32;
            let q3 = vec4<i32>((b >> vec4<u32>(4u)) | ((qh >> vec4<u32>(6u)) << vec4<u32>(4u))) - 32;
            // l = 4i..4i+3 share l/16 = i/4.
            let k = 8u * h + i / 4u;
            let xi = xo + 32u * h + i;
            s += (d * scale(wi, k)) * dot4(vec4<f32>(q0), xb, xi);
            s += (d * scale(wi, k + 2u)) * dot4(vec4<f32>(q1), xb, xi + 8u);
            s += (d * scale(wi, k + 4u)) * dot4(vec4<f32>(q2), xb, xi + 16u);
            s += (d * scale(wi, k + 6u)) * dot4(vec4<f32>(q3), xb, xi + 24u);
        }
    }
    return s;
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
    return (d * scale(wi, 8u * h + i / 4u + 2u * c)) * vec4<f32>(q);
}
