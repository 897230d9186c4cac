// idot4(a, b) = sum over k of the signed bytes a_k * b_k, in core WGSL (for
// implementations without packed_4x8_integer_dot_product): each byte is
// sign-extended by moving it to the top and shifting back, then an integer
// dot product, exact like the packed instruction.

fn idot4(a: u32, b: u32) -> i32 {
    let sh = vec4<u32>(24u, 16u, 8u, 0u);
    let va = bitcast<vec4<i32>>(vec4<u32>(a) << sh) >> vec4<u32>(24u);
    let vb = bitcast<vec4<i32>>(vec4<u32>(b) << sh) >> vec4<u32>(24u);
    return dot(va, vb);
}
