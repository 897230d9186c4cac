//! Test support (feature `testing`, on for this crate's own tests through
//! its dev-dependency on itself): where the suites find the cached SmolLM2
//! GGUF and the other catalog models. The GGUF writer (`format::GgufWriter`) and the GPU engine's
//! one-kernel-per-call reference ops (`gpu::ops`) are behind the same
//! feature: they exist for tests and fixtures, not as API.

use std::path::PathBuf;

/// Where the SmolLM2 GGUF is expected: `$STEPSCORE_SMOLLM2_GGUF` when set,
/// otherwise the `smollm2-135m` catalog entry's file in the model cache.
/// Returns the path only if a file exists there.
pub fn find_smollm2_gguf() -> Option<PathBuf> {
    match std::env::var_os("STEPSCORE_SMOLLM2_GGUF").filter(|v| !v.is_empty()) {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => find_catalog_model("smollm2-135m"),
    }
}

/// The cached file of catalog model `name` (`stepscore fetch NAME` puts it
/// there), if it has been fetched. Panics on a name the catalog lacks: that
/// is a bug in the test, not a missing file.
pub fn find_catalog_model(name: &str) -> Option<PathBuf> {
    let entry = crate::catalog::get(name).unwrap_or_else(|| panic!("no catalog model {name}"));
    let path = entry.file.path_in(&crate::catalog::cache_dir()?);
    path.is_file().then_some(path)
}
