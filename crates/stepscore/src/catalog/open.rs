//! Opening a scorer from a model argument: the one path of every native
//! front end (the CLI's `--model`/`--head`, Python's `Scorer(model, head=...)`).
//! A model argument is a file, a directory or a catalog name
//! ([`super::model_arg`]); a catalog model is fetched into the cache when it
//! is not there, and a catalog PRM brings its built-in head
//! ([`Entry::head_source`]).

use std::path::{Path, PathBuf};

use super::fetch::{self, Progress};
use super::{cache_dir, model_arg, Entry, ModelArg};
use crate::prm::{HeadSource, Scorer, ScorerOptions};
use crate::{Error, Result};

/// A scorer and what it was opened from, for reports.
#[derive(Debug)]
pub struct Opened {
    pub scorer: Scorer,
    /// The model file or directory read.
    pub path: PathBuf,
    /// The catalog entry, when the argument named one.
    pub entry: Option<&'static Entry>,
    /// The head applied from outside the checkpoint: a head file's path or
    /// a built-in head's name.
    pub head: Option<String>,
}

impl Opened {
    /// The model as a person reads it: `name (path)` for a catalog model,
    /// else the path; with the head applied, if any.
    pub fn label(&self) -> String {
        let model = match self.entry {
            Some(e) => format!("{} ({})", e.name, self.path.display()),
            None => self.path.display().to_string(),
        };
        match (&self.head, self.entry.and_then(Entry::head)) {
            (Some(h), Some(builtin)) if h == builtin => format!("{model} + built-in head {h}"),
            (Some(h), _) => format!("{model} + head {h}"),
            (None, _) => model,
        }
    }
}

/// Opens `model` (a path, a catalog name, or `None`: the default PRM) with
/// the head from `head` and `options`. A catalog model not yet in the cache
/// ([`cache_dir`]) is fetched, `progress` seeing what the fetch does.
/// Errors: an unknown name or a missing file (see [`model_arg`]), a failed
/// fetch, and whatever [`Scorer::open_with`] refuses.
///
/// ```
/// use stepscore::catalog;
/// use stepscore::prm::{HeadSource, ScorerOptions};
///
/// let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/prm/skywork-prm-tiny");
/// let opened = catalog::open(
///     Some(dir.as_ref()),
///     HeadSource::Checkpoint,
///     &ScorerOptions::default(),
///     &mut |_, _| {},
/// )?;
/// assert!(opened.entry.is_none() && opened.head.is_none());
/// assert_eq!(opened.scorer.score_steps("1 + 1?", &["2."])?.step_scores.len(), 1);
/// # Ok::<(), stepscore::Error>(())
/// ```
pub fn open(
    model: Option<&Path>,
    head: HeadSource,
    options: &ScorerOptions,
    progress: &mut dyn FnMut(&Entry, Progress),
) -> Result<Opened> {
    let (path, entry) = match model_arg(model)? {
        ModelArg::Path(path) => (path, None),
        ModelArg::Entry(entry) => (
            fetch_entry(entry, &mut |p| progress(entry, p))?,
            Some(entry),
        ),
    };
    let head = match entry {
        Some(e) => e.head_source(head, options)?,
        None => head,
    };
    let head_name = match &head {
        HeadSource::File(p) => Some(p.display().to_string()),
        HeadSource::Loaded(file) => Some(file.name().to_string()),
        HeadSource::Checkpoint | HeadSource::Backbone => None,
    };
    let scorer = Scorer::open_with(&path, &head, options)?;
    Ok(Opened {
        scorer,
        path,
        entry,
        head: head_name,
    })
}

/// The verified cached file of `entry`, fetched when missing.
pub fn fetch_entry(entry: &Entry, progress: &mut dyn FnMut(Progress)) -> Result<PathBuf> {
    let dir = cache_dir().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "no cache directory for the catalog model {}: set STEPSCORE_CACHE (or \
             XDG_CACHE_HOME or HOME), or name a model file",
            entry.name
        ))
    })?;
    fetch::ensure(&entry.file, &dir, false, progress)
}
