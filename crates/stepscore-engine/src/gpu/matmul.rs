//! Weight matrices on the device and their product with f32 activations:
//! `y[t * rows + r] = W[r] · x[t]`, the same contract as
//! [`Matrix::matmul`](crate::model::Matrix::matmul).
//!
//! Quantized weights stay in their (padded) ggml blocks and multiply
//! activations rounded to 8 bits per block, as the CPU engine does (act.rs
//! quantizes them on the device first; the kernels sum exact integer block
//! products and scale them in f32 in the CPU's order); F16 and BF16
//! matrices stay 16-bit (half the memory and bandwidth of f32) and multiply
//! activations rounded to the same type first, as the CPU engine does (a
//! rounding pass into a batch scratch buffer, then matmul_float16.wgsl);
//! F32 block matrices are uploaded as f32. A matrix larger than the
//! adapter's storage binding limit is split
//! by rows into several buffers, one dispatch each, all writing the same
//! output.

use super::act::record_quantize;
use super::act_layout::ActKind;
use super::batch::Batch;
use super::context::Float16Path;
use super::context::GpuContext;
use super::pool::TrackedBuffer;
use super::repack::{float16_groups, float16_rows, gpu_weight_layout, repack_blocks};
use super::shaders::{self, Shader};
use super::tensor::GpuTensor;
use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::model::Matrix;

/// Invocations per workgroup and tokens per invocation (the shaders'
/// constants).
const WG_ROWS: u32 = 64;
const TOKENS_PER_THREAD: u32 = 4;

/// One row range of the weights in its own buffer.
struct Chunk {
    buf: TrackedBuffer,
    first_row: usize,
    rows: usize,
}

/// A weight matrix uploaded for one kernel.
pub struct GpuMatrix {
    rows: usize,
    cols: usize,
    /// `F32` for f32 sources, else the source type.
    ty: GgmlType,
    shader: Shader,
    /// The activation form a quantized matrix multiplies (`None`: f32 or
    /// 16-bit weights).
    act: Option<ActKind>,
    gather_shader: Shader,
    chunks: Vec<Chunk>,
}

/// The matmul and embedding-gather kernels of a weight type on a device
/// with or without `dot4I8Packed` (`packed_dot`) and `shader-f16`
/// (`float16`); `None` where the GPU has no kernel. The one dispatch table
/// of formats: `repack::gpu_weight_layout` gives the device layout of the
/// block types, `repack::float16_rows` that of F16/BF16.
fn shaders_for(ty: GgmlType, packed_dot: bool, float16: Float16Path) -> Option<(Shader, Shader)> {
    use shaders::*;
    let q = match ty {
        GgmlType::F32 => return Some((MATMUL_F32, EMBED_F32)),
        GgmlType::F16 => {
            return Some(match float16 {
                Float16Path::ShaderF16 => (MATMUL_F16_NATIVE, EMBED_FLOAT16),
                Float16Path::Words => (MATMUL_F16_WORDS, EMBED_FLOAT16),
            })
        }
        GgmlType::BF16 => return Some((MATMUL_BF16, EMBED_FLOAT16)),
        GgmlType::Q8_0 => &Q8_0,
        GgmlType::Q4_0 => &Q4_0,
        GgmlType::Q4_1 => &Q4_1,
        GgmlType::Q5_0 => &Q5_0,
        GgmlType::Q5_1 => &Q5_1,
        GgmlType::Q4K => &Q4_K,
        GgmlType::Q5K => &Q5_K,
        GgmlType::Q6K => &Q6_K,
        _ => return None,
    };
    let matmul = if packed_dot {
        q.matmul_packed
    } else {
        q.matmul_emulated
    };
    Some((matmul, q.gather))
}

/// The weight types the GPU kernels read, for error messages.
const SUPPORTED: &str = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";

fn to_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::Gpu(format!(
            "{what} {n} does not fit the kernels' 32-bit indices"
        ))
    })
}

