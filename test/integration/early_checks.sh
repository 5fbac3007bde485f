#!/usr/bin/env bash
# Check before work (issue 11): what would stop a job is found before it starts workers or
# trains, in every mode alike; figures in the log cannot exceed 100%; one parameter count.
#   - --nproc-per-node beyond what the node holds is refused at once (no worker spawned), as
#     --plan-only refuses it;
#   - a missing or broken topology file is refused by a single process, by --plan-only and
#     by the launcher, with the same message;
#   - prepare-data refuses an output that is one of its inputs (the text stays), a folder
#     as input and an empty input;
#   - SIGHUP saves a checkpoint and exits 129, alone and through the launcher;
#   - MFU and communication shares stay within 100% and the header says where the peak
#     comes from; the job-wide figures between the first and the last log line arrive one
#     line later (reduced in the background) and cover every step once; the plan and the
#     log print the same parameter count.
# Usage: early_checks.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
refused() {  # refused NAME LOG FRAGMENT...: exit 2 and every fragment in the log
  local name=$1 log=$2; shift 2
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$log"
  for f in "$@"; do grep -qF -- "$f" "$log" || bad "$name: message lacks '$f'" "$log"; done
  ! grep -q 'step \|\[rank' "$log" || bad "$name: started work before refusing" "$log"
}
cd "$tmp"

# Too many workers: refused before spawning, in well under the rendezvous time-out.
for mode in "" --plan-only; do
  start=$(date +%s)
  timeout 60 "$bin" "${tiny[@]}" --set job.output_dir="$tmp/n" --set train.global_batch=8000 $mode \
    --nproc-per-node 1000 >"$tmp/n.log" 2>&1
  rc=$?
  refused "--nproc-per-node 1000 $mode" "$tmp/n.log" "--nproc-per-node 1000: this node cannot hold 1000 workers" \
    "accepted here: 1.."
  [ $(($(date +%s) - start)) -lt 20 ] || bad "--nproc-per-node 1000 $mode took $(($(date +%s) - start)) s"
done
# No plan for the worker count: also before spawning (auto degrees, global batch 4).
"$bin" "${tiny[@]}" --set job.output_dir="$tmp/n" --nproc-per-node 3 --set parallel.tensor=1 >"$tmp/n.log" 2>&1
rc=$?
refused "--nproc-per-node 3 without a plan" "$tmp/n.log" "no parallel layout satisfies"
echo "worker counts checked before spawning"

