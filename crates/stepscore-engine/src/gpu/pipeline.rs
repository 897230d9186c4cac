//! Compute pipelines, built once per (shader, entry point, override
//! constants) and reused: building one compiles WGSL to the backend's code,
//! which costs far more than a dispatch.

use std::collections::HashMap;
use std::sync::Mutex;

use super::shaders::Shader;

/// Override constants as (name, value bits), so keys are hashable.
type Key = (&'static str, String, Vec<(String, u64)>);

#[derive(Default)]
pub(crate) struct PipelineCache {
    modules: Mutex<HashMap<&'static str, wgpu::ShaderModule>>,
    pipelines: Mutex<HashMap<Key, wgpu::ComputePipeline>>,
}

fn lock<K, V>(m: &Mutex<HashMap<K, V>>) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PipelineCache {
    pub fn get(
        &self,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> Option<wgpu::ComputePipeline> {
        lock(&self.pipelines)
            .get(&key(shader, entry, constants))
            .cloned()
    }

    /// Builds the pipeline (and the shader module, once). The caller checks
    /// the device's error state before calling [`PipelineCache::insert`].
    pub fn build(
        &self,
        device: &wgpu::Device,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
    ) -> wgpu::ComputePipeline {
        let module = lock(&self.modules)
            .entry(shader.name)
            .or_insert_with(|| {
                device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(shader.name),
                    source: wgpu::ShaderSource::Wgsl(shader.source().into()),
                })
            })
            .clone();
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(shader.name),
            layout: None,
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        })
    }

    pub fn insert(
        &self,
        shader: &Shader,
        entry: &str,
        constants: &[(&str, f64)],
        p: wgpu::ComputePipeline,
    ) {
        lock(&self.pipelines).insert(key(shader, entry, constants), p);
    }

    /// Drops a shader module that failed to build, so a later call retries.
    pub fn forget_module(&self, shader: &Shader) {
        lock(&self.modules).remove(shader.name);
    }

    pub fn len(&self) -> usize {
        lock(&self.pipelines).len()
    }
}

fn key(shader: &Shader, entry: &str, constants: &[(&str, f64)]) -> Key {
    (
        shader.name,
        entry.to_string(),
        constants
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_bits()))
            .collect(),
    )
}