impl GpuMatrix {
    /// Uploads `m`: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
    /// blocks as they are (padded, see repack.rs), F16/BF16 as 16-bit rows,
    /// f32 as f32. Other block types (Q2_K, Q3_K) are an error naming the
    /// type.
    pub fn upload(ctx: &GpuContext, m: &Matrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        to_u32(rows, "rows")?;
        to_u32(cols, "cols")?;
        let (ty, row_bytes) = match m {
            Matrix::F32 { .. } => (GgmlType::F32, cols * 4),
            Matrix::Quant {
                ty: GgmlType::F32, ..
            } => (GgmlType::F32, cols * 4),
            Matrix::Quant {
                ty: ty @ (GgmlType::F16 | GgmlType::BF16),
                ..
            } => (*ty, float16_groups(cols) * 16),
            Matrix::Quant { ty, .. } => {
                let layout = gpu_weight_layout(*ty).ok_or_else(|| {
                    Error::Gpu(format!(
                        "no GPU matmul kernel for {} weights (supported: {SUPPORTED})",
                        ty.name()
                    ))
                })?;
                (*ty, cols / ty.block_elems() * layout.block_words * 4)
            }
        };
        let (shader, gather_shader) = shaders_for(ty, ctx.has_packed_dot(), ctx.float16_path())
            .ok_or_else(|| {
                Error::Gpu(format!(
                    "no GPU matmul kernel for {} (supported: {SUPPORTED})",
                    ty.name()
                ))
            })?;
        let limit = ctx.binding_limit();
        let rows_per_chunk = if row_bytes == 0 {
            rows.max(1)
        } else {
            (limit / row_bytes as u64) as usize
        };
        if rows_per_chunk == 0 {
            return Err(Error::Gpu(format!(
                "one {} row of {cols} columns takes {row_bytes} bytes, over the storage binding limit of {limit} bytes",
                m.type_name()
            )));
        }
        let mut chunks = Vec::new();
        let mut first_row = 0;
        while first_row < rows {
            let n = rows_per_chunk.min(rows - first_row);
            let words = chunk_words(m, first_row, n)?;
            let bytes: &[u8] = bytemuck::cast_slice(&words);
            // Zero-column matrices still get a (minimal) buffer to bind.
            let size = (bytes.len() as u64).max(4);
            let buf = ctx.pool.create(
                size,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                "weights",
            )?;
            if !bytes.is_empty() {
                ctx.queue.write_buffer(&buf.buffer, 0, bytes);
            }
            chunks.push(Chunk {
                buf,
                first_row,
                rows: n,
            });
            first_row += n;
        }
        ctx.check()?;
        Ok(GpuMatrix {
            rows,
            cols,
            ty,
            shader,
            act: match ty {
                GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => None,
                _ => ActKind::for_weight(ty),
            },
            gather_shader,
            chunks,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The weight type on the device (`F32` for f32 sources).
    pub fn weight_type(&self) -> GgmlType {
        self.ty
    }

    /// Bytes of device memory the weights take (all row chunks).
    pub fn device_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.buf.size).sum()
    }

    /// The activation form this matrix multiplies (`None`: f32 as it is,
    /// or rounded to 16 bits by its own pass for F16/BF16 weights).
    pub(crate) fn act_kind(&self) -> Option<ActKind> {
        self.act
    }

    fn is_float16(&self) -> bool {
        matches!(self.ty, GgmlType::F16 | GgmlType::BF16)
    }

    /// How many row chunks (buffers) the weights were split into.
    #[cfg(any(test, feature = "testing"))]
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// `y = x · Wᵀ` for `n_tokens` rows of `x` (each `cols` long), as a
    /// device tensor of `n_tokens * rows` values. Records and submits; does
    /// not wait.
    pub fn matmul(&self, ctx: &GpuContext, x: &GpuTensor, n_tokens: usize) -> Result<GpuTensor> {
        let need = n_tokens.checked_mul(self.cols);
        if need != Some(x.len()) {
            return Err(Error::InvalidArgument(format!(
                "matmul: {n_tokens} tokens of {} columns need {} input values, got {}",
                self.cols,
                need.map_or_else(|| "too many".to_string(), |n| n.to_string()),
                x.len()
            )));
        }
        let out_len = n_tokens
            .checked_mul(self.rows)
            .ok_or_else(|| Error::InvalidArgument("matmul output too large".into()))?;
        if out_len == 0 {
            return GpuTensor::uninit(ctx, 0);
        }
        if self.cols == 0 {
            return GpuTensor::zeros(ctx, out_len);
        }
        let y = GpuTensor::uninit(ctx, out_len)?;
        let mut b = Batch::new(ctx, "matmul");
        self.record(&mut b, x.binding()?, y.buf.buffer()?, 0, n_tokens)?;
        b.submit()?;
        Ok(y)
    }

    /// Records `y[y_base + t * rows + r] = W[r] · x[t]` into a batch: the
    /// forward pass writes keys and values straight into the KV cache at
    /// their positions this way. `x` must hold `n_tokens * cols` values and
    /// `y` room for the output; the caller checks both.
    pub(crate) fn record(
        &self,
        b: &mut Batch<'_>,
        x: wgpu::BindingResource<'_>,
        y: &wgpu::Buffer,
        y_base: usize,
        n_tokens: usize,
    ) -> Result<()> {
        if n_tokens == 0 || self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let n = to_u32(n_tokens, "tokens")?;
        if self.is_float16() {
            return self.record_float16(b, x, y, y_base, n);
        }
        match self.act {
            None => self.record_on(b, x, y, y_base, n_tokens),
            Some(kind) => {
                let acts = b.act_buffer(kind, kind.bytes(n_tokens, self.cols)?)?;
                record_quantize(b, kind, x, &acts, n_tokens, self.cols)?;
                self.record_on(b, acts.as_entire_binding(), y, y_base, n_tokens)
            }
        }
    }

    /// Records the product with `x` as it is: activations already in
    /// [`GpuMatrix::act_kind`]'s form (`n_tokens` rows of `cols`), f32
    /// values when it has none.
    pub(crate) fn record_on(
        &self,
        b: &mut Batch<'_>,
        x: wgpu::BindingResource<'_>,
        y: &wgpu::Buffer,
        y_base: usize,
        n_tokens: usize,
    ) -> Result<()> {
        if n_tokens == 0 || self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        self.dispatch_chunks(b, x, y, y_base, n_tokens, 0)
    }

    /// One dispatch of the matrix's kernel per row chunk over `x` (in the
    /// kernel's activation form); `extra` is the kernels' seventh parameter
    /// (the F16/BF16 kernels' 8-value groups per row, else 0).
    fn dispatch_chunks(
        &self,
        b: &mut Batch<'_>,
        x: wgpu::BindingResource<'_>,
        y: &wgpu::Buffer,
        y_base: usize,
        n_tokens: usize,
        extra: u32,
    ) -> Result<()> {
        let groups_y = to_u32(n_tokens, "tokens")?.div_ceil(TOKENS_PER_THREAD);
        for c in &self.chunks {
            let p = [
                to_u32(c.rows, "rows")?,
                to_u32(self.cols, "cols")?,
                to_u32(n_tokens, "tokens")?,
                to_u32(c.first_row, "rows")?,
                to_u32(self.rows, "rows")?,
                to_u32(y_base, "output offset")?,
                extra,
                0,
            ];
            b.dispatch(
                &self.shader,
                &[
                    c.buf.buffer.as_entire_binding(),
                    x.clone(),
                    y.as_entire_binding(),
                ],
                &p,
                [p[0].div_ceil(WG_ROWS), groups_y, 1],
            )?;
        }
        Ok(())
    }

    /// The float16 matmul: x rounded to the weights' 16-bit type into the
    /// batch's scratch buffer (as the CPU engine's `QuantizedActs` does for
    /// F16/BF16 weights), then one dispatch per row chunk.
    fn record_float16(
        &self,
        b: &mut Batch<'_>,
        x: wgpu::BindingResource<'_>,
        y: &wgpu::Buffer,
        y_base: usize,
        n: u32,
    ) -> Result<()> {
        let groups = float16_groups(self.cols);
        let words = to_u32(groups * 4, "cols")?;
        let bytes = u64::from(n) * u64::from(words) * 4;
        let acts = b.scratch(bytes)?;
        record_round16(b, self.ty, x, &acts, self.cols, n)?;
        let groups = to_u32(groups, "cols")?;
        self.dispatch_chunks(b, acts.as_entire_binding(), y, y_base, n as usize, groups)
    }

    /// Records the embedding gather `out[t] = row ids[t]` (dequantized) of
    /// this matrix for `n_tokens` ids; ids must be below `rows`.
    pub(crate) fn record_gather(
        &self,
        b: &mut Batch<'_>,
        ids: &wgpu::Buffer,
        out: &wgpu::Buffer,
        n_tokens: usize,
    ) -> Result<()> {
        if n_tokens == 0 || self.cols == 0 {
            return Ok(());
        }
        // Quantized rows are read a vec4 at a time, float ones a value.
        let per_inv = if self.ty == GgmlType::F32 || self.is_float16() {
            1
        } else {
            4
        };
        let groups_x = to_u32(self.cols / per_inv, "cols")?.div_ceil(WG_ROWS);
        for c in &self.chunks {
            let mut p = vec![
                to_u32(c.rows, "rows")?,
                to_u32(self.cols, "cols")?,
                to_u32(n_tokens, "tokens")?,
                to_u32(c.first_row, "rows")?,
            ];
            if self.is_float16() {
                p.extend([u32::from(self.ty == GgmlType::BF16), 0, 0, 0]);
            }
            b.dispatch(
                &self.gather_shader,
                &[
                    c.buf.buffer.as_entire_binding(),
                    ids.as_entire_binding(),
                    out.as_entire_binding(),
                ],
                &p,
                [groups_x, to_u32(n_tokens, "tokens")?, 1],
            )?;
        }
        Ok(())
    }

    /// Gathers rows `ids` (the embedding lookup) into a device tensor of
    /// `ids.len() * cols` values. Records and submits; does not wait. Test
    /// support (feature `testing`): the forward pass records its gather into
    /// its one batch.
    #[cfg(any(test, feature = "testing"))]
    pub fn gather(&self, ctx: &GpuContext, ids: &[u32]) -> Result<GpuTensor> {
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.rows) {
            return Err(Error::InvalidArgument(format!(
                "row id {bad} is out of range for {} rows",
                self.rows
            )));
        }
        let len = ids
            .len()
            .checked_mul(self.cols)
            .ok_or_else(|| Error::InvalidArgument("gather output too large".into()))?;
        let out = GpuTensor::uninit(ctx, len)?;
        if len == 0 {
            return Ok(out);
        }
        let mut b = Batch::new(ctx, "gather");
        let idb = b.upload(bytemuck::cast_slice(ids))?;
        self.record_gather(&mut b, &idb, out.buf.buffer()?, ids.len())?;
        b.submit()?;
        Ok(out)
    }

