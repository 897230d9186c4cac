//! `stepscore doctor`: every GPU adapter wgpu finds, with its backend,
//! device type, features and the limits the engine depends on, what
//! `--backend auto` would choose and why, the CPU (x86-64: vendor, family,
//! model, microarchitecture) and the CPU engine's kernels (the
//! instruction set `Simd::detect` chose), and the decoder architectures and
//! PRM families this build runs.

use std::io::Write;

use stepscore::engine::{Arch, CpuModel, Float16Path, GpuContext, Simd, SIMD_ENV};
use stepscore::prm::{auto_preference, Backend, Family};

use crate::Failure;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let adapters = GpuContext::adapters(None);
    let auto = auto_preference();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let io = crate::output::stdout_error;
    if args.json {
        let list: Vec<serde_json::Value> = adapters
            .iter()
            .map(|a| {
                serde_json::json!({
                    "name": a.name,
                    "backend": a.backend,
                    "device_type": a.device_type.name(),
                    "driver": a.driver,
                    "shader_f16": a.features.shader_f16,
                    "float16_path": Float16Path::for_device(a.features.shader_f16).describe(),
                    "subgroups": a.features.subgroups,
                    "max_storage_buffer_binding_size": a.limits.max_storage_buffer_binding_size,
                    "max_buffer_size": a.limits.max_buffer_size,
                    "max_storage_buffers_per_shader_stage": a.limits.max_storage_buffers_per_shader_stage,
                    "max_compute_workgroup_size_x": a.limits.max_compute_workgroup_size_x,
                    "max_compute_invocations_per_workgroup": a.limits.max_compute_invocations_per_workgroup,
                    "max_compute_workgroups_per_dimension": a.limits.max_compute_workgroups_per_dimension,
                    "max_compute_workgroup_storage_size": a.limits.max_compute_workgroup_storage_size,
                })
            })
            .collect();
        let value = serde_json::json!({
            "cpu_kernels": Simd::detect().name(),
            "cpu": CpuModel::detect().map(|c| serde_json::json!({
                "vendor": c.vendor,
                "family": c.family,
                "model": c.model,
                "brand": c.brand,
                "microarchitecture": c.microarchitecture(),
            })),
            "architectures": Arch::ALL.iter().map(Arch::name).collect::<Vec<_>>(),
            "families": Family::ALL.iter().map(Family::name).collect::<Vec<_>>(),
            "adapters": list,
            "auto": {
                "backend": auto.chosen.name(),
                "adapter": auto.adapter,
                "reason": auto.reason,
            },
        });
        writeln!(out, "{value}").map_err(io)?;
        return Ok(());
    }
    if adapters.is_empty() {
        writeln!(
            out,
            "no GPU adapter found (on Linux, install mesa-vulkan-drivers for the llvmpipe software adapter)"
        )
        .map_err(io)?;
    }
    for (i, a) in adapters.iter().enumerate() {
        let l = &a.limits;
        writeln!(out, "adapter {i}: {}", a.name).map_err(io)?;
        writeln!(out, "  backend:        {}", a.backend).map_err(io)?;
        writeln!(out, "  device type:    {}", a.device_type.name()).map_err(io)?;
        if !a.driver.is_empty() {
            writeln!(out, "  driver:         {}", a.driver).map_err(io)?;
        }
        writeln!(
            out,
            "  features:       shader-f16 {}, subgroups {}",
            yes(a.features.shader_f16),
            yes(a.features.subgroups)
        )
        .map_err(io)?;
        writeln!(
            out,
            "  16-bit weights: {}",
            Float16Path::for_device(a.features.shader_f16).describe()
        )
        .map_err(io)?;
        writeln!(
            out,
            "  limits:         storage binding {} B, buffer {} B, {} storage buffers/stage, \
             workgroup size x {}, {} invocations/workgroup, {} workgroups/dimension, \
             {} B workgroup memory",
            l.max_storage_buffer_binding_size,
            l.max_buffer_size,
            l.max_storage_buffers_per_shader_stage,
            l.max_compute_workgroup_size_x,
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroups_per_dimension,
            l.max_compute_workgroup_storage_size
        )
        .map_err(io)?;
    }
    let on = auto
        .adapter
        .as_deref()
        .filter(|_| auto.chosen == Backend::Gpu)
        .map_or_else(String::new, |a| format!(" on {a}"));
    writeln!(
        out,
        "--backend auto would use: {}{on} ({})",
        auto.chosen, auto.reason
    )
    .map_err(io)?;
    if let Some(cpu) = CpuModel::detect() {
        writeln!(out, "CPU:            {}", cpu.describe()).map_err(io)?;
    }
    writeln!(
        out,
        "CPU kernels:    {} ({} on {}; {SIMD_ENV} caps it)",
        Simd::detect().name(),
        std::env::consts::ARCH,
        std::env::consts::OS
    )
    .map_err(io)?;
    let names = |v: Vec<&str>| v.join(", ");
    writeln!(
        out,
        "architectures:  {}",
        names(Arch::ALL.iter().map(Arch::name).collect())
    )
    .map_err(io)?;
    writeln!(
        out,
        "PRM families:   {}",
        names(Family::ALL.iter().map(Family::name).collect())
    )
    .map_err(io)?;
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
