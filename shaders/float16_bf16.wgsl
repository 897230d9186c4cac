// BF16 weights and activations read as u32 words, for matmul_float16.wgsl:
// a bf16 value is the high half of an f32, so widening is a 16-bit shift
// (exact, no feature needed). The lower half of a word is the earlier value.

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;

fn widen2(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u));
}

fn widen8(q: vec4<u32>) -> Eight {
    return Eight(vec4<f32>(widen2(q.x), widen2(q.y)), vec4<f32>(widen2(q.z), widen2(q.w)));
}

fn load_w(i: u32) -> Eight {
    return widen8(w[i]);
}

fn load_x(i: u32) -> Eight {
    return widen8(x[i]);
}
