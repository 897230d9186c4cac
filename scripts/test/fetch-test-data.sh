#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test vectors (vocab-only GGUFs with .inp/.out
# files) for the qwen2, gpt-2, llama-bpe and llama-spm vocabularies into
# .cache/test-data/llama.cpp-models/ (git-ignored). They ship inside the
# llama-cpp-python 0.3.36 source distribution on PyPI. Idempotent: does
# nothing when all the files are already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${STEPSCORE_TEST_DATA:-$root/.cache/test-data}/llama.cpp-models"
version="0.3.36"
files=()
for vocab in qwen2 gpt-2 llama-bpe llama-spm; do
  for ext in "" .inp .out; do files+=("ggml-vocab-$vocab.gguf$ext"); done
done

missing=()
for f in "${files[@]}"; do
  [ -s "$dest/$f" ] || missing+=("$f")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "test data present in $dest"
  exit 0
fi

py="$(command -v python3 || command -v python)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetching llama-cpp-python==$version sdist for: ${missing[*]}"
# Only this package as a source distribution; its build requirements may come
# as wheels (pip prepares the sdist's metadata, which needs them).
"$py" -m pip download --quiet --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" -d "$tmp"
sdist="$(ls "$tmp"/llama_cpp_python-"$version".tar.gz)"
prefix="llama_cpp_python-$version/vendor/llama.cpp/models"
members=()
for f in "${files[@]}"; do members+=("$prefix/$f"); done
tar -xzf "$sdist" -C "$tmp" "${members[@]}"
mkdir -p "$dest"
for f in "${files[@]}"; do
  # Copy then rename so an interrupted run never leaves a partial file.
  cp "$tmp/$prefix/$f" "$dest/.$f.part"
  mv "$dest/.$f.part" "$dest/$f"
done
echo "wrote ${#files[@]} files to $dest"
