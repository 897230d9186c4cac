// The 5-bit quants of Q5_0 and Q5_1 blocks, shared by both format files.
// Both repack to the same 6 words (see src/gpu/repack.rs): word 0 = the
// f16 scale(s), word 1 = qh (bit e is the 5th bit of element e), words
// 2..5 = qs[16] (element e < 16 is the low nibble of byte e, element e + 16
// its high nibble).

// Quants of elements 4v..4v+3 (v < 8) of the block at word wi, in 0..31:
// the nibbles of qs word v % 4 (low for v < 4, high after), each with its
// qh bit 4v + k on top.
fn q5_quants(wi: u32, v: u32) -> vec4<u32> {
    let nib = (bytes4(wl(wi + 2u + v % 4u)) >> vec4<u32>(4u * (v / 4u))) & vec4<u32>(0xFu);
    let hb = (vec4<u32>(wl(wi + 1u)) >> (vec4<u32>(0u, 1u, 2u, 3u) + vec4<u32>(4u * v))) & vec4<u32>(1u);
    return nib | (hb << vec4<u32>(4u));
}
