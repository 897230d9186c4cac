// F16 weights and activations read as f16 (the `shader-f16` feature), for
// matmul_float16.wgsl. Converting f16 to f32 is exact, so this gives the
// bits of float16_f16_words.wgsl, the path of devices without the feature.
enable f16;

@group(0) @binding(0) var<storage, read> w: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f16>>;

fn load_w(i: u32) -> Eight {
    return Eight(vec4<f32>(w[2u * i]), vec4<f32>(w[2u * i + 1u]));
}

fn load_x(i: u32) -> Eight {
    return Eight(vec4<f32>(x[2u * i]), vec4<f32>(x[2u * i + 1u]));
}
