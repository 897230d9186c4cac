//! Train step heads for stepscore's value-head family with burn (CPU, pure-Rust `flex` backend).
//! Without the `burn` feature (on by default) the crate is the run's flags and settings
//! ([`config`]) and the data readers, which `stepscore`'s CLI uses in every build.
//!
//! Pipeline: `stepscore features` JSONL -> [`data::read_examples`] (ProcessBench labels, one row
//! per labelled step) -> [`train::train`] (standardize, Adam on class-balanced BCE, early
//! stopping on validation AUROC) -> [`calibrate`] (Platt scaling, threshold and ECE on
//! validation) -> [`train::Trained::export`] (standardization and calibration folded into the
//! weights) -> [`export::ExportedHead::save`] (safetensors, `v_head.summary.*`).

pub mod calibrate;
pub mod config;
pub mod data;
pub mod error;
pub mod export;
#[cfg(feature = "burn")]
pub mod model;
pub mod standardize;
#[cfg(feature = "burn")]
pub mod train;

pub use calibrate::{calibrate, fit_platt, Calibrated};
pub use config::{HeadKind, TrainConfig, TrainFlags, DEFAULT_MLP_HIDDEN};
pub use data::{
    read_examples, Examples, ExamplesBuilder, Neutral, ReadOptions, ReadStats, RowLayout,
};
pub use error::{Error, Result};
pub use export::ExportedHead;
pub use standardize::Standardizer;
#[cfg(feature = "burn")]
pub use train::{train, train_and_save, EpochLog, Trained};
