//! The prefill path of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1,
//! Q8_0) x Q8_0/Q8_1 activations on AVX-512 VNNI and on AVX2: weight rows
//! unpacked once into groups of 8 rows, then multiplied by tiles of 4
//! tokens. The group's 256 quant bytes per block are laid out for the
//! kernel ([`Layout`]).
//!
//! Why this layout: the shared float order (`portable::dot32`) keeps eight
//! f32 lanes per row and token, lane l taking the block's elements 4l..4l+3.
//! With a row's 32 quants in half a register and the token's 32 activation
//! bytes broadcast to both halves, one `dpbusd` leaves exactly those eight
//! 4-element sums for two rows, so the lanes' float steps run lane-wise with
//! no shuffles, 16 at a time (AVX2 needs `maddubs` + `madd` for one row's 8).
//! `dpbusd` multiplies unsigned by signed bytes: signed weights are stored
//! plus 128, and 128 x the activation's 4-byte sums is subtracted (exact).
//!
//! AVX2 (`x86::tile32`, [`Layout::Lanes`]) turns this around: one 32-bit
//! lane per row, register l holding the 8 rows' elements 4l..4l+3, so one
//! `maddubs` + `madd` against the token's 4 activation bytes broadcast gives
//! lane l's integer sums of all 8 rows, and `d_w * d_a` for 8 rows is one
//! multiply shared by the 8 registers (the pair layout needs a broadcast of
//! it per row). Quants stay signed (`maddubs` of u8 x i8 would saturate on
//! +128 values): the kernel moves the weight's sign onto the activation.
//!
//! Results equal the portable kernels' bit for bit: integer sums are exact,
//! each lane's `acc += (d_w * d_a) * isum` is the portable one, the `m * s`
//! term has its own accumulator, and the final reduction is `lane_tree`.

use crate::ggml::GgmlType;
use crate::quant::act::BlockQ8;
use crate::quant::blocks::unpack32;

/// Rows per group: two per 512-bit register, four registers.
pub(crate) const ROWS: usize = 8;
/// Tokens per kernel call.
pub(crate) const TOKENS: usize = 4;

/// One 32-element block of 8 weight rows.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct Rows32 {
    /// [`Layout::Pairs`]: `q[p]` is row 2p's 32 quants, then row 2p + 1's,
    /// as unsigned bytes (the signed formats' quants plus 128).
    /// [`Layout::Lanes`]: byte 32l + 4r + k (of the 256) is row r's quant
    /// 4l + k, as its i8 bits.
    pub q: [[u8; 64]; 4],
    pub d: [f32; ROWS],
    /// The min term's weight (`m`, zero for formats without one).
    pub m: [f32; ROWS],
}

const ZERO_ROWS: Rows32 = Rows32 {
    q: [[0; 64]; 4],
    d: [0.0; ROWS],
    m: [0.0; ROWS],
};

/// Whether `ty` has this path: the weight formats with 32-element blocks.
pub(crate) fn has_tiles(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0
    )
}

/// Where `fill` puts the quants (see [`Rows32::q`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// Two rows per 512-bit register, unsigned (AVX-512 VNNI `dpbusd`).
    Pairs,
    /// One 32-bit lane per row, 4 quants per register (AVX2 `maddubs`).
    Lanes,
}

/// `out[t][r]` = row r of the group . token t, over all blocks.
pub(crate) type TileKernel = unsafe fn(&[Rows32], &[&[BlockQ8]; TOKENS]) -> [[f32; ROWS]; TOKENS];

/// Unpacks `rows` (at most 8; missing rows give values that are dropped)
/// into `nb` blocks. `signed`: the format's quants can be negative.
fn fill(
    ty: GgmlType,
    data: &[u8],
    rows: &[usize],
    signed: bool,
    layout: Layout,
    out: &mut [Rows32],
) {
    let bb = ty.block_bytes();
    let row_bytes = out.len() * bb;
    if rows.len() < ROWS {
        out.fill(ZERO_ROWS);
    }
    let mut q32 = [0i8; 32];
    for (r, &row) in rows.iter().enumerate() {
        let src = &data[row * row_bytes..(row + 1) * row_bytes];
        let half = 32 * (r % 2);
        for (g, b) in out.iter_mut().zip(src.chunks_exact(bb)) {
            let (d, m) = unpack32(ty, b, &mut q32);
            match layout {
                Layout::Pairs => {
                    let dst = &mut g.q[r / 2][half..half + 32];
                    for (o, &x) in dst.iter_mut().zip(&q32) {
                        // x + 128 for signed quants (flipping the top bit), x itself otherwise.
                        *o = if signed { (x as u8) ^ 0x80 } else { x as u8 };
                    }
                }
                Layout::Lanes => {
                    let q = g.q.as_flattened_mut();
                    for (l, quad) in q32.chunks_exact(4).enumerate() {
                        let dst = &mut q[32 * l + 4 * r..32 * l + 4 * r + 4];
                        for (o, &x) in dst.iter_mut().zip(quad) {
                            *o = x as u8;
                        }
                    }
                }
            }
            g.d[r] = d;
            g.m[r] = m;
        }
    }
}

/// The matmul driver's worker for this path: selection indices `lo..hi`
/// (`row_of` maps them to matrix rows), `outs[t][i - lo]` receives token t.
/// `kernel` is one of `avx512::tile32` (AVX-512 F/BW/VNNI, [`Layout::Pairs`])
/// or `x86::tile32` (AVX2 + FMA, [`Layout::Lanes`]), and the CPU has its features.
#[allow(clippy::too_many_arguments)]
pub(crate) fn worker(
    ty: GgmlType,
    data: &[u8],
    cols: usize,
    signed: bool,
    layout: Layout,
    row_of: impl Fn(usize) -> usize,
    lo: usize,
    hi: usize,
    acts: &[BlockQ8],
    n_tokens: usize,
    outs: &mut [&mut [f32]],
    kernel: TileKernel,
) {
    let nb = cols / 32;
    let fill = |rows: &[usize], group: &mut [Rows32]| fill(ty, data, rows, signed, layout, group);
    // SAFETY: the caller chose `kernel` for features this CPU has; every
    // slice holds exactly `nb` blocks.
    let tile = |g: &[Rows32], a: &[&[BlockQ8]; TOKENS]| unsafe { kernel(g, a) };
    crate::quant::groups::run(
        ZERO_ROWS, nb, row_of, lo, hi, acts, n_tokens, outs, fill, tile,
    );
}
