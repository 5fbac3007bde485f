#!/usr/bin/env bash
# cluster.calibrate: a 4-worker job (pipeline 2 x data 2) measures its links and compute and
# writes a calibration file that --plan-only then reads; a tensor-parallel pair records what its
# sums cost in the steps; a single process refuses the key.
# Usage: dist_calibrate.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
job=("${tiny_job[@]}" --set train.steps=6 --set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.data=2
  --set cluster.timeout_s=30 --set job.output_dir="$tmp/out")
timeout 120 "$exe" "${job[@]}" --set cluster.calibrate="$tmp/cal/calibration.yaml" --nproc-per-node 4 \
  >"$tmp/run.log" 2>&1 || bad "calibrating run: exit $?" "$tmp/run.log"
grep -Eq "^\[rank 0\] calibration: stage 1 \([0-9]+ layers\): .* TFLOP/s per device measured" "$tmp/run.log" \
  || bad "no compute line" "$tmp/run.log"
grep -q "^\[rank 0\] calibration: intra-node links: .* Gb/s per rank measured" "$tmp/run.log" \
  || bad "no link line" "$tmp/run.log"
/usr/bin/python3 - "$tmp/cal/calibration.yaml" <<'PY' || bad "calibration file" "$tmp/cal/calibration.yaml"
import sys
text = open(sys.argv[1]).read()
assert "format: holmes-calibration/2" in text, text
# The devices it was measured on, and when: a CPU job's figures never price a GPU plan.
device = [l for l in text.splitlines() if l.startswith("device: {kind: cpu")]
assert device and "date: " in device[0], text
line = [l for l in text.splitlines() if l.strip().startswith("device_tflops:")][0]
assert float(line.split(":")[1]) > 0, line
# CPU workers: the passes' FLOPs per CPU second of a whole worker (the quota bound's rate).
cpu = [l for l in text.splitlines() if l.strip().startswith("cpu_tflops:")][0]
assert float(cpu.split(":")[1]) > 0, cpu
assert "intra-node: {efficiency: " in text, text
PY
"$exe" "${job[@]}" --nproc-per-node 4 --plan-only --set cluster.calibration="$tmp/cal/calibration.yaml" \
  >"$tmp/plan.txt" 2>&1 || bad "--plan-only with the calibration: exit $?" "$tmp/plan.txt"
grep -q "^Calibration (job '.*', 4 ranks" "$tmp/plan.txt" || bad "--plan-only does not show it" "$tmp/plan.txt"
# Tensor parallelism: its sums are priced from what they cost inside the steps (the idle
# start-up probe sees a fraction of it): the file says how long one took.
tp_job=("${tiny_job[@]}" --set train.steps=5 --set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.data=1
  --set cluster.timeout_s=30 --set job.output_dir="$tmp/tp-out")
timeout 120 "$exe" "${tp_job[@]}" --set cluster.calibrate="$tmp/tp.yaml" --nproc-per-node 2 >"$tmp/tp.log" 2>&1 \
  || bad "calibrating tp run: exit $?" "$tmp/tp.log"
grep -Eq "^\[rank 0\] calibration: intra-node tensor-parallel sums in the steps: [0-9.e+-]+ ms each .*priced from the steps" \
  "$tmp/tp.log" || bad "no in-step tp sum line" "$tmp/tp.log"
grep -Eq "intra-node: \{efficiency: .*tp_sum_ms: [0-9.e+-]+\}" "$tmp/tp.yaml" || bad "no tp_sum_ms" "$tmp/tp.yaml"
# The sums' CPU priced apart (its own figure; no steps' figure for the other bytes, which the
# sums' I/O would swamp): the CPU-time rate then holds for plans of every tensor degree.
grep -Eq "^  host_comm_tp_ns_per_byte: [0-9.e+-]+$" "$tmp/tp.yaml" || bad "no host_comm_tp_ns_per_byte" "$tmp/tp.yaml"
grep -q "host_comm_steps_ns_per_byte" "$tmp/tp.yaml" && bad "a tp2 file wrote a steps' host figure" "$tmp/tp.yaml"
grep -Eq "^\[rank 0\] calibration: tensor-parallel sums [0-9.e+-]+ ns of CPU per byte" "$tmp/tp.log" \
  || bad "no tp sums CPU line" "$tmp/tp.log"
"$exe" "${tiny_job[@]}" --set cluster.calibrate="$tmp/x.yaml" --set job.output_dir="$tmp/single" >"$tmp/single.log" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "cluster.calibrate" "$tmp/single.log" || bad "single process: exit $code" "$tmp/single.log"
no_leftovers "calibrate"
finish
