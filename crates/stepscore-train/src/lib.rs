//! Train step heads for stepscore's value-head family with burn (CPU, pure-Rust `flex` backend).
//!
//! Pipeline: `stepscore features` JSONL -> [`data::read_examples`] (ProcessBench labels, one row
//! per labelled step) -> [`train::train`] (standardize, Adam on class-balanced BCE, early
//! stopping on validation AUROC) -> [`calibrate`] (Platt scaling, threshold and ECE on
//! validation) -> [`train::Trained::export`] (standardization and calibration folded into the
//! weights) -> [`export::ExportedHead::save`] (safetensors, `v_head.summary.*`).

pub mod calibrate;
pub mod data;
pub mod error;
pub mod export;
pub mod model;
pub mod standardize;
pub mod train;

pub use calibrate::{calibrate, fit_platt, Calibrated};
pub use data::{
    read_examples, Examples, ExamplesBuilder, Neutral, ReadOptions, ReadStats, RowLayout,
};
pub use error::{Error, Result};
pub use export::ExportedHead;
pub use model::HeadKind;
pub use standardize::Standardizer;
pub use train::{train, train_and_save, EpochLog, TrainConfig, Trained};
