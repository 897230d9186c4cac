// 8-bit activations for the 32-element weight formats (Q8_0, Q4_0, Q5_0 take
// ggml's Q8_0 blocks, Q4_1 and Q5_1 its Q8_1 blocks; both have the same
// quants, so one device block serves both):
//   amax = max |x_i| over the block, d = amax / 127, q_i = roundf(x_i / d)
//   (as x_i * (1 / d), ties away from zero),
//   stored d = f16(d), s = f16(d * sum q_i), as in quantize_row_q8_1_ref.
// One invocation per (block, token); the block is Q8_WORDS words at
// (t * cols / 32 + block) * Q8_WORDS: quants packed 4 to a word (lowest
// byte first) from Q8_QS, then d and s as f32 bits at Q8_D and Q8_S.

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let nb = p.cols / 32u;
    let blk = gid.x;
    let t = gid.y;
    if (blk >= nb || t >= p.n_tokens) {
        return;
    }
    let base = t * p.cols + blk * 32u;
    var amax = 0.0;
    for (var i = 0u; i < 32u; i++) {
        amax = c_max(amax, abs(x[base + i]));
    }
    let d = select(0.0, div_rn(amax, 127.0), amax > 0.0);
    let id = select(0.0, div_rn(1.0, d), d != 0.0);
    let o = (t * nb + blk) * Q8_WORDS;
    var sum = 0;
    for (var w = 0u; w < 8u; w++) {
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            let v = round_half_away(x[base + 4u * w + k] * id);
            sum += v;
            word = word | ((bitcast<u32>(v) & 0xFFu) << (8u * k));
        }
        q[o + Q8_QS + w] = word;
    }
    q[o + Q8_D] = bitcast<u32>(f16_round(d));
    q[o + Q8_S] = bitcast<u32>(f16_round(f32(sum) * d));
}
