# Sourced by scripts/build-wasm.sh and scripts/test/test-wasm-kernels.sh: the
# toolchain pieces the wasm builds need, installed only with consent, since
# they change the user's Rust toolchain (a rustup target and component) and
# ~/.cargo/bin (wasm-bindgen-cli, pinned to Cargo.lock's wasm-bindgen):
#   STEPSCORE_INSTALL_TOOLS=1   install what is missing (scripts/test.sh sets it:
#                               installing what the tests need is its job;
#                               scripts/release.sh --install-tools sets it too)
#   a terminal on stdin         ask once, listing each command
#   otherwise                   stop, listing the commands to run
# wasm_tools [rust-src] [--bindgen-later]: rust-src is the component the
# threaded build's -Z build-std needs. --bindgen-later installs wasm-bindgen-cli
# in the background (its log in target/wasm-bindgen-install.log), so that the
# caller's cargo builds run beside it; wasm_bindgen_ready waits for it.
# Sets WASM_BINDGEN_VERSION (Cargo.lock's).

WASM_BINDGEN_INSTALL_PID=
wasm_tools() {
    local want have missing=() rust_src= later= arg bindgen=
    for arg in "$@"; do
        case $arg in
            rust-src) rust_src=1 ;;
            --bindgen-later) later=1 ;;
            *) echo "wasm_tools: unknown argument $arg" >&2; return 2 ;;
        esac
    done
    want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
    if [ -z "$want" ]; then
        echo "wasm tools: no wasm-bindgen entry in Cargo.lock" >&2
        return 1
    fi
    WASM_BINDGEN_VERSION=$want
    if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
        missing+=("rustup target add wasm32-unknown-unknown")
    fi
    if [ -n "$rust_src" ] && ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
        missing+=("rustup component add rust-src")
    fi
    have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
    if [ "$have" != "$want" ]; then
        # The runner of scripts/test/test-wasm-kernels.sh ships in the same crate.
        bindgen="cargo install wasm-bindgen-cli --version $want"
        missing+=("$bindgen   # found: ${have:-none}; takes a few minutes")
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
        if [ -n "$later" ] && [ "$cmd" = "$bindgen" ]; then
            mkdir -p target
            echo "+ $cmd   # in the background: target/wasm-bindgen-install.log"
            $cmd >target/wasm-bindgen-install.log 2>&1 &
            WASM_BINDGEN_INSTALL_PID=$!
            continue
        fi
        echo "+ $cmd"
        $cmd
    done
}

# Waits for a background wasm-bindgen-cli install (wasm_tools --bindgen-later);
# prints its log when it failed.
wasm_bindgen_ready() {
    [ -n "$WASM_BINDGEN_INSTALL_PID" ] || return 0
    if ! wait "$WASM_BINDGEN_INSTALL_PID"; then
        cat target/wasm-bindgen-install.log >&2
        echo "wasm tools: cargo install wasm-bindgen-cli failed (log above)" >&2
        return 1
    fi
    WASM_BINDGEN_INSTALL_PID=
    tail -n 2 target/wasm-bindgen-install.log
}
