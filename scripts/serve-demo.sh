#!/usr/bin/env bash
# Serves the demo web app locally: http://127.0.0.1:5173/ (PORT=... to change).
# Installs web/'s npm packages and builds the SDK package (pkg/dist) when
# missing. The default model is served from stepscore's cache dir; put it
# there once with `cargo run -p stepscore-cli -- fetch`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f pkg/dist/index.js ] || [ ! -f pkg/dist/wasm/stepscore_wasm_bg.wasm ]; then
    scripts/build-wasm.sh
fi
if [ ! -x web/node_modules/.bin/vite ]; then
    (cd web && npm ci --no-audit --no-fund)
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stepscore
if [ ! -f "${STEPSCORE_MODELS_DIR:-$cache}/SmolLM2-135M-Instruct.Q4_1.gguf" ] && [ ! -f web/models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
    echo "note: the default model is not in $cache; run: cargo run -p stepscore-cli -- fetch"
    echo "      (or drop a GGUF / Hugging Face checkpoint into the page)"
fi
cd web
exec npx vite --host "${HOST:-127.0.0.1}" --port "${PORT:-5173}" --strictPort
