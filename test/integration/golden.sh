#!/usr/bin/env bash
# Golden test against PyTorch: holmes-golden-dump writes a small GPT's weights, batches,
# logits, gradients and 10 AdamW losses; test/golden/golden_check.py rebuilds the same model
# in PyTorch (/usr/bin/python3 with torch) and compares them (tolerances in that script).
# Usage: golden.sh <holmes-train binary> <source dir>
set -u
bin=$1 src=$2
build=$(cd "$(dirname "$bin")" && pwd)  # holmes-train sits at the top of the build folder
dump=$build/test/golden/holmes-golden-dump
if ! /usr/bin/python3 -c 'import torch, numpy' 2>/dev/null; then
  echo "HOLMES_SKIP golden: /usr/bin/python3 cannot import torch and numpy (apt install python3-torch)"
  exit 0
fi
if [ ! -x "$dump" ]; then
  echo "golden: $dump not built (cmake --build <build> --target holmes-golden-dump)" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$dump" "$dir" || exit 1
/usr/bin/python3 "$src/test/golden/golden_check.py" "$dir"
