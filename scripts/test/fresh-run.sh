#!/usr/bin/env bash
# CI's run, measured here: a clean clone of this repository's HEAD, run the
# way `.ci/run` runs it (the README's test command), with nothing the
# clone's own build made before: a new target dir, and empty stepscore,
# cargo-registry, npm and pip caches, so model and crate downloads count as
# they do on CI's fresh machine. The rustup toolchain and the system packages
# are shared (CI's image has them); tools `cargo install` put in ~/.cargo/bin
# are not. Each section's start (`== NAME (at N s)`,
# printed by scripts/test.sh) and the total land in the log.
#
#     scripts/test/fresh-run.sh [--resume] [WORK_DIR]   (default /tmp/stepscore-fresh; emptied)
#
# --resume keeps WORK_DIR's clone, caches and build, moves the clone to this
# repository's HEAD and runs again (after a failed run: the first run's
# sections plus the second's are the fresh total), logging to run2.log.
#
# Prints the section table at the end: each section's seconds.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
resume=0
if [ "${1:-}" = --resume ]; then
    resume=1
    shift
fi
work="${1:-/tmp/stepscore-fresh}"
if [ $resume = 1 ]; then
    git -C "$work/repo" fetch --quiet "$root" HEAD
    git -C "$work/repo" reset --quiet --hard FETCH_HEAD
    log="$work/run2.log"
else
    rm -rf "$work"
    mkdir -p "$work/home"
    git clone --quiet --no-local "$root" "$work/repo"
    log="$work/run.log"
fi
echo "fresh-run: $work/repo at $(git -C "$work/repo" rev-parse --short HEAD); log: $log" >&2
# A fresh HOME holds the caches (stepscore's models, cargo's registry, npm,
# pip). Of ~/.cargo/bin only rustup's proxies are kept on PATH: tools cargo
# installed there (wasm-bindgen-cli) are installed again, as on CI.
cargo_bin="$(dirname "$(command -v cargo)")"
rm -rf "$work/home/rustup-bin"
mkdir -p "$work/home/rustup-bin"
for tool in cargo rustc rustup rustdoc rustfmt cargo-fmt cargo-clippy clippy-driver; do
    [ -e "$cargo_bin/$tool" ] && ln -s "$cargo_bin/$tool" "$work/home/rustup-bin/$tool"
done
path_without_cargo=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$cargo_bin" | paste -sd: -)
rc=0
(
    cd "$work/repo"
    export RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}"
    export HOME="$work/home"
    export CARGO_HOME="$work/home/.cargo"
    export PATH="$CARGO_HOME/bin:$work/home/rustup-bin:$path_without_cargo"
    .ci/run
) >"$log" 2>&1 || rc=$?
python3 - "$log" <<'EOF'
import re, sys
starts = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"== (.*) \(at (\d+) s\)$", line.rstrip())
    if m:
        starts.append((m.group(1), int(m.group(2))))
    m = re.match(r"== all suites passed in (\d+) s$", line.rstrip())
    if m:
        starts.append(("(end)", int(m.group(1))))
for (name, at), (_, nxt) in zip(starts, starts[1:]):
    print(f"{nxt - at:>6} s  {name}")
if starts:
    print(f"{starts[-1][1]:>6} s  total to the last mark")
EOF
exit $rc
