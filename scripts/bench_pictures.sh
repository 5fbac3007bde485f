#!/usr/bin/env bash
# How large the plan page of a 4096-rank job is and how fast headless Chromium renders it
# (docs/pictures.md, "Speed"). A benchmark, not a test: it prints the figures and `uptime`,
# since a loaded machine renders slower.
#   scripts/bench_pictures.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/holmes-train
[ -x "$bin" ] || { echo "bench_pictures: $bin not built (scripts/setup.sh $build holmes-train)" >&2; exit 2; }
command -v chromium >/dev/null || { echo "bench_pictures: no chromium (scripts/setup.sh installs it)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/topology.yaml" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("nodes:\n")
    for kind, rate, fabric in (("ib", 200, "a"), ("roce", 100, "b")):
        f.write(f"  - names: {kind}-[0-255]\n    devices: {{kind: cuda, count: 8, name: H100-SXM, memory_gb: 80, "
                f"peak_tflops: 989}}\n    nics:\n      - {{kind: {kind}, name: \"mlx5_[0-7]\", rate_gbps: {rate}, "
                f"fabric: {fabric}{', gid_index: 3' if kind == 'roce' else ''}}}\n"
                f"      - {{kind: ethernet, name: eth0, rate_gbps: 25}}\n")
PY
start=$(date +%s.%N)
"$bin" --config configs/ib-roce-7b.yaml --topology "$tmp/topology.yaml" --set model.layers=64 \
  --set parallel.tensor=8 --set parallel.pipeline=16 --set parallel.data=32 --set train.global_batch=1024 \
  --plan-only --format html >"$tmp/plan-4096.html"
end=$(date +%s.%N)
echo "bench_pictures: 4096-rank plan page made in $(python3 -c "print(f'{$end - $start:.2f}')") s (plan + page)"
python3 test/python/page_check.py "$tmp/plan-4096.html" --islands 2 --stages 16 --nodes 512 --time
uptime
