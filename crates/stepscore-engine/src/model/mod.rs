//! Decoder models, engine-neutral: configuration, the block sequence both
//! engines run (`decoder.rs`), the kernel interface of the heads
//! (`kernels.rs`), weight storage ([`Matrix`], [`Transformer`]) and the
//! loaders (Hugging Face safetensors, GGUF). The engines are `crate::cpu`
//! and `crate::gpu`.

pub mod config;
pub mod decoder;
pub mod gguf;
pub mod hf;
pub mod kernels;
pub mod matrix;
/// Random-weight models of real architectures, built in memory (`stepscore bench --synthetic`).
pub mod synthetic;
pub mod transformer;

pub use config::{Activation, Arch, ModelConfig, RopeScaling};
pub use decoder::Taps;
pub use gguf::GgufModel;
pub use hf::HfCheckpoint;
pub use kernels::{Kernels, Linear, States, TokenStat};
pub use matrix::{Matrix, SharedBytes};
pub use transformer::{Hidden, Layer, LmHead, RopeStyle, Transformer};
