// idot4(a, b) = sum over k of the signed bytes a_k * b_k: WGSL's
// packed_4x8_integer_dot_product (one instruction where the hardware has it).

fn idot4(a: u32, b: u32) -> i32 {
    return dot4I8Packed(a, b);
}
