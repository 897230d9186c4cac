// The 5-bit quants of Q5_0 and Q5_1 blocks, shared by both format files.
// Both repack to the same 6 words (see src/gpu/repack.rs): word 0 = the
// f16 scale(s), word 1 = qh (bit e is the 5th bit of element e), words
// 2..5 = qs[16] (element e < 16 is the low nibble of byte e, element e + 16
// its high nibble).

// Quants of elements 4v..4v+3 (v < 8) of the block at word wi, in 0..31,
// one a byte (lowest first): the nibbles of qs word v % 4 (low for v < 4,
// high after), each with its qh bit 4v + k moved to bit 4 of byte k.
fn q5_packed(wi: u32, v: u32) -> u32 {
    let nib = (wl(wi + 2u + v % 4u) >> (4u * (v / 4u))) & 0x0F0F0F0Fu;
    let hb = (wl(wi + 1u) >> (4u * v)) & 0xFu;
    let spread = (hb & 1u) | ((hb & 2u) << 7u) | ((hb & 4u) << 14u) | ((hb & 8u) << 21u);
    return nib | (spread << 4u);
}

// The same quants as a vector (the embedding gather's access).
fn q5_quants(wi: u32, v: u32) -> vec4<u32> {
    return bytes4(q5_packed(wi, v));
}
