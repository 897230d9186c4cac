#!/usr/bin/env bash
# The npm package's browser suite (pkg/test/browser): headless Debian Chromium
# driven by playwright-core from Node's test runner, against a local static
# server. Installs what it needs when missing (each step is skipped when
# already done): Debian's chromium (never a downloaded browser build), and
# pkg/node_modules from the lock file (playwright-core is a pinned
# devDependency). Builds pkg/dist first when it is missing; scripts/test.sh
# builds it before calling this.
set -euo pipefail
cd "$(dirname "$0")/../.."

chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
    echo "== test-browser: installing Debian's chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -q --no-install-recommends chromium
fi
"$chromium" --version 2>/dev/null || true

node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
    echo "test-browser: needs Node 20 or newer (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
fi

# Same marker as scripts/build-wasm.sh: npm ci again only when the lock changed.
lock_sum=$(sha256sum pkg/package-lock.json | cut -d' ' -f1)
if [ ! -d pkg/node_modules/playwright-core ] || [ "$(cat pkg/node_modules/.lock-sha256 2>/dev/null)" != "$lock_sum" ]; then
    echo "== test-browser: npm ci (pkg/)"
    (cd pkg && npm ci --no-audit --no-fund)
    echo "$lock_sum" > pkg/node_modules/.lock-sha256
fi

if [ ! -f pkg/dist/wasm/stepscore_wasm_bg.wasm ]; then
    scripts/build-wasm.sh
fi

echo "== test-browser: Chromium suite (pkg/test/browser)"
cd pkg
CHROMIUM="$chromium" npm run --silent test:browser
