#!/usr/bin/env bash
# Installs what builds and tests need. Safe to run again: each step is
# skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install Rust (rustup) first" >&2
    exit 1
fi

# The GPU engine's tests run on Mesa's llvmpipe (a Vulkan software adapter):
# they need the Vulkan loader and Mesa's Vulkan drivers. CI runs this as root.
if [ ! -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] && [ ! -e /usr/share/vulkan/icd.d/lvp_icd.json ] \
    || ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        export DEBIAN_FRONTEND=noninteractive
        pkgs="mesa-vulkan-drivers libvulkan1"
        apt-get install -y --no-install-recommends $pkgs \
            || { apt-get update && apt-get install -y --no-install-recommends $pkgs; }
    else
        echo "setup: mesa-vulkan-drivers/libvulkan1 missing and apt-get as root unavailable;" \
             "GPU tests will report SKIPPED (no adapter)" >&2
    fi
fi