    /// Uploads `x`, multiplies and reads the result back (test support).
    #[cfg(any(test, feature = "testing"))]
    pub async fn matmul_slice_async(
        &self,
        ctx: &GpuContext,
        x: &[f32],
        n_tokens: usize,
    ) -> Result<Vec<f32>> {
        let xt = GpuTensor::from_slice(ctx, x)?;
        let y = self.matmul(ctx, &xt, n_tokens)?;
        y.to_vec_async(ctx).await
    }

    /// Blocking [`GpuMatrix::matmul_slice_async`].
    #[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
    pub fn matmul_slice(&self, ctx: &GpuContext, x: &[f32], n_tokens: usize) -> Result<Vec<f32>> {
        pollster::block_on(self.matmul_slice_async(ctx, x, n_tokens))
    }
}

/// Records `out = x` (n rows of `cols` f32 values) rounded to `ty` (F16 or
/// BF16), two values a word, each row padded to whole 8-value groups: the
/// activations of the float16 matmul.
fn record_round16(
    b: &mut Batch<'_>,
    ty: GgmlType,
    x: wgpu::BindingResource<'_>,
    out: &wgpu::Buffer,
    cols: usize,
    n: u32,
) -> Result<()> {
    let words = to_u32(float16_groups(cols) * 4, "cols")?;
    b.dispatch(
        &shaders::ROUND_ACTS16,
        &[x, out.as_entire_binding()],
        &[
            to_u32(cols, "cols")?,
            n,
            words,
            u32::from(ty == GgmlType::BF16),
        ],
        [words.div_ceil(WG_ROWS), n, 1],
    )
}

