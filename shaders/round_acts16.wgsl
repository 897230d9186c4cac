// out[t * words + c / 2] holds x[t * cols + c] rounded to f16 (bf16 when
// p.bf16 != 0): bits of value c in the low half for even c, the high half
// for odd c; columns cols.. of a padded row are zero. words = groups * 4,
// the row length matmul_float16.wgsl reads.
//
// The CPU engine's conversions (quant/fp.rs f32_to_f16, f32_to_bf16) in
// integer operations, so every device rounds alike: round to nearest even,
// |x| >= 65520 to infinity, f16 subnormals kept, NaN to the quiet NaN
// 0x7e00 (bf16: the high half with the quiet bit set), the sign kept. WGSL
// leaves f32 -> f16 conversion of out-of-range values (pack2x16float, f16())
// indeterminate and allows flushing subnormals, hence no float operations.
// One invocation per output word.

struct Params {
    cols: u32,
    n_tokens: u32,
    words: u32,   // u32 words of a padded output row
    bf16: u32,
}

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

fn f16_bits(v: u32) -> u32 {
    let sign = (v >> 16u) & 0x8000u;
    let a = v & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u;
    }
    if (a >= 0x477ff000u) {
        // 65520 and up round past the largest f16, 65504.
        return sign | 0x7c00u;
    }
    if (a >= 0x38800000u) {
        // Normal f16: rebias the exponent (127 -> 15), round off 13 bits.
        let r = a - 0x38000000u;
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (a < 0x33000000u) {
        // Below 2^-25, half the smallest subnormal: zero.
        return sign;
    }
    // Subnormal f16 (or the smallest normal, by rounding up): the value in
    // units of 2^-24 is m >> shift, rounded to nearest even.
    let m = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - (a >> 23u);
    let q = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let half = 1u << (shift - 1u);
    let up = rem > half || (rem == half && (q & 1u) == 1u);
    return sign | (q + select(0u, 1u, up));
}

fn bf16_bits(v: u32) -> u32 {
    if ((v & 0x7fffffffu) > 0x7f800000u) {
        return (v >> 16u) | 64u;
    }
    return (v + 0x7fffu + ((v >> 16u) & 1u)) >> 16u;
}

fn round16(c: u32, t: u32) -> u32 {
    if (c >= p.cols) {
        return 0u;
    }
    let v = x[t * p.cols + c];
    if (p.bf16 != 0u) {
        return bf16_bits(v);
    }
    return f16_bits(v);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    if (i >= p.words || t >= p.n_tokens) {
        return;
    }
    out[t * p.words + i] = round16(2u * i, t) | (round16(2u * i + 1u, t) << 16u);
}
