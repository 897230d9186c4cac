// F16 weights and activations read as u32 words and widened with
// unpack2x16float (core WGSL, exact: every f16 is an f32), for
// matmul_float16.wgsl on devices without `shader-f16`. The lower half of a
// word is the earlier value (little endian).

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<u32>>;

fn widen8(q: vec4<u32>) -> Eight {
    return Eight(vec4<f32>(unpack2x16float(q.x), unpack2x16float(q.y)),
                 vec4<f32>(unpack2x16float(q.z), unpack2x16float(q.w)));
}

fn load_w(i: u32) -> Eight {
    return widen8(w[i]);
}

fn load_x(i: u32) -> Eight {
    return widen8(x[i]);
}
