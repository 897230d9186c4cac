//! The bytes of a model file. Natively a read-only memory map, so a 100 MB
//! checkpoint costs no copy and pages in lazily; in wasm (no mmap) an owned
//! buffer handed over from JavaScript. Parsers take `&[u8]` either way.

use crate::error::{Error, Result};
use std::path::Path;

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
        let file =
            std::fs::File::open(path).map_err(|e| Error::io(path.display().to_string(), e))?;
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
        std::fs::read(path)
            .map(ModelBytes::Owned)
            .map_err(|e| Error::io(path.display().to_string(), e))
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
