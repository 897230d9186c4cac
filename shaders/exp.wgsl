// e^x with the CPU engine's bits (src/quant/exp.rs has the why and the
// steps): only +, -, * each rounded on its own, round-half-even and bit
// operations; constants as the bits of the CPU's f32 constants (1/k!
// rounded once). Outside [-85, 88]: 0 or the largest f32 (WGSL has no infinity
// constant); NaN stays NaN.

fn exp_cpu(x: f32) -> f32 {
    if (x != x) {
        return x;
    }
    if (x > 88.0) {
        return bitcast<f32>(0x7f7fffffu);
    }
    if (x < -85.0) {
        return 0.0;
    }
    let n = round(x * bitcast<f32>(0x3fb8aa3bu));
    let r = (x - n * bitcast<f32>(0x3f317200u)) - n * bitcast<f32>(0x35bfbe8eu);
    var p = bitcast<f32>(0x39500d01u);
    p = p * r + bitcast<f32>(0x3ab60b61u);
    p = p * r + bitcast<f32>(0x3c088889u);
    p = p * r + bitcast<f32>(0x3d2aaaabu);
    p = p * r + bitcast<f32>(0x3e2aaaabu);
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return p * bitcast<f32>(u32(i32(n) + 127) << 23u);
}
