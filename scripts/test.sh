#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs what the tests
# need (idempotent, quick when already there), then runs the suites.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== cargo test (workspace)"
cargo test --workspace --locked
