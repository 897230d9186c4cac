//! Adapter reports and the choice between adapters: discrete before
//! integrated before virtual before software, unless the user names one.

use crate::error::{Error, Result};

/// Environment variable: a case-insensitive substring of the adapter name to
/// use (e.g. `llvmpipe`, `NVIDIA`).
pub const ADAPTER_ENV: &str = "STEPSCORE_ADAPTER";

/// The kind of device behind an adapter, most preferred first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceKind {
    Discrete,
    Integrated,
    Virtual,
    Other,
    /// A software rasterizer (llvmpipe, SwiftShader, WARP).
    Cpu,
}

impl DeviceKind {
    pub fn from_wgpu(t: wgpu::DeviceType) -> Self {
        match t {
            wgpu::DeviceType::DiscreteGpu => DeviceKind::Discrete,
            wgpu::DeviceType::IntegratedGpu => DeviceKind::Integrated,
            wgpu::DeviceType::VirtualGpu => DeviceKind::Virtual,
            wgpu::DeviceType::Cpu => DeviceKind::Cpu,
            wgpu::DeviceType::Other => DeviceKind::Other,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Discrete => "discrete GPU",
            DeviceKind::Integrated => "integrated GPU",
            DeviceKind::Virtual => "virtual GPU",
            DeviceKind::Other => "other",
            DeviceKind::Cpu => "CPU (software)",
        }
    }
}

/// The optional features the engine cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureReport {
    pub shader_f16: bool,
    pub subgroups: bool,
}

/// The limits the engine's kernels depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitsReport {
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_workgroup_size_x: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub max_compute_workgroup_storage_size: u32,
}

impl LimitsReport {
    pub fn from_wgpu(l: &wgpu::Limits) -> Self {
        LimitsReport {
            max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
            max_buffer_size: l.max_buffer_size,
            max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
            max_compute_workgroup_size_x: l.max_compute_workgroup_size_x,
            max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
            max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
        }
    }
}

/// One adapter as the engine sees it, and (for the chosen one) why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdapterReport {
    pub name: String,
    /// `Vulkan`, `Metal`, `Dx12`, `Gl`, `BrowserWebGpu`.
    pub backend: String,
    pub device_type: DeviceKind,
    pub driver: String,
    pub features: FeatureReport,
    pub limits: LimitsReport,
    /// Why this adapter was chosen (empty in plain listings).
    pub reason: String,
}

impl AdapterReport {
    pub fn from_adapter(adapter: &wgpu::Adapter) -> Self {
        let info = adapter.get_info();
        let features = adapter.features();
        let driver = match (info.driver.is_empty(), info.driver_info.is_empty()) {
            (false, false) => format!("{} ({})", info.driver, info.driver_info),
            (false, true) => info.driver.clone(),
            _ => info.driver_info.clone(),
        };
        AdapterReport {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            device_type: DeviceKind::from_wgpu(info.device_type),
            driver,
            features: FeatureReport {
                shader_f16: features.contains(wgpu::Features::SHADER_F16),
                subgroups: features.contains(wgpu::Features::SUBGROUP),
            },
            limits: LimitsReport::from_wgpu(&adapter.limits()),
            reason: String::new(),
        }
    }
}

impl std::fmt::Display for AdapterReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}, {}; shader-f16: {}, subgroups: {}; max storage binding {} B, max buffer {} B, \
             max workgroup size x {})",
            self.name,
            self.backend,
            self.device_type.name(),
            yes_no(self.features.shader_f16),
            yes_no(self.features.subgroups),
            self.limits.max_storage_buffer_binding_size,
            self.limits.max_buffer_size,
            self.limits.max_compute_workgroup_size_x,
        )?;
        if !self.reason.is_empty() {
            write!(f, ": {}", self.reason)?;
        }
        Ok(())
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// Picks an adapter among `candidates`: the first whose name contains
/// `filter` (case-insensitive) when one is given, else the best device
/// kind (ties: the first listed). Returns its index and the reason.
pub fn choose(candidates: &[AdapterReport], filter: Option<&str>) -> Result<(usize, String)> {
    if candidates.is_empty() {
        return Err(Error::Gpu(
            "no GPU adapter found (on Linux, install mesa-vulkan-drivers for the llvmpipe software adapter)"
                .into(),
        ));
    }
    let names = || {
        candidates
            .iter()
            .map(|a| format!("{} [{}, {}]", a.name, a.backend, a.device_type.name()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if let Some(filter) = filter.filter(|f| !f.is_empty()) {
        let needle = filter.to_lowercase();
        return match candidates.iter().position(|a| a.name.to_lowercase().contains(&needle)) {
            Some(i) => Ok((i, format!("its name matches {ADAPTER_ENV}/adapter filter `{filter}`"))),
            None => Err(Error::Gpu(format!(
                "no adapter name contains `{filter}` (from {ADAPTER_ENV} or the adapter option); available: {}",
                names()
            ))),
        };
    }
    let (best, _) = candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, a)| (a.device_type, *i))
        .ok_or_else(|| Error::Gpu("no adapter to choose from".into()))?;
    let reason = if candidates.len() == 1 {
        format!("the only adapter ({})", candidates[best].device_type.name())
    } else {
        format!(
            "preferred {} (order: discrete, integrated, virtual, other, software) among: {}",
            candidates[best].device_type.name(),
            names()
        )
    };
    Ok((best, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(name: &str, kind: DeviceKind) -> AdapterReport {
        AdapterReport {
            name: name.into(),
            backend: "Vulkan".into(),
            device_type: kind,
            driver: String::new(),
            features: FeatureReport {
                shader_f16: false,
                subgroups: false,
            },
            limits: LimitsReport::from_wgpu(&wgpu::Limits::downlevel_defaults()),
            reason: String::new(),
        }
    }

    #[test]
    fn prefers_discrete_then_integrated_then_software() {
        let c = [
            report("llvmpipe (LLVM 15.0.6, 256 bits)", DeviceKind::Cpu),
            report("Intel UHD", DeviceKind::Integrated),
            report("NVIDIA H200", DeviceKind::Discrete),
        ];
        assert_eq!(choose(&c, None).unwrap().0, 2);
        assert_eq!(choose(&c[..2], None).unwrap().0, 1);
        assert_eq!(choose(&c[..1], None).unwrap().0, 0);
    }

    #[test]
    fn filter_overrides_preference_and_names_the_choices_when_nothing_matches() {
        let c = [
            report("NVIDIA H200", DeviceKind::Discrete),
            report("llvmpipe", DeviceKind::Cpu),
        ];
        let (i, why) = choose(&c, Some("LLVMPIPE")).unwrap();
        assert_eq!(i, 1);
        assert!(why.contains("LLVMPIPE"), "{why}");
        let err = choose(&c, Some("radeon")).unwrap_err().to_string();
        assert!(
            err.contains("radeon") && err.contains("NVIDIA H200") && err.contains("llvmpipe"),
            "{err}"
        );
        assert!(choose(&[], None).is_err());
    }
}
