#!/usr/bin/env bash
# Planner benchmark (not a timed test): --plan-only with auto degrees for a generated cluster
# of NODES nodes x 8 GPUs in three islands (half InfiniBand, a quarter RoCE, a quarter a
# second InfiniBand fabric, all joined by 25 GbE), text and JSON, best of REPEAT runs.
#   scripts/bench_plan.sh [BINARY] [NODES] [REPEAT]
# Default binary: build/holmes-train. Prints the wall time of each format.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$src/build/holmes-train}
nodes=${2:-1024}
repeat=${3:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
a=$((nodes / 2)) b=$((nodes / 4))
c=$((nodes - a - b))
cat >"$tmp/topology.yaml" <<YAML
nodes:
  - names: ib-a[0-$((a - 1))]
    devices: {kind: cuda, count: 8, name: H100, memory_gb: 80, peak_tflops: 989}
    nics: [{kind: ib, name: "mlx5_[0-7]", rate_gbps: 400, fabric: ib-a}, {kind: ethernet, name: eth0, rate_gbps: 25}]
  - names: roce-b[0-$((b - 1))]
    devices: {kind: cuda, count: 8, name: H100, memory_gb: 80, peak_tflops: 989}
    nics: [{kind: roce, name: "mlx5_[0-3]", rate_gbps: 200, fabric: roce-b}, {kind: ethernet, name: eth0, rate_gbps: 25}]
  - names: ib-c[0-$((c - 1))]
    devices: {kind: cuda, count: 8, name: H100, memory_gb: 80, peak_tflops: 989}
    nics: [{kind: ib, name: "mlx5_[0-7]", rate_gbps: 200, fabric: ib-c}, {kind: ethernet, name: eth0, rate_gbps: 25}]
YAML
cat >"$tmp/job.yaml" <<YAML
model: {layers: 36, hidden: 4096, heads: 32, vocab_size: 50257, max_seq_len: 2048}
train: {steps: 100, micro_batch: 1, global_batch: $((nodes * 4)), seq_len: 2048}
parallel: {tensor: auto, pipeline: auto, data: auto}
cluster: {topology: $tmp/topology.yaml}
YAML
for format in text json; do
  best=""
  for _ in $(seq "$repeat"); do
    start=$(date +%s%N)
    "$bin" --config "$tmp/job.yaml" --plan-only --format "$format" >"$tmp/out.$format"
    t=$(($(date +%s%N) - start))
    if [ -z "$best" ] || [ "$t" -lt "$best" ]; then best=$t; fi
  done
  printf '%s nodes x 8 GPUs, auto degrees, --format %s: best of %s = %d ms (%s bytes)\n' \
    "$nodes" "$format" "$repeat" $((best / 1000000)) "$(wc -c <"$tmp/out.$format")"
done
grep -E "^Plan:|step time" "$tmp/out.text"
