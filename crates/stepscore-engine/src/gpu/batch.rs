//! A batch of kernel dispatches recorded into one command encoder and
//! submitted once: how a whole forward pass becomes one submission.
//!
//! The dispatches' parameters share one uniform buffer per batch (a whole
//! forward pass: ~450 dispatches), each in its own slot of the adapter's
//! uniform offset alignment, staged on the host and written with
//! `queue.write_buffer` when the buffer is full or at submit (a batch of
//! more than `SLOTS` dispatches takes another buffer). Such writes take
//! effect at the next submit, before the batch's commands, so every buffer
//! written that way stays owned by the batch until it is submitted (a
//! pooled buffer released earlier could otherwise be handed out again and
//! overwritten before the dispatch that still reads it).

use super::act_layout::{ActKind, ACT_KINDS};
use super::context::GpuContext;
use super::pool::{PooledBuffer, Usage};
use super::shaders::Shader;
use crate::error::{Error, Result};

/// Invocations per workgroup of every elementwise kernel.
pub(crate) const WG: u32 = 64;

/// Parameter slots per uniform buffer.
const SLOTS: u64 = 1024;

pub(crate) struct Batch<'a> {
    pub(crate) ctx: &'a GpuContext,
    enc: wgpu::CommandEncoder,
    keep: Vec<PooledBuffer>,
    /// The uniform buffer being filled, its staged bytes and the slot size.
    params: Option<(wgpu::Buffer, Vec<u8>)>,
    slot: u64,
    /// One buffer of 8-bit activations per form (act.rs), reused by every
    /// matmul the batch records: its dispatches run in order.
    acts: [Option<(wgpu::Buffer, u64)>; ACT_KINDS],
    /// The intermediate buffer [`Batch::scratch`] hands out, and its size.
    scratch: Option<(wgpu::Buffer, u64)>,
}

/// Converts a size or index to the kernels' 32-bit words.
pub(crate) fn u32_of(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::Gpu(format!(
            "{what} {n} does not fit the kernels' 32-bit indices"
        ))
    })
}

