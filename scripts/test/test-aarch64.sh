#!/usr/bin/env bash
# The core and engine test suites on aarch64, under qemu-user: cross-built
# with Debian's aarch64 gcc as the linker (.cargo/config.toml), run by
# qemu-aarch64, whose default CPU has NEON, the dot-product and i8mm
# extensions, so the `Neon` and `NeonDot` kernels both run and must give
# the portable kernels' bits (tests/quant_matmul.rs). The kernel tests then
# run again on an ARMv8.0 CPU model (Cortex-A53: no `sdot`), where detection
# must choose `Neon`. Tests that need a fetched model read STEPSCORE_CACHE
# (scripts/test.sh points it at an empty directory: they skip).
set -euo pipefail
cd "$(dirname "$0")/../.."

target=aarch64-unknown-linux-gnu
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null \
    || [ ! -d /usr/aarch64-linux-gnu/lib ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        pkgs="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
        apt-get install -y -qq --no-install-recommends $pkgs >/dev/null \
            || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null; }
    else
        echo "test-aarch64: needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user (apt-get as root)" >&2
        exit 1
    fi
fi
if ! rustup target list --installed | grep -qx "$target"; then
    rustup target add "$target"
fi

cargo test --locked -p stepscore-engine -p stepscore --target "$target"
echo "test-aarch64: the kernel tests on an ARMv8.0 CPU (qemu -cpu cortex-a53, no sdot)"
QEMU_CPU=cortex-a53 cargo test --locked -p stepscore --target "$target" --test integration quant_matmul::
