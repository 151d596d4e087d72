#!/usr/bin/env bash
# Regenerates the docs that are generated from code: docs/validation.md (rule table), docs/pictures/.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build build -j2 --target megatron-run >/dev/null
build/bin/megatron-run rules --format markdown > docs/validation.md
echo "docs/validation.md: $(grep -c '^| `' docs/validation.md) rules"
# The pictures of docs/pictures/ (README and docs/pictures.md show them), drawn from corpus configs.
python3 tests/pictures/render.py build/bin/megatron-run --write-docs
