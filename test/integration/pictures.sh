#!/usr/bin/env bash
# The pages in a real browser (docs/pictures.md): the plan of configs/ib-roce-7b.yaml, a
# 4096-rank plan (under 2 MB, one glyph per node), the report of a 4-process CPU run (live,
# with its refresh, and finished), partial run folders, and a lab bench.html, each rendered by
# headless Chromium and checked from its DOM: every island and stage, a loss curve with one
# point per metrics row, nothing outside the page. Without Chromium the browser checks are
# skipped (HOLMES_SKIP) after the checks that need none. HOLMES_SCREENSHOTS=DIR keeps the
# screenshots there (docs/img/ is made that way).
# Usage: pictures.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
source "$(dirname "$0")/dist_common.bash"
shots=${HOLMES_SCREENSHOTS:-$tmp/shots}
mkdir -p "$shots"
check_page="/usr/bin/python3 $src/test/python/page_check.py"
have_browser=1
command -v chromium >/dev/null || have_browser=0
# render PAGE SHOT ARGS...: the browser checks (when there is a browser)
render() {
  local page=$1 shot=$2; shift 2
  [ "$have_browser" = 1 ] || return 0
  timeout 300 $check_page "$page" --screenshot "$shots/$shot" "$@" >"$tmp/render.log" 2>&1 ||
    bad "$page: browser checks" "$tmp/render.log"
  grep -h "^page_check" "$tmp/render.log"
}
# expect_plan JSON: "ISLANDS STAGES NODES" of a plan's JSON
expect_plan() {
  /usr/bin/python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))
print(sum(1 for i in p["islands"] if i["nodes"]), p["pipeline"], len(p["nodes"]))' "$1"
}

# 1. The plan of configs/ib-roce-7b.yaml.
"$exe" --config "$src/configs/ib-roce-7b.yaml" --plan-only --format html >"$tmp/plan.html" 2>"$tmp/plan.err" ||
  bad "plan html" "$tmp/plan.err"
"$exe" --config "$src/configs/ib-roce-7b.yaml" --plan-only --format json >"$tmp/plan.json" 2>/dev/null ||
  bad "plan json"
read -r islands stages nodes < <(expect_plan "$tmp/plan.json")
grep -q "<script" "$tmp/plan.html" && bad "the plan page has a script"
render "$tmp/plan.html" plan-ib-roce-7b.png --islands "$islands" --stages "$stages" --nodes "$nodes"

# 2. 4096 ranks: 256 IB + 256 RoCE nodes of 8 GPUs (tp 8 x pp 16 x dp 32): under 2 MB.
/usr/bin/python3 - "$tmp/big-topology.yaml" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("nodes:\n")
    for kind, name, rate, fabric in (("ib", "ib", 200, "a"), ("roce", "roce", 100, "b")):
        f.write(f"  - names: {name}-[0-255]\n    devices: {{kind: cuda, count: 8, name: H100-SXM, memory_gb: 80, "
                f"peak_tflops: 989}}\n    nics:\n      - {{kind: {kind}, name: \"mlx5_[0-7]\", rate_gbps: {rate}, "
                f"fabric: {fabric}{', gid_index: 3' if kind == 'roce' else ''}}}\n"
                f"      - {{kind: ethernet, name: eth0, rate_gbps: 25}}\n")
PY
big=(--config "$src/configs/ib-roce-7b.yaml" --topology "$tmp/big-topology.yaml" --set model.layers=64
  --set parallel.tensor=8 --set parallel.pipeline=16 --set parallel.data=32 --set train.global_batch=1024)
"$exe" "${big[@]}" --plan-only --format html >"$tmp/big.html" 2>"$tmp/big.err" || bad "4096-rank plan html" "$tmp/big.err"
size=$(stat -c %s "$tmp/big.html")
[ "$size" -lt $((2 * 1024 * 1024)) ] || bad "4096-rank plan page: $size bytes, expected under 2 MB"
grep -q 'data-world="4096"' "$tmp/big.html" || bad "4096-rank plan page: not a 4096-rank plan"
echo "4096-rank plan page: $size bytes"
render "$tmp/big.html" plan-4096.png --islands 2 --stages 16 --nodes 512

# 3. A 4-process CPU run (pipeline 2 x data 2): its report live (refresh), then finished.
run=(--set parallel.tensor=1 --set parallel.pipeline=2 --set parallel.data=2 --set train.eval_interval=5
  --set job.name='<b>pics</b>' --nproc-per-node 4)
timeout 300 "$exe" "${tiny_job[@]}" "${run[@]}" --set train.steps=2000 --set job.output_dir="$tmp/live" \
  >"$tmp/live.log" 2>&1 &
live_pid=$!
wait_for "[ -s $tmp/live/metrics.jsonl ] && [ \$(wc -l <$tmp/live/metrics.jsonl) -ge 3 ]" 120 ||
  bad "live run: no 3 metrics rows within 120 s" "$tmp/live.log"
