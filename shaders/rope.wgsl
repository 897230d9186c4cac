// Rotary position embedding, in place, on n_tokens rows of n_heads heads
// starting at element `base` of x (a row is `row_stride` elements): the
// query buffer, or the new positions of a layer's key cache.
// cs holds (cos, sin) per (token, frequency), token-major, computed on the
// host in f64 exactly as the CPU engine does.
// style 0 (HF rotate_half): element i pairs with i + head_dim/2;
// style 1 (GGUF): element 2i pairs with 2i + 1.
// One invocation per (pair, head) x token.

struct Params {
    n_tokens: u32,
    n_heads: u32,
    head_dim: u32,
    row_stride: u32,
    base: u32,
    style: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.head_dim / 2u;
    let i = gid.x % half;
    let h = gid.x / half;
    let t = gid.y;
    if (h >= p.n_heads || t >= p.n_tokens) {
        return;
    }
    let o = p.base + t * p.row_stride + h * p.head_dim;
    var a = o + i;
    var b = o + i + half;
    if (p.style == 1u) {
        a = o + 2u * i;
        b = a + 1u;
    }
    let r = cs[t * half + i];
    let xa = x[a];
    let xb = x[b];
    x[a] = xa * r.x - xb * r.y;
    x[b] = xb * r.x + xa * r.y;
}
