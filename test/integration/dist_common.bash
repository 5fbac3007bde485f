# Shared by the dist_*.sh integration tests (sourced; not a test itself). A tiny model so a
# multi-process job runs in seconds on two cores; every run is bounded in time.
# Needs: $bin (holmes-train), $tmp (scratch folder). Defines $exe, a link to the binary with a
# unique name so that `pgrep -f $marker` finds every process of the test and nothing else.
marker="holmes-dist-test-$$-$RANDOM"
ln -s "$(readlink -f "$bin")" "$tmp/$marker"
exe="$tmp/$marker"
fail=0
export OMP_NUM_THREADS=1 HOLMES_LAUNCH_GRACE_S=2
cleanup() { pkill -KILL -f "$marker" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# The job every dist test trains (single-process equivalent: the same flags without workers).
tiny_job=(--set model.layers=6 --set model.hidden=64 --set model.heads=4 --set model.max_seq_len=32
  --set train.seq_len=32 --set train.micro_batch=2 --set train.global_batch=16 --set train.steps=20
  --set train.warmup_steps=2 --set train.eval_interval=0 --set log.interval=1
  --set data.synthetic.tokens=100000 --set cluster.device_tflops=1 --set checkpoint.interval=0)

bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -40; fail=1; }
no_leftovers() {  # no_leftovers WHAT: waits up to 5 s for every process of the test to end
  for _ in $(seq 50); do pgrep -f "$marker" >/dev/null || return 0; sleep 0.1; done
  bad "$1: processes left: $(pgrep -af "$marker" | tr '\n' ';')"
}
# wait_for CONDITION-COMMAND SECONDS: polls every 0.1 s
wait_for() {
  local n=$(( $2 * 10 ))
  for _ in $(seq "$n"); do eval "$1" && return 0; sleep 0.1; done
  return 1
}
# Exits the test as skipped where no interface but loopback has an IPv4 address: a group across
# "nodes" played by one machine binds to the plan's Ethernet interface.
skip_without_ethernet() {
  "$exe" discover --format json | /usr/bin/python3 -c '
import json, sys
nics = json.load(sys.stdin)["nics"]
sys.exit(0 if any(n["kind"] == "ethernet" and n["state"] == "active" and n["addresses"] for n in nics) else 1)' && return 0
  echo "HOLMES_SKIP: no active Ethernet interface with an IPv4 address on this machine"
  exit 0
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
finish() { [ "$fail" -eq 0 ] && echo "PASS"; exit "$fail"; }
# matches_single NAME STEPS: $tmp/NAME/metrics.jsonl logs STEPS steps, each loss within 1e-4
# (relative) of $tmp/single/metrics.jsonl's
matches_single() {
  /usr/bin/python3 - "$tmp/single/metrics.jsonl" "$tmp/$1/metrics.jsonl" "$2" <<'PY'
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p)) if "loss" in r] for p in sys.argv[1:3])
n = int(sys.argv[3])
assert len(a) == n and len(b) == n, f"{len(a)} and {len(b)} steps logged, expected {n}"
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
assert worst < 1e-4, f"largest relative difference {worst:.2e}"
print(f"largest relative difference {worst:.1e}")
PY
}
