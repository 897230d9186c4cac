//! Model file formats: where model bytes live (a memory map natively, an
//! owned buffer in wasm) and how GGUF lays out metadata and tensors.

pub mod gguf;
pub mod storage;

#[cfg(any(test, feature = "testing"))]
pub use gguf::GgufValueType;
pub use gguf::{GgufArray, GgufFile, GgufValue, GgufWriter, TensorInfo};
pub use storage::ModelBytes;