/// `x` (rows of `cols` values) rounded to `ty` (F16 or BF16) by the kernel
/// the float16 matmul runs first, read back as 16-bit values without the
/// row padding (test support: its rounding must be the CPU engine's bit for
/// bit).
#[cfg(all(not(target_arch = "wasm32"), any(test, feature = "testing")))]
pub fn round_acts16(ctx: &GpuContext, ty: GgmlType, x: &[f32], cols: usize) -> Result<Vec<u16>> {
    if !matches!(ty, GgmlType::F16 | GgmlType::BF16) || cols == 0 || x.len() % cols != 0 {
        return Err(Error::InvalidArgument(format!(
            "round_acts16: {} values of {cols} columns to {}",
            x.len(),
            ty.name()
        )));
    }
    let n = x.len() / cols;
    let words = float16_groups(cols) * 4;
    let xt = GpuTensor::from_slice(ctx, x)?;
    let out = GpuTensor::uninit(ctx, n * words)?;
    let mut b = Batch::new(ctx, "round_acts16");
    record_round16(
        &mut b,
        ty,
        xt.binding()?,
        out.buf.buffer()?,
        cols,
        to_u32(n, "tokens")?,
    )?;
    b.submit()?;
    let bits: Vec<u32> = out.to_vec(ctx)?.iter().map(|v| v.to_bits()).collect();
    Ok(bits
        .chunks_exact(words)
        .flat_map(|row| (0..cols).map(move |c| (row[c / 2] >> (16 * (c % 2))) as u16))
        .collect())
}

