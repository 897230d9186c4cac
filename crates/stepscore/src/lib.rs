//! stepscore: score every step of a reasoning trace with a process reward model.
//!
//! Layers (see docs/ARCHITECTURE.md): traces and readers -> segmentation ->
//! (models, next) -> per-step scores -> aggregation, selection, reward shaping
//! and metrics. The scoring layer never sees an engine and the engine never
//! sees a trace. Most programs need one import: `use stepscore::prelude::*;`.

pub mod aggregate;
pub mod answer;
pub mod catalog;
pub mod io;
pub mod metrics;
pub mod prelude;
pub mod prm;
mod rational;
pub mod recompute;
pub mod reward;
pub mod segment;
pub mod select;
pub mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod trace;
pub mod validate;

// The engine (crates/stepscore-engine): its public face, for the engine
// types the scorer's API names (`Transformer`, `Hidden`, `Tokenizer`, ...).
pub use stepscore_engine as engine;

pub use engine::{Error, LengthBound, Location, Result};
pub use trace::{Span, Step, StepRole, Trace};

/// The README's Rust blocks, compiled and run by `cargo test --doc -p stepscore`
/// (`scripts/test/readme_blocks.py` lists them with the README's other blocks).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
