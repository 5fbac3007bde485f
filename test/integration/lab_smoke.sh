#!/usr/bin/env bash
# The lab's smoke test (docs/lab.md): scripts/lab/scenarios/smoke.yaml, holmes against
# megatron on two emulated islands for a few steps. Both train to bit-identical losses;
# holmes keeps data parallelism on the island fabrics while megatron runs every group over
# Ethernet; a namespace a crashed run left is removed by the next run; an interrupted run
# leaves no namespace and no process, whenever the signal arrives; a bad scenario is exit 2.
# Timing is the bench's job (scripts/lab/bench.sh), not this test's. Needs root (network
# namespaces, tc).
# Usage: lab_smoke.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
source "$(dirname "$0")/lab_common.bash"
stale="hlab$$-n0"  # named for this shell, which is no lab run: what a crashed run leaves
cleanup() { ip netns del "$stale" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
sc=$src/scripts/lab/scenarios/smoke.yaml

ip netns add "$stale"
for case in holmes megatron; do
  timeout 300 "$src/scripts/lab/run.sh" "$sc" "$case" --out "$tmp/$case" >"$tmp/$case.log" 2>&1 \
    || bad "$case: exit $?" "$tmp/$case.log"
  tag=$(tag_of "$tmp/$case.log")
  [ -n "$tag" ] && gone "$tag" || bad "$case: namespaces ${tag:-?}-* left behind" "$tmp/$case.log"
done
grep -q "removed 1 namespace(s) an earlier lab run left behind" "$tmp/holmes.log" && gone "hlab$$" \
  || bad "the stale namespace was not removed" "$tmp/holmes.log"
grep -Eq "^  dp +1 x 2 +gloo-tcp over ib \[ib0\]" "$tmp/holmes.log" \
  && grep -Eq "^  dp +1 x 2 +gloo-tcp over roce \[ens1f0\]" "$tmp/holmes.log" \
  && grep -Eq "^  pp +2 x 2 +gloo-tcp over ethernet, crosses islands \[eth0\]" "$tmp/holmes.log" \
  || bad "holmes: data parallelism should stay on the island fabrics, the pipeline cross on Ethernet" "$tmp/holmes.log"
# Both runs measured their Ethernet bytes over a step; megatron's data parallelism crosses
# Ethernet every step, holmes sends only pipeline tensors over it: megatron sends more.
eth_of() { sed -n 's/.* \([0-9.]*\) MB per step sent over Ethernet by all nodes.*/\1/p' "$1"; }
h=$(eth_of "$tmp/holmes.log") m=$(eth_of "$tmp/megatron.log")
[ -n "$h" ] && [ -n "$m" ] && awk -v h="$h" -v m="$m" 'BEGIN { exit !(h > 0 && m > h) }' \
  || bad "Ethernet bytes per step: holmes '$h' MB, megatron '$m' MB (both measured, megatron more)" "$tmp/holmes.log"
grep -Eq "^  dp +2 x 2 +gloo-tcp over ethernet, crosses islands \[eth0\]" "$tmp/megatron.log" \
  && ! grep -Eq "gloo-tcp over (ib|roce)" "$tmp/megatron.log" \
  || bad "megatron: every group should run over Ethernet" "$tmp/megatron.log"
same_losses holmes megatron 12
# The bench's split of a step (docs/lab.md "bench"): the ranks' wait on communication is measured
# and, window by window, a part of the steps it was priced at (each rank's share of its own
# step is at most 1; averaged over the ranks and priced at the window's mean step it cannot
# exceed that step, however uneven a loaded machine makes the steps: the median wait against
# the median step could, and made this test fail now and then).
/usr/bin/python3 - "$src/scripts/lab" "$tmp/holmes" "$tmp/megatron" <<'PY' || fail=1
import sys
sys.path.insert(0, sys.argv[1])
from labkit import job
for d in sys.argv[2:4]:
    r = job.results(d)
    windows = r["wait_windows_ms"]
    if r["wait_s"] is None or not r["wait_s"] > 0 or not windows or \
            not all(0 <= wait <= step * (1 + 1e-9) for wait, step in windows):
        sys.exit(f"FAIL {d}: waits {windows} (ms, against each window's mean step) are not parts of their steps")
    # The loop period: every step after the first, step_ms and the loop's time before it.
    if r["loop_ms"][0] is not None or not all(l is not None and l >= s for l, s in zip(r["loop_ms"][1:], r["step_ms"][1:])):
        sys.exit(f"FAIL {d}: loop periods {r['loop_ms']} against steps {r['step_ms']}")
print("wait on communication: a part of every step; loop periods from the second step")
# Per-rank shares reduced in the background cover the steps up to figures_step: priced at
# those steps' step_ms (a row carrying the previous step's shares, then the last two steps').
rows = [{"step": 1, "step_ms": 100, "comm_share_ranks": [0.5, 0.5], "figures_step": 1},
        {"step": 2, "step_ms": 200},
        {"step": 3, "step_ms": 300, "comm_share_ranks": [0.1, 0.3], "figures_step": 2},
        {"step": 4, "step_ms": 500, "comm_share_ranks": [0.5, 0.5], "figures_step": 4}]
if job.rank_wait_windows(rows) != [(1, 50.0, 100.0), (2, 40.0, 200.0), (3, 200.0, 400.0)]:
    sys.exit(f"FAIL rank_wait_windows {job.rank_wait_windows(rows)}")
PY

# Stop signals (a longer run of the same scenario, started in the background as a script does:
# SIGINT ignored, as a shell starts background jobs): every one stops the lab, whenever it
# arrives - at once, while Python starts, while the workers train, a second one during the
# clean-up - with exit 128+N and nothing left behind. A lost signal shows as a lab that runs
# on (to the scenario's timeout_s, 120 s); 60 s is the bound here, not a timing claim.
sed 's/steps: 12}/steps: 100000}/' "$sc" >"$tmp/long.yaml"
for how in INT:0 INT:0.05 INT:step TERM:step INT+TERM:step; do
  sigs=${how%%:*} when=${how#*:} out="$tmp/int-${how//[:+.]/_}"
  "$src/scripts/lab/run.sh" "$tmp/long.yaml" holmes --out "$out" >"$out.log" 2>&1 &
  pid=$!
  if [ "$when" = step ]; then
    for _ in $(seq 600); do [ -s "$out/out/metrics.jsonl" ] && break; sleep 0.1; done
  else
    # From the moment the job is the lab's Python (run.sh exec'd it): before that it is the
    # shell that runs run.sh, which holds SIGINT ignored as this script's shell started it
    # (a background job), and no program can take a signal sent then.
    for _ in $(seq 20000); do
      [ "$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)" = /usr/bin/python3 ] && break
    done
    sleep "$when"
  fi
  tag=$(tag_of "$out.log")
  kill -"${sigs%%+*}" "$pid"
  [ "$sigs" = INT+TERM ] && { sleep 0.05; kill -TERM "$pid" 2>/dev/null; }
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    bad "$how: the lab ran on 60 s after the signal" "$out.log"
    kill -KILL "$pid"
  fi
  wait "$pid"
  code=$?
  want=130
  [ "${sigs%%+*}" = TERM ] && want=143
  [ "$code" -eq "$want" ] || bad "$how: exit $code, expected $want" "$out.log"
  [ -z "$tag" ] || gone "$tag" || bad "$how: namespaces $tag-* left behind" "$out.log"
  ! ip netns list | grep -q "^hlab$pid-" || bad "$how: namespaces hlab$pid-* left behind" "$out.log"
  pgrep -f "$out/job.yaml" >/dev/null && bad "$how: workers left: $(pgrep -af "$out/job.yaml")"
done
echo "stop signals: every one stopped the lab, nothing left behind"

# A bad scenario is refused before anything is built.
sed 's/kind: ib,/kind: infiniband,/' "$sc" >"$tmp/bad.yaml"
"$src/scripts/lab/run.sh" "$tmp/bad.yaml" holmes >"$tmp/bad.log" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "islands.ib-a.kind: 'infiniband' is not accepted; expected ib or roce or ethernet" "$tmp/bad.log" \
  || bad "bad scenario: exit $code" "$tmp/bad.log"
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
