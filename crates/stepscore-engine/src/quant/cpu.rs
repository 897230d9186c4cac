//! Which CPU this is (x86-64 CPUID: vendor, family, model, brand string),
//! and the microarchitecture's name where it is one the kernels were
//! measured on (docs/BENCHMARKS.md names each figure's CPU this way).
//! `stepscore doctor` prints it beside the kernels [`super::Simd`] chose.

/// The CPU's identity as CPUID reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuModel {
    /// "AuthenticAMD", "GenuineIntel", ...
    pub vendor: String,
    /// Display family and model (the extended fields folded in, as `lscpu` shows them).
    pub family: u32,
    pub model: u32,
    /// The marketing name, e.g. "AMD EPYC" (empty where the CPU gives none).
    pub brand: String,
}

impl CpuModel {
    /// This CPU; `None` off x86-64 (no CPUID).
    pub fn detect() -> Option<CpuModel> {
        #[cfg(target_arch = "x86_64")]
        {
            Some(x86())
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            None
        }
    }

    /// The microarchitecture, for the families this project has measured
    /// or that share their kernels' trade-offs; `None` for others.
    pub fn microarchitecture(&self) -> Option<&'static str> {
        let (f, m) = (self.family, self.model);
        match self.vendor.as_str() {
            "AuthenticAMD" => match f {
                0x17 => Some("Zen / Zen 2"),
                0x19 => Some(match m {
                    0x10..=0x1f | 0x60..=0x7f | 0xa0..=0xaf => "Zen 4",
                    _ => "Zen 3",
                }),
                0x1a => Some("Zen 5"),
                _ => None,
            },
            "GenuineIntel" if f == 6 => match m {
                0x55 => Some("Skylake-SP / Cascade Lake"),
                0x6a | 0x6c => Some("Ice Lake-SP"),
                0x8f => Some("Sapphire Rapids"),
                0xcf => Some("Emerald Rapids"),
                0xad | 0xae => Some("Granite Rapids"),
                _ => None,
            },
            _ => None,
        }
    }

    /// "AMD EPYC (AuthenticAMD family 26 model 2: Zen 5)".
    pub fn describe(&self) -> String {
        let arch = self
            .microarchitecture()
            .map_or_else(String::new, |a| format!(": {a}"));
        let id = format!(
            "{} family {} model {}{arch}",
            self.vendor, self.family, self.model
        );
        if self.brand.is_empty() {
            id
        } else {
            format!("{} ({id})", self.brand)
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn x86() -> CpuModel {
    use std::arch::x86_64::__cpuid;
    let bytes = |regs: &[u32]| -> String {
        let raw: Vec<u8> = regs.iter().flat_map(|r| r.to_le_bytes()).collect();
        String::from_utf8_lossy(&raw)
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string()
    };
    // CPUID exists on every x86-64 CPU; leaves above the reported maximum
    // are not queried.
    {
        let l0 = __cpuid(0);
        let vendor = bytes(&[l0.ebx, l0.edx, l0.ecx]);
        let (family, model) = if l0.eax >= 1 {
            let a = __cpuid(1).eax;
            let base_family = (a >> 8) & 0xf;
            let mut model = (a >> 4) & 0xf;
            let mut family = base_family;
            if base_family == 0xf {
                family += (a >> 20) & 0xff;
            }
            if base_family == 0x6 || base_family == 0xf {
                model += ((a >> 16) & 0xf) << 4;
            }
            (family, model)
        } else {
            (0, 0)
        };
        let brand = if __cpuid(0x8000_0000).eax >= 0x8000_0004 {
            let regs: Vec<u32> = (0x8000_0002u32..=0x8000_0004)
                .flat_map(|leaf| {
                    let r = __cpuid(leaf);
                    [r.eax, r.ebx, r.ecx, r.edx]
                })
                .collect();
            bytes(&regs)
        } else {
            String::new()
        };
        CpuModel {
            vendor,
            family,
            model,
            brand,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CpuModel;

    fn cpu(vendor: &str, family: u32, model: u32) -> CpuModel {
        CpuModel {
            vendor: vendor.into(),
            family,
            model,
            brand: String::new(),
        }
    }

    /// The machines docs/BENCHMARKS.md measured, by their `lscpu` family and model.
    #[test]
    fn the_measured_machines_are_named() {
        assert_eq!(
            cpu("AuthenticAMD", 26, 2).microarchitecture(),
            Some("Zen 5")
        );
        assert_eq!(
            cpu("AuthenticAMD", 25, 17).microarchitecture(),
            Some("Zen 4")
        );
        assert_eq!(
            cpu("GenuineIntel", 6, 207).microarchitecture(),
            Some("Emerald Rapids")
        );
        assert_eq!(
            cpu("GenuineIntel", 6, 143).microarchitecture(),
            Some("Sapphire Rapids")
        );
        assert_eq!(cpu("GenuineIntel", 6, 1).microarchitecture(), None);
        assert_eq!(
            cpu("AuthenticAMD", 26, 2).describe(),
            "AuthenticAMD family 26 model 2: Zen 5"
        );
    }

    /// On x86-64 this CPU answers with a vendor and a family.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn this_cpu_reports_a_vendor_and_family() {
        let c = CpuModel::detect().expect("x86-64 has CPUID");
        assert!(!c.vendor.is_empty() && c.family > 0, "{c:?}");
    }
}
