//! Decoder models on the CPU: configuration, weight storage, the forward
//! pass, and loaders (Hugging Face safetensors here; GGUF plugs in by building
//! the same [`Transformer`] from its own tensors).

pub mod config;
pub mod decoder;
pub(crate) mod exp;
pub mod gguf;
pub mod hf;
pub mod kernels;
pub mod matrix;
pub mod transformer;

pub use config::{Arch, ModelConfig, RopeScaling};
pub use decoder::{Block, Taps, VocabHead, Weights};
pub use gguf::GgufModel;
pub use hf::{HfCheckpoint, TensorF32};
pub use kernels::{Kernels, Linear, States, TokenStat};
pub use matrix::{Matrix, SharedBytes};
pub use transformer::{Hidden, KvCache, Layer, LmHead, RopeStyle, Transformer};
