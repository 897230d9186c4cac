#!/usr/bin/env bash
# Serves the demo web app locally: http://127.0.0.1:5173/ (PORT=... to change).
# Installs web/'s npm packages and builds the SDK package (pkg/dist) when
# missing. The catalog's models are served from stepscore's cache dir; put
# them there once with `cargo run -p stepscore-cli -- fetch stepscore-prm-qwen1.5b
# stepscore-prm-smollm2` (the default PRM, 1.1 GB, and the fast one, 98 MB).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f pkg/dist/index.js ] || [ ! -f pkg/dist/wasm/stepscore_wasm_bg.wasm ]; then
    scripts/build-wasm.sh
fi
if [ ! -x web/node_modules/.bin/vite ]; then
    (cd web && npm ci --no-audit --no-fund)
fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stepscore
for pair in "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf stepscore-prm-qwen1.5b" "SmolLM2-135M-Instruct.Q4_1.gguf stepscore-prm-smollm2"; do
    set -- $pair
    if [ ! -f "${STEPSCORE_MODELS_DIR:-$cache}/$1" ] && [ ! -f "web/models/$1" ]; then
        echo "note: $1 is not in $cache; run: cargo run -p stepscore-cli -- fetch $2"
        echo "      (or drop a GGUF / Hugging Face checkpoint into the page)"
    fi
done
cd web
exec npx vite --host "${HOST:-127.0.0.1}" --port "${PORT:-5173}" --strictPort