# Topology files: the same check in every mode.
printf 'nodes:\n  - names: [unclosed\n' >"$tmp/broken.yaml"
for topo in "--topology $tmp/nope.yaml|cluster.topology (--topology): '$tmp/nope.yaml' does not exist" \
            "--set cluster.topology=nope.yaml|cluster.topology (--topology): 'nope.yaml' does not exist" \
            "--topology $tmp/broken.yaml|broken.yaml"; do
  args=${topo%%|*} frag=${topo#*|}
  for mode in "" "--plan-only" "--nproc-per-node 2 --set parallel.data=2"; do
    # shellcheck disable=SC2086
    "$bin" "${tiny[@]}" --set job.output_dir="$tmp/t" --set train.steps=2 $args $mode >"$tmp/t.log" 2>&1
    rc=$?
    refused "topology '$args' ${mode:-single process}" "$tmp/t.log" "$frag"
  done
done
echo "topology files checked alike by a single process, --plan-only and the launcher"

# prepare-data
printf 'some text that must survive\n' >"$tmp/a.txt"
cp "$tmp/a.txt" "$tmp/a.orig"
for out in "$tmp/a.txt" "./a.txt" "$tmp/../$(basename "$tmp")/a.txt"; do
  "$bin" prepare-data --input "$tmp/a.txt" --out "$out" >"$tmp/p.log" 2>&1
  rc=$?
  refused "prepare-data --out $out (an input)" "$tmp/p.log" "prepare-data --out: '$out' is also an --input"
done
cmp -s "$tmp/a.txt" "$tmp/a.orig" || bad "prepare-data changed its input"
mkdir -p "$tmp/texts"
"$bin" prepare-data --input "$tmp/texts" --out "$tmp/x.bin" >"$tmp/p.log" 2>&1
rc=$?
refused "prepare-data --input FOLDER" "$tmp/p.log" "prepare-data --input: '$tmp/texts' is a folder"
: >"$tmp/empty.txt"
"$bin" prepare-data --input "$tmp/a.txt" "$tmp/empty.txt" --out "$tmp/x.bin" >"$tmp/p.log" 2>&1
rc=$?
refused "prepare-data empty input" "$tmp/p.log" "prepare-data --input: '$tmp/empty.txt' is empty"
[ ! -e "$tmp/x.bin" ] || bad "prepare-data wrote a token file after refusing"
echo "prepare-data refuses outputs that are inputs, folders and empty inputs"

# SIGHUP: saved and 129, alone and through the launcher (which forwards it).
for mode in "" "--nproc-per-node 2 --set parallel.data=2"; do
  out="$tmp/hup$(echo "$mode" | tr -dc 0-9)"
  # shellcheck disable=SC2086
  "$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=100000 $mode >"$out.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do
    [ -f "$out/metrics.jsonl" ] && [ "$(wc -l <"$out/metrics.jsonl")" -ge 3 ] && break
    sleep 0.05
  done
  kill -HUP "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 129 ] || bad "SIGHUP ${mode:-single process}: exit $rc, expected 129" "$out.log"
  stop=$(sed -n 's/.*stopped by signal 1 after step \([0-9]*\) of.*/\1/p' "$out.log")
  [ -n "$stop" ] && [ -f "$out/checkpoints/$(printf 'step-%08d' "$stop")/COMMITTED" ] ||
    bad "SIGHUP ${mode:-single process}: no checkpoint saved" "$out.log"
done
echo "SIGHUP saves and exits 129"

# Figures: MFU and communication shares within 100%, the peak's source in the header.
out="$tmp/fig"
"$bin" "${tiny[@]}" --set job.output_dir="$out" --set train.steps=8 --set cluster.device_tflops=0 \
  --set log.interval=1 --nproc-per-node 4 --set parallel.tensor=2 --set parallel.data=2 >"$out.log" 2>&1
rc=$?
[ "$rc" -eq 0 ] || bad "4 workers: exit $rc" "$out.log"
grep -q "MFU = the job's model FLOP/s against its peak .* GFLOP/s = [0-9]* core(s) x 1 node(s) x .* FLOP/cycle per core" \
  "$out.log" || bad "the header does not say where the peak comes from" "$out.log"
python3 - "$out/metrics.jsonl" <<'PY' || bad "figures above 100%"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l]
assert len(rows) == 8, len(rows)
# The job-wide figures: blocking on the first and the last line, in the background on the
# others, so a middle row shows the previous step's (figures_step) and the second row none;
# each row's figures cover the steps after those of the previous row with figures.
assert [r.get("figures_step") for r in rows] == [1, None, 2, 3, 4, 5, 6, 8], [r.get("figures_step") for r in rows]
covered_to = 0
for r in rows:
    assert 0 < r["mfu"] <= 100, r
    if "figures_step" not in r:
        assert "comm_share_max" not in r and "comm_share_ranks" not in r, r
    else:
        steps = rows[covered_to:r["figures_step"]]
        covered_to = r["figures_step"]
        # comm_share_max went through a float all-reduce: equal to within float rounding
        assert max(c["comm_share"] for c in steps) <= r["comm_share_max"] * (1 + 1e-6) <= 1 + 1e-6, r
        # rank 0's slot: its share of those steps (written with 4 digits)
        share = sum(c["comm_ms"] for c in steps) / sum(c["step_ms"] for c in steps)
        assert abs(r["comm_share_ranks"][0] - share) <= 1e-3 * share + 1e-6, (r, share)
        assert len(r["comm_share_ranks"]) == 4 and max(r["comm_share_ranks"]) <= r["comm_share_max"] * (1 + 1e-3), r
    # The step's CPU (every thread of rank 0) and the loop's time before it (0 for the first
    # step; after it, the previous row and the log figures' exchange over the world group).
    assert r["cpu_ms"] > 0 and (r["between_ms"] == 0) == (r["step"] == 1) and r["between_ms"] >= 0, r
    # Where the step went: disjoint spans of it, each written.
    phases = [r[k] for k in ("pipeline_ms", "grad_sync_ms", "job_sum_ms", "update_ms")]
    assert min(phases) >= 0 and r["pipeline_ms"] > 0 and sum(phases) <= r["step_ms"] * (1 + 1e-9), r
    # Inside the pipeline phase: its passes and its waits for the neighbouring stages.
    assert r["passes_ms"] > 0 and r["pipeline_wait_ms"] >= 0, r
    assert r["passes_ms"] + r["pipeline_wait_ms"] <= r["pipeline_ms"] * (1 + 1e-9), r
print("mfu max %.1f%%, comm_share_max max %.0f%%" % (max(r["mfu"] for r in rows),
                                                      100 * max(r.get("comm_share_max", 0) for r in rows)))
PY
# One parameter count: the plan's and the log's are the same text.
"$bin" "${tiny[@]}" --plan-only >"$tmp/plan.log" 2>&1 || bad "--plan-only" "$tmp/plan.log"
plan=$(sed -n 's/^Model: \([^ ]*\) parameters (\([^ ]*\) in memory.*/\1 \2/p' "$tmp/plan.log")
log=$(sed -n 's/^\[rank 0\] model: .*), \([^ ]*\) parameters (\([^ ]*\) in memory).*/\1 \2/p' "$out.log")
[ -n "$plan" ] && [ "$plan" = "$log" ] || bad "parameter counts differ: plan '$plan', log '$log'"
echo "parameters: $plan (plan and log)"

[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
