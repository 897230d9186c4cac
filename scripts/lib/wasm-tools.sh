# Sourced by scripts/build-wasm.sh and scripts/test/test-wasm-kernels.sh: the
# toolchain pieces the wasm builds need, installed only with consent, since
# they change the user's Rust toolchain (a rustup target and component) and
# ~/.cargo/bin (wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen):
#   STEPSCORE_INSTALL_TOOLS=1   install what is missing (scripts/test.sh sets it:
#                               installing what the tests need is its job;
#                               scripts/release.sh --install-tools sets it too)
#   a terminal on stdin         ask once, listing each command
#   otherwise                   stop, listing the commands to run
# wasm_tools [rust-src]: also the rust-src component (the threaded build's
# -Z build-std needs it). Sets WASM_BINDGEN_VERSION (Cargo.lock's).

wasm_tools() {
    local want have missing=()
    want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
    if [ -z "$want" ]; then
        echo "wasm tools: no wasm-bindgen entry in Cargo.lock" >&2
        return 1
    fi
    WASM_BINDGEN_VERSION=$want
    if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
        missing+=("rustup target add wasm32-unknown-unknown")
    fi
    if [ "${1:-}" = rust-src ] && ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
        missing+=("rustup component add rust-src")
    fi
    have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
    if [ "$have" != "$want" ]; then
        # The runner of scripts/test/test-wasm-kernels.sh ships in the same crate.
        missing+=("cargo install wasm-bindgen-cli --version $want   # found: ${have:-none}; takes a few minutes")
    fi
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "The wasm builds need these changes to your Rust toolchain:" >&2
    printf '  %s\n' "${missing[@]}" >&2
    if [ "${STEPSCORE_INSTALL_TOOLS:-}" != 1 ]; then
        if [ -t 0 ]; then
            local answer
            read -r -p "Run them now? [y/N] " answer
            case $answer in y | Y | yes) ;; *) echo "Stopped: nothing was changed." >&2; return 1 ;; esac
        else
            echo "Stopped: run them yourself, or rerun with STEPSCORE_INSTALL_TOOLS=1 (scripts/release.sh --install-tools)." >&2
            return 1
        fi
    fi
    local cmd
    for cmd in "${missing[@]}"; do
        cmd=${cmd%%   #*}
        echo "+ $cmd"
        $cmd
    done
}
