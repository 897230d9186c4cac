// The 6-bit sub-block scales and mins of Q4_K and Q5_K super-blocks (ggml's
// get_scale_min_k4), shared by both format files. In both layouts word 0
// holds d and dmin and words 1..3 the 12 scale bytes: sub-blocks j < 4 take
// the low 6 bits of bytes j (scale) and j + 4 (min); j >= 4 take the nibbles
// of byte j + 4 with the top 2 bits of bytes j - 4 (scale) and j (min).

fn scale_byte(wi: u32, k: u32) -> u32 {
    return (wl(wi + 1u + k / 4u) >> (8u * (k % 4u))) & 0xFFu;
}

// (scale, min) of sub-block j (0..7) of the super-block at word wi.
fn scale_min_u(wi: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(scale_byte(wi, j) & 63u, scale_byte(wi, j + 4u) & 63u);
    }
    let sc = (scale_byte(wi, j + 4u) & 0xFu) | ((scale_byte(wi, j - 4u) >> 6u) << 4u);
    let mn = (scale_byte(wi, j + 4u) >> 4u) | ((scale_byte(wi, j) >> 6u) << 4u);
    return vec2<u32>(sc, mn);
}

// The same as f32 (the embedding gather's access).
fn scale_min(wi: u32, j: u32) -> vec2<f32> {
    return vec2<f32>(scale_min_u(wi, j));
}
