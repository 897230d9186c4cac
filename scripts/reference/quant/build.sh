#!/bin/sh
# Regenerate tests/fixtures/quant/ from llama.cpp's reference quantization code.
#
#   scripts/reference/quant/build.sh /path/to/llama.cpp
#
# The llama.cpp checkout is not part of this repository; the fixtures were made
# from the copy vendored in the llama-cpp-python 0.3.36 sdist
# (pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36), i.e.
#   build.sh .../llama_cpp_python-0.3.36/vendor/llama.cpp
#
# -ffp-contract=off and no -march: the reference must be the plain C semantics
# (no fused multiply-add contraction), which is what the Rust port reproduces.
set -eu
LLAMA=${1:?usage: build.sh /path/to/llama.cpp}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
GGML="$LLAMA/ggml"
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
CFLAGS="-O2 -std=gnu11 -ffp-contract=off -I$GGML/include -I$GGML/src -I$GGML/src/ggml-cpu"
gcc $CFLAGS -c "$GGML/src/ggml-quants.c" -o "$BUILD/ggml-quants.o"
gcc $CFLAGS -c "$HERE/gen_fixtures.c" -o "$BUILD/gen_fixtures.o"
gcc "$BUILD/gen_fixtures.o" "$BUILD/ggml-quants.o" -lm -o "$BUILD/gen_fixtures"
mkdir -p "$ROOT/tests/fixtures/quant"
"$BUILD/gen_fixtures" "$ROOT/tests/fixtures/quant"
ls -l "$ROOT/tests/fixtures/quant"
du -sh "$ROOT/tests/fixtures/quant"
