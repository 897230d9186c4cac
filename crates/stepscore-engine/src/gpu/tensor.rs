//! f32 arrays on the device: kernel inputs and outputs.

use super::context::GpuContext;
use super::pool::{PooledBuffer, Usage};
use crate::error::{Error, Result};

/// `len` f32 values in a (pooled) device buffer, which may be larger.
pub struct GpuTensor {
    pub(crate) buf: PooledBuffer,
    len: usize,
}

impl GpuTensor {
    /// Uploads `data`.
    pub fn from_slice(ctx: &GpuContext, data: &[f32]) -> Result<GpuTensor> {
        check_binding(ctx, data.len(), "input tensor")?;
        let buf = ctx.upload_storage(bytemuck::cast_slice(data))?;
        Ok(GpuTensor {
            buf,
            len: data.len(),
        })
    }

    /// `len` values, zeroed.
    pub fn zeros(ctx: &GpuContext, len: usize) -> Result<GpuTensor> {
        let t = Self::uninit(ctx, len)?;
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("zeros"),
            });
        enc.clear_buffer(t.buf.buffer()?, 0, None);
        ctx.queue.submit([enc.finish()]);
        Ok(t)
    }

    /// `len` values with unspecified contents (a kernel output).
    pub(crate) fn uninit(ctx: &GpuContext, len: usize) -> Result<GpuTensor> {
        check_binding(ctx, len, "output tensor")?;
        let buf = ctx.pool.acquire(Usage::Storage, len as u64 * 4)?;
        Ok(GpuTensor { buf, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.len as u64 * 4
    }

    /// The binding of exactly this tensor's values.
    pub(crate) fn binding(&self) -> Result<wgpu::BindingResource<'_>> {
        let size = wgpu::BufferSize::new(self.bytes())
            .ok_or_else(|| Error::Gpu("an empty tensor cannot be bound".into()))?;
        Ok(wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: self.buf.buffer()?,
            offset: 0,
            size: Some(size),
        }))
    }

    /// Copies the values back to the host.
    pub async fn to_vec_async(&self, ctx: &GpuContext) -> Result<Vec<f32>> {
        self.range_async(ctx, 0..self.len).await
    }

    /// Copies the values `range` back to the host (and only those).
    pub(crate) async fn range_async(
        &self,
        ctx: &GpuContext,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<f32>> {
        if range.start > range.end || range.end > self.len {
            return Err(Error::InvalidArgument(format!(
                "values {range:?} of a tensor of {}",
                self.len
            )));
        }
        let bytes = ctx
            .read_range_async(
                self.buf.buffer()?,
                range.start as u64 * 4,
                range.len() as u64 * 4,
            )
            .await?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// Blocking [`GpuTensor::to_vec_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn to_vec(&self, ctx: &GpuContext) -> Result<Vec<f32>> {
        pollster::block_on(self.to_vec_async(ctx))
    }
}

/// A tensor must fit one storage binding.
fn check_binding(ctx: &GpuContext, len: usize, what: &str) -> Result<()> {
    let bytes = (len as u64).checked_mul(4);
    match bytes {
        Some(b) if b <= ctx.adapter_binding_limit() => Ok(()),
        _ => Err(Error::Gpu(format!(
            "{what} of {len} f32 values is over the adapter's storage binding limit of {} bytes",
            ctx.adapter_binding_limit()
        ))),
    }
}
