#!/usr/bin/env bash
# train.recompute on the CPU backend, as a user runs it:
#   - memory: the peak RSS of none, selective and full runs of a job whose activations dominate
#     differs by what the planner's memory model predicts (--plan-only --format json), within 10%;
#   - a device too small for `none` (a topology file giving it 0.25 GB) refuses none with exit 2
#     and says recomputation would fit; auto runs, with the mode the plan chose;
#   - exactness: selective and full give none's losses bit for bit, and a full run killed by
#     SIGKILL resumes from its checkpoint to the same losses.
# Usage: recompute.sh <holmes-train> <source dir>
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -30; fail=1; }
export OMP_NUM_THREADS=2
# 8 layers of C=128 at T=256, micro-batch 16: the kept activations are ~395 MiB with none,
# ~72 MiB with full, against ~25 MiB of weights and optimizer.
job=(--set job.device=cpu --set model.layers=8 --set model.hidden=128 --set model.heads=4 --set model.max_seq_len=256
  --set train.seq_len=256 --set train.micro_batch=16 --set train.global_batch=16 --set train.eval_interval=0
  --set data.synthetic.tokens=200000 --set cluster.device_tflops=1 --set checkpoint.keep=10)

# peak_rss NAME MODE STEPS [ARGS...]: trains into $tmp/NAME; prints the process's peak RSS in bytes.
peak_rss() {
  local name=$1 mode=$2 steps=$3
  shift 3
  python3 - "$bin" "${job[@]}" --set train.recompute="$mode" --set train.steps="$steps" \
    --set job.output_dir="$tmp/$name" "$@" 3>"$tmp/$name.rss" <<'PY' >"$tmp/$name.log" 2>&1
import os, resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
os.write(3, f"{rc} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}\n".encode())
PY
  read -r rc rss <"$tmp/$name.rss"
  [ "$rc" -eq 0 ] || bad "$name: exit $rc" "$tmp/$name.log"
  echo "$rss"
}
predicted() {  # predicted MODE: the plan's activation bytes of the job's one rank
  "$bin" "${job[@]}" --set train.steps=1 --set train.recompute="$1" --plan-only --format json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['memory'][0]['activations'])"
}

rss_none=$(peak_rss none none 4)
rss_sel=$(peak_rss selective selective 4)
rss_full=$(peak_rss full full 4)
python3 - "$rss_none" "$rss_sel" "$rss_full" "$(predicted none)" "$(predicted selective)" "$(predicted full)" <<'PY' || fail=1
import sys
none, sel, full, p_none, p_sel, p_full = map(float, sys.argv[1:])
ok = True
for name, got, want in (("full", none - full, p_none - p_full), ("selective", none - sel, p_none - p_sel)):
    err = abs(got - want) / want
    print(f"{name}: peak RSS {got / 2**20:.1f} MiB below none's, the memory model predicts {want / 2**20:.1f} MiB "
          f"({100 * err:.1f}% off)")
    ok &= err <= 0.10
sys.exit(0 if ok else "FAIL measured and predicted savings differ by more than 10%")
PY

# The losses of every mode are none's, bit for bit.
python3 - "$tmp"/none/metrics.jsonl "$tmp"/selective/metrics.jsonl "$tmp"/full/metrics.jsonl <<'PY' || fail=1
import json, sys
def losses(p): return [r["loss"] for r in map(json.loads, open(p)) if "step_ms" in r]
ref = losses(sys.argv[1])
for path in sys.argv[2:]:
    if losses(path) != ref:
        sys.exit(f"FAIL {path}: losses {losses(path)} differ from none's {ref}")
print(f"selective and full: the {len(ref)} losses of none, bit for bit")
PY

# A device of 0.25 GB (0.225 GiB usable): none needs ~0.41 GiB, selective ~0.2.
"$bin" discover --format yaml | sed -E 's/memory_gb: [0-9.e+-]+/memory_gb: 0.25/' >"$tmp/small.yaml"
"$bin" "${job[@]}" --topology "$tmp/small.yaml" --set train.steps=1 --set train.recompute=none \
  --set job.output_dir="$tmp/small_none" >"$tmp/small_none.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || bad "none on a small device: exit $rc, expected 2" "$tmp/small_none.log"
grep -q "does not fit in device memory.*set train.recompute: auto" "$tmp/small_none.log" ||
  bad "none on a small device: no advice to recompute" "$tmp/small_none.log"
"$bin" "${job[@]}" --topology "$tmp/small.yaml" --set train.steps=4 --set job.output_dir="$tmp/small_auto" \
  >"$tmp/small_auto.log" 2>&1 || bad "auto on a small device: exit $?" "$tmp/small_auto.log"
grep -q "recompute: selective" "$tmp/small_auto.log" || bad "auto on a small device: not selective" "$tmp/small_auto.log"

# Exact resume with full: killed after step 3 with a checkpoint every 2 steps, resumed at 2.
HOLMES_TEST_SIGNAL_AFTER_STEP=3:KILL "$bin" "${job[@]}" --set train.recompute=full --set train.steps=4 \
  --set checkpoint.interval=2 --set job.output_dir="$tmp/killed" >"$tmp/killed.log" 2>&1
rc=$?
[ "$rc" -eq 137 ] || bad "killed run: exit $rc, expected 137" "$tmp/killed.log"
"$bin" "${job[@]}" --set train.recompute=full --set train.steps=4 --set checkpoint.interval=2 \
  --set job.output_dir="$tmp/killed" --resume auto >>"$tmp/killed.log" 2>&1 || bad "resumed run: exit $?" "$tmp/killed.log"
grep -q "resume: continuing from .*step-00000002 at step 2" "$tmp/killed.log" || bad "did not resume at step 2" "$tmp/killed.log"
python3 - "$tmp"/none/metrics.jsonl "$tmp"/killed/metrics.jsonl <<'PY' || fail=1
import json, sys
def losses(p): return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "step_ms" in r}
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
if got != ref:
    sys.exit(f"FAIL resumed full run: losses {got} differ from none's {ref}")
print("full, killed and resumed: none's losses bit for bit")
PY

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