impl<'a> Batch<'a> {
    pub fn new(ctx: &'a GpuContext, label: &str) -> Batch<'a> {
        let enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        // Every kernel's parameters fit 64 bytes; slots start at offsets
        // the adapter can bind.
        let slot = u64::from(ctx.limits().min_uniform_buffer_offset_alignment).max(64);
        Batch {
            ctx,
            enc,
            keep: Vec::new(),
            params: None,
            slot,
            acts: Default::default(),
            scratch: None,
        }
    }

    /// Stages `words` in the next parameter slot: the uniform buffer and the
    /// slot's offset.
    fn param_slot(&mut self, words: &[u32]) -> Result<(wgpu::Buffer, u64)> {
        let bytes: &[u8] = bytemuck::cast_slice(words);
        if bytes.len() as u64 > self.slot {
            return Err(Error::Internal(format!(
                "{} bytes of kernel parameters is over the {}-byte slot",
                bytes.len(),
                self.slot
            )));
        }
        if matches!(&self.params, Some((_, staged)) if staged.len() as u64 >= SLOTS * self.slot) {
            self.flush_params()?;
        }
        if self.params.is_none() {
            let buf = self.ctx.pool.acquire(Usage::Uniform, SLOTS * self.slot)?;
            let handle = buf.buffer()?.clone();
            self.keep.push(buf);
            self.params = Some((handle, Vec::new()));
        }
        let slot = self.slot as usize;
        let (buf, staged) = self
            .params
            .as_mut()
            .ok_or_else(|| Error::Internal("no parameter buffer".into()))?;
        let offset = staged.len() as u64;
        staged.extend_from_slice(bytes);
        staged.resize(offset as usize + slot, 0);
        Ok((buf.clone(), offset))
    }

    /// Writes the staged parameters into their buffer (at the next submit,
    /// before any command) and starts a new one on the next dispatch.
    fn flush_params(&mut self) -> Result<()> {
        if let Some((buf, staged)) = self.params.take() {
            self.ctx.queue.write_buffer(&buf, 0, &staged);
        }
        Ok(())
    }

    /// The batch's buffer for 8-bit activations of `kind`, with room for
    /// `bytes` (a bigger one replaces it when needed; both live until submit).
    pub fn act_buffer(&mut self, kind: ActKind, bytes: u64) -> Result<wgpu::Buffer> {
        let slot = &mut self.acts[kind as usize];
        if let Some((buf, size)) = slot {
            if *size >= bytes {
                return Ok(buf.clone());
            }
        }
        let pooled = self.ctx.pool.acquire(Usage::Storage, bytes.max(4))?;
        let buf = pooled.buffer()?.clone();
        self.keep.push(pooled);
        *slot = Some((buf.clone(), bytes.max(4)));
        Ok(buf)
    }

    /// Uploads `data` into a pooled storage buffer owned by the batch.
    pub fn upload(&mut self, data: &[u8]) -> Result<wgpu::Buffer> {
        let buf = self.ctx.upload_storage(data)?;
        let handle = buf.buffer()?.clone();
        self.keep.push(buf);
        Ok(handle)
    }

    /// A storage buffer of at least `bytes` for an intermediate that one
    /// dispatch writes and the next reads (the 16-bit activations of a float
    /// matmul). Every call returns the same buffer while it is large enough:
    /// the batch's dispatches run in order, so it is rewritten only after
    /// its last reader, and a forward pass holds one instead of one per
    /// matmul.
    pub fn scratch(&mut self, bytes: u64) -> Result<wgpu::Buffer> {
        if let Some((buf, size)) = &self.scratch {
            if *size >= bytes {
                return Ok(buf.clone());
            }
        }
        let buf = self.ctx.pool.acquire(Usage::Storage, bytes.max(4))?;
        let handle = buf.buffer()?.clone();
        self.keep.push(buf);
        self.scratch = Some((handle.clone(), bytes));
        Ok(handle)
    }

    /// Records `dst[dst_offset..] = src[src_offset..][..size]` (bytes, 4-aligned).
    pub fn copy(
        &mut self,
        src: &wgpu::Buffer,
        src_offset: u64,
        dst: &wgpu::Buffer,
        dst_offset: u64,
        size: u64,
    ) {
        if size > 0 {
            self.enc
                .copy_buffer_to_buffer(src, src_offset, dst, dst_offset, size);
        }
    }

    /// Records one dispatch of `shader`'s `main`: storage bindings 0.. in
    /// order, then the parameters (u32 words, f32 as bits) as a uniform
    /// buffer at the next binding.
    pub fn dispatch(
        &mut self,
        shader: &Shader,
        storage: &[wgpu::BindingResource<'_>],
        params: &[u32],
        groups: [u32; 3],
    ) -> Result<()> {
        if groups.contains(&0) {
            return Ok(());
        }
        let max = self.ctx.limits().max_compute_workgroups_per_dimension;
        if groups.iter().any(|&g| g > max) {
            return Err(Error::Gpu(format!(
                "{}: {groups:?} workgroups is over the adapter's {max} per dimension",
                shader.name
            )));
        }
        let pipeline = self.ctx.pipeline(shader, "main", &[])?;
        let layout = pipeline.get_bind_group_layout(0);
        // Uniform structs are padded to 16 bytes.
        let mut words = params.to_vec();
        words.resize(params.len().div_ceil(4).max(1) * 4, 0);
        let (ubuf, offset) = self.param_slot(&words)?;
        let mut entries: Vec<wgpu::BindGroupEntry<'_>> = storage
            .iter()
            .enumerate()
            .map(|(i, r)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: r.clone(),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: storage.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &ubuf,
                offset,
                size: wgpu::BufferSize::new(words.len() as u64 * 4),
            }),
        });
        let bind = self
            .ctx
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(shader.name),
                layout: &layout,
                entries: &entries,
            });
        {
            let mut pass = self.enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(shader.name),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
        }
        Ok(())
    }

    /// Records an elementwise kernel over `n` values: 64 per workgroup,
    /// spread over a second dimension past the per-dimension limit.
    pub fn dispatch_flat(
        &mut self,
        shader: &Shader,
        storage: &[wgpu::BindingResource<'_>],
        params: &[u32],
        n: usize,
    ) -> Result<()> {
        let groups = u32_of(n.div_ceil(WG as usize), "elements")?;
        let max = self.ctx.limits().max_compute_workgroups_per_dimension;
        let x = groups.min(max);
        let y = groups.div_ceil(x.max(1));
        self.dispatch(shader, storage, params, [x, y, 1])
    }

    /// Submits everything recorded, then releases what the batch held.
    pub fn submit(mut self) -> Result<wgpu::SubmissionIndex> {
        self.flush_params()?;
        let index = self.ctx.queue.submit([self.enc.finish()]);
        drop(self.keep);
        self.ctx.check()?;
        Ok(index)
    }
}

/// Binding of a whole buffer.
pub(crate) fn whole(buf: &wgpu::Buffer) -> wgpu::BindingResource<'_> {
    buf.as_entire_binding()
}
