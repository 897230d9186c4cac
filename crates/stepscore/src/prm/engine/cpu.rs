//! The CPU engine: the decoder and the head run on the host, the KV cache
//! in host memory.

use super::need_head;
use crate::engine::KvCache;
use crate::engine::{Hidden, Taps, Transformer};
use crate::prm::head::{Head, HeadOutput};
use crate::prm::template::Encoded;
use crate::Result;

pub(super) struct CpuEngine;

impl CpuEngine {
    pub fn new_cache(&self, model: &Transformer) -> KvCache {
        model.new_cache()
    }

    pub fn forward(
        &self,
        model: &Transformer,
        tokens: &[u32],
        cache: Option<&mut KvCache>,
        taps: &[usize],
    ) -> Result<Taps<Hidden>> {
        model.forward_tapped(tokens, cache, taps)
    }

    pub async fn run(
        &self,
        model: &Transformer,
        head: Option<&Head>,
        tokens: &[u32],
        cache: Option<&mut KvCache>,
        enc: Option<&Encoded>,
        taps: &[usize],
    ) -> Result<Option<HeadOutput>> {
        let hidden = model.forward_tapped(tokens, cache, taps)?;
        match enc {
            Some(e) => Ok(Some(need_head(head)?.apply(model, &hidden, e).await?)),
            None => Ok(None),
        }
    }

    /// Every part's rows in one forward pass, then the head over each
    /// part's own states.
    pub async fn run_batch(
        &self,
        model: &Transformer,
        head: &Head,
        tokens: &[&[u32]],
        caches: &mut [&mut KvCache],
        encs: &[&Encoded],
        taps: &[usize],
    ) -> Result<Vec<HeadOutput>> {
        let states = model.forward_batch(tokens, caches, taps)?;
        let mut out = Vec::with_capacity(states.len());
        for (s, enc) in states.iter().zip(encs) {
            out.push(head.apply(model, s, enc).await?);
        }
        Ok(out)
    }
}
