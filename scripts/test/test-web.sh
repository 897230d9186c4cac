#!/usr/bin/env bash
# The demo web app's end-to-end suite (web/): installs what it needs, builds
# the SDK package when pkg/dist is missing, builds the static site
# (web/dist) and runs the Playwright tests in Debian's Chromium, headless,
# with WebGPU (SwiftShader) on. Playwright never downloads a browser here.
# Screenshots of the main views land in web/test-results/screenshots/.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ ! -x /usr/bin/chromium ] && [ -z "${CHROMIUM_PATH:-}" ]; then
    echo "== test-web: installing Debian's chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null) || true
fi
node_ok=$(node -e 'const [a,b]=process.versions.node.split(".").map(Number); console.log(a>20||(a===20&&b>=19)?1:0)' 2>/dev/null || echo 0)
if [ "$node_ok" != 1 ]; then
    echo "test-web: Vite 8 needs Node 20.19 or newer (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi

if [ ! -f pkg/dist/index.js ] || [ ! -f pkg/dist/wasm/stepscore_wasm_bg.wasm ]; then
    echo "== test-web: building the SDK package (pkg/dist)"
    scripts/build-wasm.sh
fi

# npm ci again whenever package-lock.json changed since the last install.
lock_sum=$(sha256sum web/package-lock.json | cut -d' ' -f1)
if [ ! -x web/node_modules/.bin/vite ] || [ "$(cat web/node_modules/.lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
    echo "== test-web: npm ci (web/)"
    (cd web && npm ci --no-audit --no-fund)
    echo "$lock_sum" > web/node_modules/.lock-sha256
fi

echo "== test-web: build (web/dist)"
(cd web && npm run --silent build)

echo "== test-web: Playwright end-to-end tests (Chromium $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}'))"
rm -rf web/test-results/screenshots
(cd web && npx playwright test "$@")
echo "screenshots: web/test-results/screenshots/"
