#!/usr/bin/env bash
# train.precision: fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or newer).
# On a machine without one, every way of starting a run refuses it with exit 2, naming the
# device and what is accepted, before any work: no step, no run folder, no worker spawned.
# (On a GPU with FP8, the refusal cases do not apply: HOLMES_SKIP.)
# Usage: fp8_device.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
cd "$tmp"
if "$bin" discover --format json 2>/dev/null | python3 -c '
import json, sys
sys.exit(0 if json.load(sys.stdin)["devices"]["kind"] == "cuda" else 1)' 2>/dev/null; then
  echo "HOLMES_SKIP: this machine has a GPU; the refusal on the CPU does not apply here"
  exit 0
fi
refused() {  # refused NAME LOG FRAGMENT...: exit 2, every fragment, no work started
  local name=$1 log=$2; shift 2
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$log"
  for f in "$@"; do grep -qF -- "$f" "$log" || bad "$name: message lacks '$f'" "$log"; done
  ! grep -q 'step \|\[rank\|bench:' "$log" || bad "$name: started work before refusing" "$log"
}
fp8=(--set train.precision=fp8)
# Single process: job.device auto (no GPU here) and cpu, each naming why it is the CPU.
run "$tmp/auto" 3 "${fp8[@]}"
refused "fp8, job.device auto" "$tmp/auto.log" "train.precision: 'fp8' needs a GPU with FP8 tensor cores" \
  "compute capability 8.9 or newer" "trains on the CPU (job.device auto:" "accepted here: auto, fp32"
[ ! -e "$tmp/auto" ] || bad "fp8, job.device auto: the run folder was written" "$tmp/auto.log"
run "$tmp/cpu" 3 "${fp8[@]}" --set job.device=cpu
refused "fp8, job.device cpu" "$tmp/cpu.log" "trains on the CPU (job.device: cpu)"
# job.device cuda without a GPU: the device's own refusal comes first, naming job.device.
run "$tmp/cuda" 3 "${fp8[@]}" --set job.device=cuda
refused "fp8, job.device cuda" "$tmp/cuda.log" "job.device: 'cuda'"
# The launcher refuses before spawning workers; bench refuses before timing.
run "$tmp/two" 3 "${fp8[@]}" --nproc-per-node 2 --set parallel.data=2
refused "fp8, --nproc-per-node 2" "$tmp/two.log" "train.precision: 'fp8' needs a GPU"
"$bin" bench --steps 1 --set model.layers=2 --set model.hidden=32 --set model.heads=2 "${fp8[@]}" >"$tmp/bench.log" 2>&1
rc=$?
refused "fp8, bench" "$tmp/bench.log" "train.precision: 'fp8' needs a GPU"
# The spec itself is valid: --print-config shows it, and a misspelling names the choices.
"$bin" "${fp8[@]}" --print-config >"$tmp/print.log" 2>&1 || bad "fp8 --print-config failed" "$tmp/print.log"
grep -q "precision: fp8" "$tmp/print.log" || bad "--print-config does not show precision fp8" "$tmp/print.log"
"$bin" --set train.precision=fp9 --print-config >"$tmp/fp9.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -qF "fp8" "$tmp/fp9.log" || bad "train.precision fp9: exit $rc or no list of choices" "$tmp/fp9.log"
[ "$fail" -eq 0 ] && echo "fp8 device checks: ok"
exit "$fail"
