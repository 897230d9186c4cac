//! Weight matrices on the device and their product with f32 activations:
//! `y[t * rows + r] = W[r] · x[t]`, the same contract as
//! [`Matrix::matmul`](crate::model::Matrix::matmul).
//!
//! Quantized weights stay in their (padded) ggml blocks and are dequantized
//! inside the kernel; f16/bf16/f32 block matrices are widened to f32 at
//! upload. A matrix larger than the adapter's storage binding limit is split
//! by rows into several buffers, one dispatch each, all writing the same
//! output.

use super::context::GpuContext;
use super::pool::{TrackedBuffer, Usage};
use super::repack::{gpu_weight_layout, repack_blocks};
use super::shaders::{self, Shader};
use super::tensor::GpuTensor;
use crate::error::{Error, Result};
use crate::ggml::GgmlType;
use crate::model::Matrix;
use crate::quant::dequantize_row;

/// Rows per workgroup and tokens per invocation (the shaders' constants).
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
    /// `F32` for f32/f16/bf16 sources.
    ty: GgmlType,
    shader: Shader,
    chunks: Vec<Chunk>,
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    rows: u32,
    cols: u32,
    n_tokens: u32,
    row_offset: u32,
    out_stride: u32,
    _pad: [u32; 3],
}

fn shader_for(ty: GgmlType) -> Option<Shader> {
    Some(match ty {
        GgmlType::F32 => shaders::MATMUL_F32,
        GgmlType::Q8_0 => shaders::MATMUL_Q8_0,
        GgmlType::Q4_0 => shaders::MATMUL_Q4_0,
        GgmlType::Q4_1 => shaders::MATMUL_Q4_1,
        GgmlType::Q4K => shaders::MATMUL_Q4_K,
        GgmlType::Q6K => shaders::MATMUL_Q6_K,
        _ => return None,
    })
}

fn to_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::Gpu(format!(
            "{what} {n} does not fit the kernels' 32-bit indices"
        ))
    })
}

impl GpuMatrix {
    /// Uploads `m`: Q8_0, Q4_0, Q4_1, Q4_K and Q6_K blocks as they are
    /// (padded, see repack.rs), f32/f16/bf16 as f32. Other block types are
    /// an error naming the type.
    pub fn upload(ctx: &GpuContext, m: &Matrix) -> Result<GpuMatrix> {
        let (rows, cols) = (m.rows(), m.cols());
        to_u32(rows, "rows")?;
        to_u32(cols, "cols")?;
        let (ty, row_bytes) = match m {
            Matrix::F32 { .. } => (GgmlType::F32, cols * 4),
            Matrix::Quant {
                ty: GgmlType::F32 | GgmlType::F16 | GgmlType::BF16,
                ..
            } => (GgmlType::F32, cols * 4),
            Matrix::Quant { ty, .. } => {
                let layout = gpu_weight_layout(*ty).ok_or_else(|| {
                    Error::Gpu(format!(
                        "no GPU matmul kernel for {} weights (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)",
                        ty.name()
                    ))
                })?;
                (*ty, cols / ty.block_elems() * layout.block_words * 4)
            }
        };
        let shader = shader_for(ty)
            .ok_or_else(|| Error::Gpu(format!("no GPU matmul kernel for {}", ty.name())))?;
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
            chunks,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The kernel's weight type (`F32` for f32/f16/bf16 sources).
    pub fn weight_type(&self) -> GgmlType {
        self.ty
    }

    /// How many row chunks (buffers) the weights were split into.
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
        let groups_y = to_u32(n_tokens, "tokens")?.div_ceil(TOKENS_PER_THREAD);
        let max_groups = ctx.limits().max_compute_workgroups_per_dimension;
        if groups_y > max_groups {
            return Err(Error::Gpu(format!(
                "{n_tokens} tokens need {groups_y} workgroups, over the adapter's {max_groups} per dimension"
            )));
        }
        let pipeline = ctx.pipeline(&self.shader, "main", &[])?;
        let layout = pipeline.get_bind_group_layout(0);
        let y = GpuTensor::uninit(ctx, out_len)?;
        let mut params = Vec::with_capacity(self.chunks.len());
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("matmul"),
            });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("matmul"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            for c in &self.chunks {
                let p = Params {
                    rows: to_u32(c.rows, "rows")?,
                    cols: to_u32(self.cols, "cols")?,
                    n_tokens: to_u32(n_tokens, "tokens")?,
                    row_offset: to_u32(c.first_row, "rows")?,
                    out_stride: to_u32(self.rows, "rows")?,
                    _pad: [0; 3],
                };
                let ubuf = ctx
                    .pool
                    .acquire(Usage::Uniform, std::mem::size_of::<Params>() as u64)?;
                ctx.queue
                    .write_buffer(ubuf.buffer()?, 0, bytemuck::bytes_of(&p));
                let bind = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("matmul"),
                    layout: &layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: 0,
                            resource: c.buf.buffer.as_entire_binding(),
                        },
                        wgpu::BindGroupEntry {
                            binding: 1,
                            resource: x.binding()?,
                        },
                        wgpu::BindGroupEntry {
                            binding: 2,
                            resource: y.binding()?,
                        },
                        wgpu::BindGroupEntry {
                            binding: 3,
                            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                buffer: ubuf.buffer()?,
                                offset: 0,
                                size: wgpu::BufferSize::new(std::mem::size_of::<Params>() as u64),
                            }),
                        },
                    ],
                });
                let groups_x = p.rows.div_ceil(WG_ROWS);
                if groups_x > max_groups {
                    return Err(Error::Gpu(format!(
                        "{} rows need {groups_x} workgroups, over the adapter's {max_groups} per dimension",
                        c.rows
                    )));
                }
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(groups_x, groups_y, 1);
                params.push(ubuf);
            }
        }
        ctx.queue.submit([enc.finish()]);
        // The uniform buffers go back to the pool here; a later write to one
        // is ordered after this submission by the queue.
        drop(params);
        ctx.check()?;
        Ok(y)
    }

    /// Uploads `x`, multiplies and reads the result back.
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
    #[cfg(not(target_arch = "wasm32"))]
    pub fn matmul_slice(&self, ctx: &GpuContext, x: &[f32], n_tokens: usize) -> Result<Vec<f32>> {
        pollster::block_on(self.matmul_slice_async(ctx, x, n_tokens))
    }
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
                GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
                    let mut out = vec![0f32; n * cols];
                    for (o, s) in out
                        .chunks_exact_mut(cols.max(1))
                        .zip(src.chunks_exact(row_bytes.max(1)))
                    {
                        dequantize_row(*ty, s, o)?;
                    }
                    Ok(out.iter().map(|v| v.to_bits()).collect())
                }
                _ => Ok(interleave_rows(&repack_blocks(*ty, src)?, n)),
            }
        }
    }
}

/// Row-major words of `n` rows -> word-interleaved: word j of row r moves to
/// `j * n + r`, so the invocations of a workgroup (consecutive rows) read
/// consecutive words.
fn interleave_rows(words: &[u32], n: usize) -> Vec<u32> {
    let per_row = words.len().checked_div(n).unwrap_or(0);
    let mut out = vec![0u32; words.len()];
    for (r, row) in words.chunks_exact(per_row.max(1)).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            out[j * n + r] = v;
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
        assert_eq!(interleave_rows(&words, 3), vec![10, 20, 30, 11, 21, 31]);
        assert_eq!(interleave_rows(&words, 1), words.to_vec());
        assert!(interleave_rows(&[], 0).is_empty());
    }
}
