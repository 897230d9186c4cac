#!/usr/bin/env bash
# Installs what builds and tests need. Safe to run again: each step is
# skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install Rust (rustup) first" >&2
    exit 1
fi
