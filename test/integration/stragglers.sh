#!/usr/bin/env bash
# A rank made persistently slower than its peers is named (docs/training.md, "Stragglers"):
# a 4-process CPU job of two sync replicas, each a 2-stage pipeline, whose rank 3 (stage 1 of
# replica 1) sleeps 100 ms in every forward pass (HOLMES_TEST_SLOW_RANK): 400 ms more compute a
# step than its one peer (stage 1 of replica 0), whose step computes in a few ms. The log names rank 3 and
# replica 1 and nobody else, the metrics rows carry them with their ratio over the threshold
# (2.0: 3x, generous against a loaded machine's noise), the summary says who straggled, and
# the run report has a row for each (in Chromium when there is one). The fault lab takes the
# first straggler line as a slow node's detection.
# Usage: stragglers.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"

job=("${tiny_job[@]}" --set parallel.replicas=2 --set parallel.outer=sync --set parallel.tensor=1
  --set parallel.pipeline=2 --set parallel.data=1 --set log.interval=2 --set log.straggler_threshold=2
  --set log.straggler_lines=3 --nproc-per-node 4)

# A bad hook value is refused before work starts.
code=0
HOLMES_TEST_SLOW_RANK=3 timeout 120 "$exe" "${job[@]}" --set job.output_dir="$tmp/bad" >"$tmp/bad.log" 2>&1 || code=$?
[ "$code" -ne 0 ] && grep -q "HOLMES_TEST_SLOW_RANK: '3' is not accepted" "$tmp/bad.log" ||
  bad "HOLMES_TEST_SLOW_RANK=3: exit $code, expected a message naming the hook" "$tmp/bad.log"
no_leftovers "the refused hook"

HOLMES_TEST_SLOW_RANK=3:100 timeout 300 "$exe" "${job[@]}" --set job.output_dir="$tmp/run" >"$tmp/run.log" 2>&1 ||
  bad "the 4-process run with a slow rank" "$tmp/run.log"
grep -E "^\[rank 0\] straggler: rank 3 \(node [^,]+, stage 1, replica 1\) [0-9.]+x its 1 peer's compute since step [0-9]+$" \
  "$tmp/run.log" >/dev/null || bad "the log does not name rank 3 as a straggler" "$tmp/run.log"
grep -E "^\[rank 0\] straggler: replica 1 \(ranks [0-9]+, [0-9]+\) [0-9.]+x the other replica's mean compute since step" "$tmp/run.log" \
  >/dev/null || bad "the log does not name replica 1" "$tmp/run.log"
[ "$(grep -c '^\[rank 0\] straggler: ' "$tmp/run.log")" -eq 2 ] || bad "the log names more than rank 3 and replica 1" "$tmp/run.log"
grep -q "^\[rank 0\] stragglers: 2 named" "$tmp/run.log" && grep -q "^\[rank 0\]   rank 3 (node .*) from step [0-9]* to the end" "$tmp/run.log" ||
  bad "the run's summary does not say who straggled" "$tmp/run.log"

/usr/bin/python3 - "$tmp/run/metrics.jsonl" <<'PY' || bad "metrics: the stragglers"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
checked = [r for r in rows if "stragglers" in r]
assert checked, "no row carries the straggler check"
named = [r for r in checked if r["stragglers"]]
assert named, "no row names a straggler"
for r in checked:
    assert len(r["compute_ms_ranks"]) == 4, r
    assert all(s["rank"] == 3 for s in r["stragglers"]), f"a rank other than 3 named: {r['stragglers']}"
    assert all(s["replica"] == 1 for s in r["straggler_replicas"]), f"a replica other than 1: {r['straggler_replicas']}"
    for s in r["stragglers"] + r["straggler_replicas"]:
        assert s["ratio"] > 3 and s["peers"] == 1 and 1 <= s["since"] <= r["figures_step"], s
last = checked[-1]
assert [s["rank"] for s in last["stragglers"]] == [3], f"rank 3 is not named at the end: {last}"
assert [s["replica"] for s in last["straggler_replicas"]] == [1], last
# Rank 3's own figure is its peer's and more: the sleep is inside its compute.
assert last["compute_ms_ranks"][3] > 3 * last["compute_ms_ranks"][1], last["compute_ms_ranks"]
print(f"{len(named)} of {len(checked)} checked rows name rank 3, ratio {last['stragglers'][0]['ratio']:.1f} at the end")
PY

# The fault lab counts the first straggler line as a slow node's detection (docs/lab.md,
# "Faults"), whichever rank prints it; a recovery line or another fault kind's is none.
PYTHONPATH="$src/scripts/lab" /usr/bin/python3 - "$tmp/run.log" <<'PY' || bad "the fault lab does not detect a slow node by its straggler line"
import re, sys
from labkit.faults import detected_at
lines = []
for i, l in enumerate(open(sys.argv[1])):
    m = re.match(r"\[rank (\d+)\] (.*)", l.rstrip("\n"))
    if m:
        lines.append((float(i), int(m.group(1)), m.group(2)))
first = next(t for t, r, text in lines if text.startswith("straggler: rank 3"))
assert detected_at("slow", 0.0, lines, [], {0, 1, 2, 3}) == first, "the straggler line is not the detection"
assert detected_at("kill", 0.0, lines, [], {0, 1, 2, 3}) is None, "a straggler line detected a kill"
back = [(1.0, 0, "straggler: rank 3 (node a, stage 1) back within 20% of its 1 peer's compute at step 9 (a straggler "
         "from step 1, at worst 3.00x)")]
assert detected_at("slow", 0.0, back, [], set()) is None, "a recovery line counted as a detection"
print("the fault lab's detection of a slow node: line", int(first))
PY

"$exe" report "$tmp/run" --out "$tmp/report.html" >"$tmp/report.log" 2>&1 || bad "report" "$tmp/report.log"
[ "$(grep -o '<tr class="straggler"' "$tmp/report.html" | wc -l)" -eq 2 ] ||
  bad "the report page does not have one straggler row each for rank 3 and replica 1"
if command -v chromium >/dev/null; then
  timeout 300 /usr/bin/python3 "$src/test/python/page_check.py" "$tmp/report.html" --stragglers "rank 3,replica 1" \
    >"$tmp/render.log" 2>&1 || bad "the report page in Chromium" "$tmp/render.log"
  grep -h "^page_check" "$tmp/render.log"
else
  echo "no chromium: the report page was checked as text only"
fi
finish
