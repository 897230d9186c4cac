// 8-bit activations for the K-quant weight formats (ggml's Q8_K blocks of
// 256, quantize_row_q8_K_ref):
//   max = the value of largest magnitude (the first on ties),
//   iscale = -127 / max, q_i = min(nearest_even(iscale * x_i), 127),
//   bsums[g] = sum of q over elements 16g..16g+15, d = 1 / iscale.
// One invocation per (block, token); the block is Q8K_WORDS words at
// (t * cols / 256 + block) * Q8K_WORDS: quants packed 4 to a word from
// Q8K_QS, the 16 sums (i32) from Q8K_BSUMS, d (f32 bits) at Q8K_D.

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let nb = p.cols / 256u;
    let blk = gid.x;
    let t = gid.y;
    if (blk >= nb || t >= p.n_tokens) {
        return;
    }
    let base = t * p.cols + blk * 256u;
    let o = (t * nb + blk) * Q8K_WORDS;
    var amax = 0.0;
    for (var i = 0u; i < 256u; i++) {
        amax = c_max(abs(x[base + i]), amax);
    }
    if (amax == 0.0) {
        for (var i = 0u; i < Q8K_WORDS; i++) {
            q[o + i] = 0u;
        }
        return;
    }
    var mx = 0.0;
    for (var i = 0u; i < 256u; i++) {
        if (abs(x[base + i]) == amax) {
            mx = x[base + i];
            break;
        }
    }
    // iscale = -127 / mx and d = 1 / iscale, each rounded as IEEE division.
    let iscale = select(1.0, -1.0, mx > 0.0) * div_rn(127.0, abs(mx));
    for (var g = 0u; g < 16u; g++) {
        var sum = 0;
        for (var w = 0u; w < 4u; w++) {
            var word = 0u;
            for (var k = 0u; k < 4u; k++) {
                let v = min(i32(round(iscale * x[base + 16u * g + 4u * w + k])), 127);
                sum += v;
                word = word | ((bitcast<u32>(v) & 0xFFu) << (8u * k));
            }
            q[o + Q8K_QS + 4u * g + w] = word;
        }
        q[o + Q8K_BSUMS + g] = bitcast<u32>(sum);
    }
    q[o + Q8K_D] = bitcast<u32>(select(1.0, -1.0, iscale < 0.0) * div_rn(1.0, abs(iscale)));
}
