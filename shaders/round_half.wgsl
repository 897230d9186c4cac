// The activations of f16 and bf16 weight matrices (ggml's vec_dot_types F16
// and BF16): every value rounded to the weights' precision, ties to even,
// kept as f32 bits for the f32 matmul kernel.
//   q[i] = f16_round(x[i])  (mode 0) or bf16_round(x[i])  (mode 1)
// One invocation per value, spread over a second grid dimension past the
// per-dimension workgroup limit.

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.cols * p.n_tokens) {
        return;
    }
    let v = x[i];
    q[i] = bitcast<u32>(select(f16_round(v), bf16_round(v), p.mode == 1u));
}
