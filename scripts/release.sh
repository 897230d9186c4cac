#!/usr/bin/env bash
# The release artifacts, one command, into target/release-artifacts/:
#   stepscore-<version>.tgz                 npm pack of pkg/ (both wasm builds inside)
#   stepscore-<version>-cp39-abi3-<tag>.whl  the Python wheel (maturin, abi3; release: manylinux2014 via zig),
#                                       with the CLI binary as its `stepscore` command
#   stepscore-<version>.tar.gz              the Python sdist
#   stepscore-<version>-<target>.tar.gz     the CLI: binary, README.md, LICENSE
# The release profile makes a wheel and a CLI archive for x86_64 and for aarch64
# (both linked by zig against glibc 2.17; the aarch64 CLI is started under
# qemu-aarch64 when it is installed); the dev profile, for the host.
# STEPSCORE_RELEASE_TARGETS="x86_64-unknown-linux-gnu" limits the release targets.
# Publishing them stays a maintainer's step.
#
#   scripts/release.sh                  release profile (what would be published)
#   scripts/release.sh --install-tools  install the wasm builds' missing toolchain pieces
#                                       (a rustup target and component, wasm-bindgen-cli)
#                                       without asking (scripts/lib/wasm-tools.sh); without
#                                       it they are listed and, on a terminal, asked for
#   scripts/release.sh --profile dev    CI: the dev profile (opt-level 2 for the core and
#                                       dependencies), reusing what `cargo test --workspace`
#                                       built, and pkg/dist when scripts/build-wasm.sh made it;
#                                       its wheel is linked by the host's toolchain (the tag
#                                       maturin's audit finds for this machine's glibc): zig
#                                       builds for an explicit --target, in a target dir of its
#                                       own, which would rebuild every dependency.
#                                       STEPSCORE_DEV_CLI=PATH: the CLI to package (test.sh
#                                       passes its workspace test build's) instead of building one
# The wasm builds are always scripts/build-wasm.sh's (profile wasm-release).
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
while [ $# -gt 0 ]; do
    case $1 in
        --profile) profile=${2:?--profile needs release or dev}; shift 2 ;;
        --profile=*) profile=${1#--profile=}; shift ;;
        --install-tools) export STEPSCORE_INSTALL_TOOLS=1; shift ;;
        *) echo "release.sh: unknown argument '$1' (usage: scripts/release.sh [--profile release|dev] [--install-tools])" >&2; exit 2 ;;
    esac
done
case $profile in release | dev) ;; *) echo "release.sh: --profile must be release or dev, got '$profile'" >&2; exit 2 ;; esac

out=target/release-artifacts
version=$(awk -F'"' '/^\[workspace.package\]/ { p = 1 } p && /^version/ { print $2; exit }' Cargo.toml)
host=$(rustc -vV | sed -n 's/^host: //p')
# Cargo's output directory (CARGO_TARGET_DIR, as cargo and build-wasm.sh read it).
target_dir=${CARGO_TARGET_DIR:-target}
rm -rf "$out"
mkdir -p "$out"
t0=$(date +%s)
step() { echo "== release ($profile): $1"; }

step "npm package"
if [ "$profile" = release ] || [ ! -f pkg/dist/wasm-threads/stepscore_wasm_bg.wasm ]; then
    scripts/build-wasm.sh
fi
# The package's JS as it is now (build-wasm.sh's last step, cheap to redo).
cp pkg/src/*.js pkg/src/*.d.ts pkg/dist/
cp LICENSE pkg/LICENSE
(cd pkg && npm pack --silent --pack-destination "../$out" >/dev/null)
rm pkg/LICENSE

# maturin, zig (the `ziglang` wheel) and cargo-zigbuild in a venv of their
# own: zig links the release extension and CLI against glibc 2.17, which
# manylinux2014 names.
venv=target/release-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
tools=("maturin>=1.9.4,<2")
# zig only for the release profile (dev builds are linked by the host's toolchain).
if [ "$profile" = release ]; then tools+=("ziglang>=0.13" "cargo-zigbuild>=0.19"); fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${tools[@]}"

if [ "$profile" = dev ]; then
    targets=("$host")
else
    read -r -a targets <<< "${STEPSCORE_RELEASE_TARGETS:-x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu}"
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
bin_dir=crates/stepscore-py/python/stepscore/_bin
for target in "${targets[@]}"; do
    step "CLI ($target)"
    if [ "$profile" = dev ] && [ -n "${STEPSCORE_DEV_CLI:-}" ]; then
        # scripts/test.sh's: the workspace test build's CLI, not a second build.
        cli=$STEPSCORE_DEV_CLI
    elif [ "$profile" = dev ]; then
        cargo build --locked -q -p stepscore-cli
        cli=$target_dir/debug/stepscore
    else
        rustup target list --installed | grep -qx "$target" || rustup target add "$target"
        # The `.2.17` suffix: cargo-zigbuild links against that glibc's symbol versions.
        PATH="$PWD/$venv/bin:$PATH" cargo zigbuild --locked -q --release -p stepscore-cli \
            --target "$target.2.17"
        cli=$target_dir/$target/release/stepscore
    fi
    # The wheel's `stepscore` command runs the same binary from inside the
    # package (crates/stepscore-py/python/stepscore/_bin/, ignored by git and so
    # left out of the sdist; stepscore/_cli.py execs it). Stripped: debug info
    # would make the wheel several times larger.
    rm -rf "$bin_dir"
    mkdir -p "$bin_dir"
    cp "$cli" "$bin_dir/stepscore"
    case $target in
        "$host") strip "$bin_dir/stepscore" ;;
        # The host's binutils read only the host's machine code.
        aarch64-*) aarch64-linux-gnu-strip "$bin_dir/stepscore" ;;
        *) echo "release.sh: no strip for $target" >&2; exit 1 ;;
    esac
    if [ "$target" != "$host" ] && command -v qemu-aarch64 >/dev/null; then
        # The cross-built CLI starts and detects its kernels (scoring needs a model:
        # scripts/test/test-aarch64.sh runs the engine's tests on aarch64).
        # The cross libc (libc6-dev-arm64-cross) is where qemu finds the loader.
        QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 "$bin_dir/stepscore" --version
        QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 "$bin_dir/stepscore" doctor | grep 'CPU kernels'
    fi

    step "Python wheel ($target)"
    maturin_args=(--locked -m crates/stepscore-py/Cargo.toml --out "$out")
    if [ "$profile" = dev ]; then
        maturin_args+=(--profile dev)
    else
        # --strip: the release profile keeps line tables for local backtraces;
        # a published wheel does not need them (27 MB -> about 9 MB).
        maturin_args+=(--release --zig --compatibility manylinux2014 --strip --target "$target")
    fi
    PATH="$PWD/$venv/bin:$PATH" maturin build "${maturin_args[@]}"

    step "CLI archive ($target)"
    name=stepscore-$version-$target
    mkdir -p "$stage/$name/examples"
    # The stripped binary the wheel carries.
    cp "$bin_dir/stepscore" README.md LICENSE "$stage/$name/"
    # The README's quickstart scores these from the unpacked directory.
    cp examples/traces.jsonl "$stage/$name/examples/"
    tar -C "$stage" -czf "$out/$name.tar.gz" "$name"
done

step "Python sdist"
PATH="$PWD/$venv/bin:$PATH" maturin sdist -m crates/stepscore-py/Cargo.toml --out "$out"

echo "== release ($profile): artifacts in $out ($(( $(date +%s) - t0 )) s)"
(cd "$out" && for f in *; do printf '  %-60s %12d bytes\n' "$f" "$(stat -c %s "$f")"; done)
