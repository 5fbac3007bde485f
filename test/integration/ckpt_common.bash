# Shared by the ckpt_*.sh integration tests: a tiny job, loss comparison, failure reporting.
# Source it after setting bin=<holmes-train>.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -40; fail=1; }
# A tiny model (milliseconds per step; a set device peak skips the sgemm probe), cosine
# schedule after 3 warm-up steps.
tiny=(--set model.layers=2 --set model.hidden=32 --set model.heads=2 --set model.max_seq_len=32
  --set train.seq_len=32 --set train.micro_batch=2 --set train.global_batch=4 --set train.warmup_steps=3
  --set train.eval_interval=0 --set log.interval=1000 --set checkpoint.keep=10 --set cluster.device_tflops=1)
export OMP_NUM_THREADS=1  # polite on shared CI machines; every run of a test uses the same
# run OUT_DIR STEPS [ARGS...]: the tiny job into OUT_DIR; output in OUT_DIR.log, exit code in $rc.
run() {
  local out=$1 steps=$2
  shift 2
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps="$steps" "$@" >>"$out.log" 2>&1
  rc=$?
}
# same_losses REFERENCE_METRICS FIRST_STEP LAST_STEP METRICS...: the losses of steps
# FIRST..LAST in the concatenated METRICS files equal the reference's bit for bit, and each of
# those steps is logged once (a resumed run continues metrics.jsonl without repeats).
# LOSS_TOL=1e-5 relaxes "bit for bit" to a relative tolerance (another parallel layout).
same_losses() {
  python3 - "$@" <<'PY'
import json, sys
ref, lo, hi, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def losses(paths):
    out, seen = {}, []
    for p in paths:
        for line in open(p):
            r = json.loads(line)
            if "loss" in r and "step_ms" in r:
                out[r["step"]] = r["loss"]
                seen.append(r["step"])
    return out, seen
(a, _), (b, seen) = losses([ref]), losses(files)
repeated = sorted({s for s in seen if lo <= s <= hi and seen.count(s) > 1})
if repeated:
    print("steps logged more than once:", repeated[:10])
    sys.exit(1)
import os
tol = float(os.environ.get("LOSS_TOL", "0"))
bad = [(s, a.get(s), b.get(s)) for s in range(lo, hi + 1)
       if s not in a or s not in b or abs(a[s] - b[s]) > tol * abs(a[s])]
if bad:
    print(f"losses differ beyond {tol} relative (step, uninterrupted, resumed):", bad[:5])
    sys.exit(1)
print(f"steps {lo}..{hi}: losses " + ("bit-identical" if tol == 0 else f"within {tol} relative"))
PY
}
