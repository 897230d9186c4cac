#!/usr/bin/env bash
# The release artifacts, one command, into target/release-artifacts/:
#   stepscore-<version>.tgz                 npm pack of pkg/ (both wasm builds inside)
#   stepscore-<version>-cp39-abi3-<tag>.whl  the Python wheel (maturin, abi3; release: manylinux2014 via zig),
#                                       with the CLI binary as its `stepscore` command
#   stepscore-<version>.tar.gz              the Python sdist
#   stepscore-<version>-<target>.tar.gz     the CLI: binary, README.md, LICENSE
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

step "CLI"
if [ "$profile" = dev ] && [ -n "${STEPSCORE_DEV_CLI:-}" ]; then
    # scripts/test.sh's: the workspace test build's CLI, not a second build.
    cli=$STEPSCORE_DEV_CLI
elif [ "$profile" = dev ]; then
    cargo build --locked -q -p stepscore-cli
    cli=$target_dir/debug/stepscore
else
    # The `.2.17` suffix: cargo-zigbuild links against that glibc's symbol versions.
    PATH="$PWD/$venv/bin:$PATH" cargo zigbuild --locked -q --release -p stepscore-cli \
        --target x86_64-unknown-linux-gnu.2.17
    cli=$target_dir/x86_64-unknown-linux-gnu/release/stepscore
fi
# The wheel's `stepscore` command runs the same binary from inside the
# package (crates/stepscore-py/python/stepscore/_bin/, ignored by git and so
# left out of the sdist; stepscore/_cli.py execs it). Stripped: debug info
# would make the wheel several times larger.
bin_dir=crates/stepscore-py/python/stepscore/_bin
rm -rf "$bin_dir"
mkdir -p "$bin_dir"
cp "$cli" "$bin_dir/stepscore"
strip "$bin_dir/stepscore"

step "Python wheel and sdist"
maturin_args=(--locked -m crates/stepscore-py/Cargo.toml --out "$out")
if [ "$profile" = dev ]; then
    maturin_args+=(--profile dev)
else
    # --strip: the release profile keeps line tables for local backtraces;
    # a published wheel does not need them (27 MB -> about 9 MB).
    maturin_args+=(--release --zig --compatibility manylinux2014 --strip)
fi
PATH="$PWD/$venv/bin:$PATH" maturin build "${maturin_args[@]}"
PATH="$PWD/$venv/bin:$PATH" maturin sdist -m crates/stepscore-py/Cargo.toml --out "$out"

step "CLI archive"
name=stepscore-$version-$host
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/examples"
# The stripped binary the wheel carries.
cp "$bin_dir/stepscore" README.md LICENSE "$stage/$name/"
# The README's quickstart scores these from the unpacked directory.
cp examples/traces.jsonl "$stage/$name/examples/"
tar -C "$stage" -czf "$out/$name.tar.gz" "$name"

echo "== release ($profile): artifacts in $out ($(( $(date +%s) - t0 )) s)"
(cd "$out" && for f in *; do printf '  %-60s %12d bytes\n' "$f" "$(stat -c %s "$f")"; done)
