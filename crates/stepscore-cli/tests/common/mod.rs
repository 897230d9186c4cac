//! Helpers every CLI test binary shares (each includes this with `mod common;`
//! and uses what it needs).
#![allow(dead_code)]

use std::path::PathBuf;

/// The binary under test; `STEPSCORE_TEST_BIN` points the tests at another
/// build (how the "fails before" claims are checked against an old one).
pub fn bin() -> PathBuf {
    std::env::var_os("STEPSCORE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_stepscore")))
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The tiny value-head checkpoint (2 layers): scoring in milliseconds.
pub fn tiny_model() -> String {
    repo()
        .join("tests/fixtures/prm/skywork-prm-tiny")
        .display()
        .to_string()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
