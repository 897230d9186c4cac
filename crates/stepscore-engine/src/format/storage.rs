//! The bytes of a model file. Natively a read-only memory map, so a 100 MB
//! checkpoint costs no copy and pages in lazily; in wasm (no mmap) an owned
//! buffer handed over from JavaScript. Parsers take `&[u8]` either way.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// The largest side file of a checkpoint read into memory (`config.json`,
/// `tokenizer.json`; the largest real tokenizer files are tens of MiB): the
/// trace reader's document limit.
pub const SIDE_FILE_LIMIT: u64 = 256 << 20;

/// Opens `path` for reading once its metadata says it is a regular file,
/// with its length. A FIFO given as `--model` blocked the open forever
/// (issue 44, D18), and a device or socket is no model either; the length is
/// known before a byte is read, so a caller can refuse a file by its size
/// (D4: a 1 GiB sparse head file was read whole before its limit refused it).
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let fail = |e: std::io::Error| Error::io(path.display().to_string(), e);
    let meta = std::fs::metadata(path).map_err(fail)?;
    if !meta.is_file() {
        return Err(fail(not_regular(meta.file_type())));
    }
    let file = File::open(path).map_err(fail)?;
    // The same check on what was opened, in case the path changed between.
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(fail(not_regular(meta.file_type())));
    }
    Ok((file, meta.len()))
}

/// The whole of a regular file of at most `max` bytes: a model's side
/// files (`config.json`, `tokenizer.json`), refused by size before they are
/// read, and read no further than `max` should the file grow meanwhile.
/// [`SIDE_FILE_LIMIT`] is the bound for model side files.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>> {
    // `max` bounds the reservation below: callers pass a few hundred MiB.
    let (file, len) = open_regular(path)?;
    let too_large = |len: u64| {
        Error::io(
            path.display().to_string(),
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a file of {len} bytes is larger than the {max}-byte limit"),
            ),
        )
    };
    if len > max {
        return Err(too_large(len));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path.display().to_string(), e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The error for a path that is no regular file, naming what it is.
fn not_regular(kind: std::fs::FileType) -> std::io::Error {
    let what = if kind.is_dir() {
        "a directory"
    } else {
        unix_kind(kind).unwrap_or("not a regular file")
    };
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file: model and head files are read from regular files"),
    )
}

#[cfg(unix)]
fn unix_kind(kind: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    [
        (kind.is_fifo(), "a FIFO"),
        (kind.is_socket(), "a socket"),
        (kind.is_char_device(), "a character device"),
        (kind.is_block_device(), "a block device"),
    ]
    .into_iter()
    .find_map(|(is, name)| is.then_some(name))
}

#[cfg(not(unix))]
fn unix_kind(_: std::fs::FileType) -> Option<&'static str> {
    None
}

pub enum ModelBytes {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl ModelBytes {
    /// Memory-maps `path` read-only.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let (file, _) = open_regular(path)?;
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating or rewriting the file while it is mapped is the
        // one hazard mmap cannot rule out; model files are not edited in place.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| Error::io(path.display().to_string(), e))?;
        Ok(ModelBytes::Mapped(map))
    }

    /// Reads `path` into memory (where mmap is unavailable).
    #[cfg(target_arch = "wasm32")]
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let (mut file, _) = open_regular(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::io(path.display().to_string(), e))?;
        Ok(ModelBytes::Owned(bytes))
    }

    pub fn from_vec(bytes: Vec<u8>) -> Self {
        ModelBytes::Owned(bytes)
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            ModelBytes::Mapped(m) => m,
            ModelBytes::Owned(v) => v,
        }
    }

    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    pub fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }
}

impl AsRef<[u8]> for ModelBytes {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for ModelBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            #[cfg(not(target_arch = "wasm32"))]
            ModelBytes::Mapped(_) => "Mapped",
            ModelBytes::Owned(_) => "Owned",
        };
        write!(f, "ModelBytes::{kind}({} bytes)", self.len())
    }
}
