// Shared by the activation quantizers (quantize_q8.wgsl, quantize_q8_k.wgsl,
// round_half.wgsl):
// the exact arithmetic of the CPU engine's quant/act.rs, which is
// llama.cpp's quantize_row_q8_0/q8_1/q8_K_ref. The block layouts on the
// device (the Q8_* / Q8K_* word offsets) are constants the runtime writes
// ahead of this file from src/gpu/act.rs.

struct Params {
    cols: u32,       // values per token row (a multiple of the block size)
    n_tokens: u32,
    mode: u32,       // round_half.wgsl: 0 = f16, 1 = bf16
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

// ggml's MAX(a, b): a > b ? a : b.
fn c_max(a: f32, b: f32) -> f32 {
    return select(b, a, a > b);
}

// a / b rounded to nearest even, as IEEE division (and the CPU) gives it:
// WGSL's `/` may be off by 2.5 ulp, which would move quants that sit next
// to a rounding tie. Positive normal operands with a normal quotient (the
// scales here) go through a 24-bit long division; anything else falls back
// to `/`.
fn div_rn(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = i32(ua >> 23u);
    let eb = i32(ub >> 23u);
    if (ea == 0 || eb == 0 || ea >= 255 || eb >= 255) {
        return a / b;
    }
    var r = (ua & 0x7FFFFFu) | 0x800000u;
    let mb = (ub & 0x7FFFFFu) | 0x800000u;
    var e = ea - eb + 127;
    if (r < mb) {
        r = r << 1u;
        e = e - 1;
    }
    // 1 <= r / mb < 2: 24 quotient bits; r ends as twice the remainder.
    var qt = 0u;
    for (var i = 0u; i < 24u; i++) {
        qt = qt << 1u;
        if (r >= mb) {
            r = r - mb;
            qt = qt | 1u;
        }
        r = r << 1u;
    }
    if (r > mb || (r == mb && (qt & 1u) == 1u)) {
        qt = qt + 1u;
        if (qt == 0x1000000u) {
            qt = 0x800000u;
            e = e + 1;
        }
    }
    if (e <= 0 || e >= 255) {
        return a / b;
    }
    return bitcast<f32>((u32(e) << 23u) | (qt & 0x7FFFFFu));
}

// v rounded to the nearest f16 value (ties to even), as an f32: what
// f16_to_f32(f32_to_f16(v)) gives on the CPU for finite v.
fn f16_round(v: f32) -> f32 {
    if (abs(v) < 6.103515625e-05) {
        // f16 subnormals: multiples of 2^-24 (both scalings are exact).
        return round(v * 16777216.0) * 5.9604644775390625e-08;
    }
    let u = bitcast<u32>(v);
    let r = bitcast<f32>((u + 0xFFFu + ((u >> 13u) & 1u)) & 0xFFFFE000u);
    if (abs(r) > 65504.0) {
        return bitcast<f32>((u & 0x80000000u) | 0x7F800000u);
    }
    return r;
}

// v rounded to the nearest bf16 value (ties to even), as an f32: what
// bf16_to_f32(f32_to_bf16(v)) gives on the CPU for non-NaN v.
fn bf16_round(v: f32) -> f32 {
    let u = bitcast<u32>(v);
    return bitcast<f32>((u + 0x7FFFu + ((u >> 16u) & 1u)) & 0xFFFF0000u);
}

// C's roundf (ties away from zero) for |v| < 2^23.
fn round_half_away(v: f32) -> i32 {
    let t = trunc(v);
    let f = v - t;
    return i32(t) + select(0, 1, f >= 0.5) - select(0, 1, f <= -0.5);
}
