//! The CLI's integration tests, one module per file, in one test binary
//! (`autotests = false` in Cargo.toml; train_cli.rs, behind the `train`
//! feature, stays a binary of its own). Run one file's tests with
//! `cargo test -p stepscore-cli --test integration FILE::`.

mod common;

mod cli;
mod entry_points;
mod features_resume;
mod hub;
mod robustness;
mod serve_limits;
mod verify_stream;
