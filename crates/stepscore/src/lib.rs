//! stepscore: score every step of a reasoning trace with a process reward model.
//!
//! Layers (see docs/ARCHITECTURE.md): traces and readers -> segmentation ->
//! (models, next) -> per-step scores -> aggregation, selection, reward shaping
//! and metrics. The scoring layer never sees an engine and the engine never
//! sees a trace.

pub mod aggregate;
pub mod answer;
pub mod catalog;
pub mod cpu;
pub mod error;
pub mod format;
pub mod ggml;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod io;
pub mod metrics;
pub mod model;
pub mod par;
pub mod prm;
pub mod quant;
pub mod rational;
pub mod recompute;
pub mod reward;
pub mod sample;
pub mod segment;
pub mod select;
pub mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tokenizer;
pub mod trace;
pub mod validate;

pub use error::{Error, LengthBound, Location, Result};
pub use trace::{Span, Step, StepRole, Trace};

/// The README's Rust blocks, compiled and run by `cargo test --doc -p stepscore`
/// (`scripts/readme_blocks.py` lists them with the README's other blocks).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