/// The device words of rows `first..first + n` of `m`.
fn chunk_words(m: &Matrix, first: usize, n: usize) -> Result<Vec<u32>> {
    let cols = m.cols();
    match m {
        Matrix::F32 { data, .. } => {
            let rows = data.get(first * cols..(first + n) * cols).ok_or_else(|| {
                Error::InvalidArgument("matrix data shorter than rows x cols".into())
            })?;
            Ok(rows.iter().map(|v| v.to_bits()).collect())
        }
        Matrix::Quant { ty, bytes, .. } => {
            let row_bytes = cols / ty.block_elems() * ty.block_bytes();
            let src = bytes
                .as_slice()
                .get(first * row_bytes..(first + n) * row_bytes)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{} matrix bytes shorter than its rows",
                        ty.name()
                    ))
                })?;
            match ty {
                // ggml F32 rows are little-endian f32: the device words.
                GgmlType::F32 => Ok(src
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect()),
                GgmlType::F16 | GgmlType::BF16 => {
                    Ok(interleave_rows(&float16_rows(*ty, src, n, cols)?, n, 4))
                }
                _ => Ok(interleave_rows(&repack_blocks(*ty, src)?, n, 1)),
            }
        }
    }
}

/// Row-major words of `n` rows -> interleaved by units of `unit` words:
/// unit j of row r moves to `j * n + r`, so the invocations of a workgroup
/// (consecutive rows) read consecutive units (a word for the block formats,
/// a 16-byte group of eight 16-bit values for F16/BF16).
fn interleave_rows(words: &[u32], n: usize, unit: usize) -> Vec<u32> {
    let per_row = words.len().checked_div(n).unwrap_or(0);
    let mut out = vec![0u32; words.len()];
    for (r, row) in words.chunks_exact(per_row.max(1)).enumerate() {
        for (j, v) in row.chunks_exact(unit).enumerate() {
            let at = (j * n + r) * unit;
            out[at..at + unit].copy_from_slice(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::interleave_rows;

    #[test]
    fn interleaving_puts_word_j_of_row_r_at_j_times_rows_plus_r() {
        // 3 rows of 2 words: r0 = [a0 a1], r1 = [b0 b1], r2 = [c0 c1].
        let words = [10, 11, 20, 21, 30, 31];
        assert_eq!(interleave_rows(&words, 3, 1), vec![10, 20, 30, 11, 21, 31]);
        assert_eq!(interleave_rows(&words, 1, 1), words.to_vec());
        assert!(interleave_rows(&[], 0, 1).is_empty());
        // Units of 2 words: 2 rows of 2 units.
        let words = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(interleave_rows(&words, 2, 2), vec![1, 2, 5, 6, 3, 4, 7, 8]);
    }
}