"$exe" report "$tmp/live" --out "$tmp/live.html" >"$tmp/live-report.log" 2>&1 || bad "report of a live run" "$tmp/live-report.log"
grep -q 'http-equiv="refresh"' "$tmp/live.html" || bad "the live run's page does not refresh itself" "$tmp/live-report.log"
kill "$live_pid" 2>/dev/null
wait "$live_pid" 2>/dev/null

timeout 300 "$exe" "${tiny_job[@]}" "${run[@]}" --set job.output_dir="$tmp/run" >"$tmp/run.log" 2>&1 ||
  bad "4-process run" "$tmp/run.log"
[ -s "$tmp/run/plan.json" ] || bad "the run wrote no plan.json" "$tmp/run.log"
"$exe" report "$tmp/run" >"$tmp/report.log" 2>&1 || bad "report" "$tmp/report.log"
[ -s "$tmp/run/report.html" ] || bad "report: no RUN_DIR/report.html" "$tmp/report.log"
grep -q 'http-equiv="refresh"' "$tmp/run/report.html" && bad "the finished run's page refreshes itself"
grep -q '<b>pics' "$tmp/run/report.html" && bad "the job name is not escaped"
rows=$(grep -c '"loss"' "$tmp/run/metrics.jsonl")
vals=$(grep -c '"val_loss"' "$tmp/run/metrics.jsonl")
[ "$rows" -eq 20 ] || bad "4-process run: $rows training rows, expected 20"
grep -q '"comm_share_ranks": \[[^,]*,[^,]*,[^,]*,[^,]*\]' "$tmp/run/metrics.jsonl" ||
  bad "metrics rows carry no comm_share of each of the 4 ranks"
grep -q '"entropy_floor"' "$tmp/run/metrics.jsonl" || bad "metrics carry no entropy floor"
# One point per reduction of the ranks' figures (the rows that carry comm_share_ranks; the
# second row has none, its step's figures arrive with the third: docs/training.md "Log").
shares=$(grep -c '"comm_share_ranks"' "$tmp/run/metrics.jsonl")
read -r islands stages nodes < <(expect_plan "$tmp/run/plan.json")
render "$tmp/run/report.html" report-cpu-4.png --islands "$islands" --stages "$stages" --curve "loss=$rows" \
  --curve "validation loss=$vals" --curve "tokens/s=$rows" --curve "rank 3=$shares"

# 4. Partial and wrong inputs: a clear message, or a page that says what is missing.
code=0; "$exe" report "$tmp/nowhere" >"$tmp/bad.log" 2>&1 || code=$?
[ "$code" -eq 2 ] && grep -q "does not exist" "$tmp/bad.log" || bad "report of a missing folder: exit $code" "$tmp/bad.log"
mkdir -p "$tmp/notrun" && echo hi >"$tmp/notrun/x.txt"
code=0; "$exe" report "$tmp/notrun" >"$tmp/bad.log" 2>&1 || code=$?
[ "$code" -eq 2 ] && grep -q "is not a run folder" "$tmp/bad.log" || bad "report of a folder that is no run: exit $code" "$tmp/bad.log"
mkdir -p "$tmp/partial"
head -n 2 "$tmp/run/metrics.jsonl" >"$tmp/partial/metrics.jsonl"
sed -n 3p "$tmp/run/metrics.jsonl" | head -c 25 >>"$tmp/partial/metrics.jsonl"
"$exe" report "$tmp/partial" >"$tmp/partial.log" 2>&1 || bad "report of a partial run" "$tmp/partial.log"
grep -q "is incomplete" "$tmp/partial.log" && grep -q "no plan" "$tmp/partial.log" ||
  bad "partial run: the report does not say what is missing" "$tmp/partial.log"
render "$tmp/partial/report.html" report-partial.png --curve "loss=2"

# 5. The lab's bench.html from a bench.json (scripts/lab/labkit/bench_html.py).
cat >"$tmp/bench.json" <<'JSON'
{"measured_s": {"holmes": 0.21, "megatron": 0.52, "naive": 0.40}, "predicted_s": {"holmes": 0.23, "megatron": 0.47},
 "errors": {"holmes": 0.095, "megatron": -0.096}, "own_errors": {"holmes": 0.0314}, "losses_identical": true,
 "rounds_s": {"holmes": [0.21, 0.22, 0.20], "megatron": [0.52, 0.55, 0.50], "naive": [0.40, 0.41, 0.39]},
 "placements": {"holmes": "holmes", "megatron": "megatron", "naive": "naive<script>"}}
JSON
/usr/bin/python3 "$src/scripts/lab/labkit/bench_html.py" "$tmp/bench.json" >/dev/null || bad "bench_html.py"
grep -q "<script" "$tmp/bench.html" && bad "bench.html: a name is not escaped"
grep -q '<td class="n">+3.1%</td>' "$tmp/bench.html" || bad "bench.html: holmes's error with its own calibration (+3.1%) is not in the table"
render "$tmp/bench.html" bench-fixture.png --cases 3

[ "$have_browser" = 1 ] || [ "$fail" != 0 ] || echo "HOLMES_SKIP: no chromium (scripts/setup.sh installs it): the pages were made and checked as text, not rendered"
exit $fail
