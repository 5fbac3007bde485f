#!/usr/bin/env bash
# Records what a holmes-train binary does on a fixed set of short CPU jobs and plans, and
# compares two such records bit for bit: a refactoring that must not change behaviour runs
# `record` with the binary before and after and then `compare`.
#
#   behaviour_check.sh record BIN OUT [JOB...]   run the jobs (all by default) with BIN into OUT
#   behaviour_check.sh compare REF NEW           exit 0 when NEW equals REF (details otherwise)
#   behaviour_check.sh check BIN REF [JOB...]    record into a temporary folder, then compare
#   behaviour_check.sh list                      the job names
#
# What a record holds, per training job NAME (OUT/NAME/):
#   metrics.jsonl   every row of the run's metrics.jsonl without its timing fields (wall and
#                   CPU times, rates, memory, communication shares: see strip_timing below)
#   weights.sha256  the checksum of every file of final/ and of the last checkpoint's rank
#                   files (not the manifest nor final/job.yaml: they name the run's folder)
#   plan.json       the plan.json the run wrote
#   exit            the exit code
# and per plan PLAN (OUT/plans/PLAN.json): `--plan-only --format json` of a configs/*.yaml
# (and a few variants of them). A compare prints every difference; plan JSON may differ
# only in the fields RENAMED lists (old key -> new key), which compare maps before diffing.
#
# The jobs run on the CPU through the local launcher (loopback Gloo), a minute or two each on
# a two-core machine; the whole set takes about ten minutes.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=${HOLMES_SRC:-$(cd "$here/.." && pwd)}   # the repository (configs/)

# Plan JSON fields renamed on purpose since the reference was recorded: "old=new", dotted
# paths of object keys (a '*' matches any key or list index).
RENAMED=()

tiny=(--set model.layers=4 --set model.hidden=64 --set model.heads=4 --set model.max_seq_len=32
  --set train.seq_len=32 --set train.micro_batch=2 --set train.global_batch=16 --set train.steps=8
  --set train.warmup_steps=2 --set train.eval_interval=4 --set train.eval_steps=2 --set log.interval=1
  --set data.synthetic.tokens=100000 --set cluster.device_tflops=1 --set checkpoint.interval=4)
grid() { echo --set parallel.tensor="$1" --set parallel.pipeline="$2" --set parallel.data="$3" --nproc-per-node "$4"; }

# job_args NAME: the arguments of training job NAME (after the binary).
job_args() {
  case $1 in
    default) echo --set train.steps=30 --set train.eval_interval=15 --set checkpoint.interval=15 --set log.interval=5 ;;
    auto4) echo "${tiny[@]}" --nproc-per-node 4 ;;
    tp2-pp2-dp2) echo "${tiny[@]}" $(grid 2 2 2 8) ;;
    pp4-1f1b) echo "${tiny[@]}" $(grid 1 4 1 4) --set parallel.schedule=1f1b ;;
    llama-tp2-pp2) echo --config "$src/configs/llama-tiny.yaml" "${tiny[@]}" --set model.kv_heads=2 \
      --set model.ffn_hidden=96 $(grid 2 2 1 4) ;;
    zb-h1) echo "${tiny[@]}" $(grid 1 2 2 4) --set parallel.schedule=zb-h1 --set train.recompute=selective ;;
    interleaved) echo "${tiny[@]}" $(grid 1 2 2 4) --set parallel.schedule=interleaved --set parallel.virtual_stages=2 ;;
    interleaved-tp2) echo "${tiny[@]}" $(grid 2 2 1 4) --set parallel.schedule=interleaved --set parallel.virtual_stages=2 \
      --set train.recompute=full ;;
    diloco) echo "${tiny[@]}" --set train.steps=12 --nproc-per-node 4 --set parallel.replicas=4 --set parallel.outer=diloco \
      --set parallel.inner_steps=4 --set train.global_batch=8 --set checkpoint.interval=6 ;;
    diloco-int8) echo "${tiny[@]}" --set train.steps=12 --nproc-per-node 4 --set parallel.replicas=2 \
      --set parallel.pipeline=2 --set parallel.tensor=1 --set parallel.data=1 --set parallel.outer=diloco \
      --set parallel.inner_steps=4 --set parallel.fragments=2 --set parallel.outer_dtype=int8 \
      --set parallel.outer_overlap=1 --set train.global_batch=8 --set checkpoint.interval=6 ;;
    sync-replicas) echo "${tiny[@]}" --nproc-per-node 4 --set parallel.replicas=2 --set parallel.outer=sync \
      --set parallel.pipeline=2 --set parallel.tensor=1 --set parallel.data=1 ;;
    *) return 1 ;;
  esac
}
jobs_all=(default auto4 tp2-pp2-dp2 pp4-1f1b llama-tp2-pp2 zb-h1 interleaved interleaved-tp2 diloco diloco-int8
  sync-replicas)

# plan_args NAME: the arguments of plan NAME (after the binary, before --plan-only).
plan_list() {
  local f
  for f in "$src"/configs/*.yaml; do echo "cfg-$(basename "$f" .yaml)"; done
  echo pods-diloco-sync ib-roce-7b-interleaved ib-roce-7b-zb default-nproc8 default-nproc6-order llama-tiny-nproc4
  echo ib-ethernet-4x4
}
plan_args() {
  case $1 in
    cfg-*) echo --config "$src/configs/${1#cfg-}.yaml" ;;
    pods-diloco-sync) echo --config "$src/configs/pods-diloco.yaml" --set parallel.outer=sync ;;
    ib-roce-7b-interleaved) echo --config "$src/configs/ib-roce-7b.yaml" --set parallel.schedule=interleaved ;;
    ib-roce-7b-zb) echo --config "$src/configs/ib-roce-7b.yaml" --set parallel.schedule=zb-h1 --set train.recompute=auto ;;
    default-nproc8) echo --nproc-per-node 8 ;;
    default-nproc6-order) echo --nproc-per-node 6 --set parallel.placement=naive --set parallel.order=tp-pp-dp \
      --set parallel.tensor=2 --set parallel.pipeline=3 --set parallel.data=1 --set train.global_batch=24 ;;
    llama-tiny-nproc4) echo --config "$src/configs/llama-tiny.yaml" --nproc-per-node 4 ;;
    ib-ethernet-4x4) echo --config "$src/configs/ib-ethernet.yaml" \
      --topology "$src/configs/topologies/ib-ethernet-4x4.yaml" ;;
    *) return 1 ;;
  esac
}

# Metrics fields that measure time, rates, memory or load (they differ from run to run).
strip_timing() {
  python3 - "$1" <<'PY'
import json, re, sys
timing = re.compile(r"(_ms|_s|_per_s|_mb|_share|_ranks|mfu|tflops|gflops|rss|eta|elapsed|wall|cpu|time|wait|load|"
                    r"bytes_sent|_pct)($|_)")
for line in open(sys.argv[1]):
    row = json.loads(line)
    keep = {k: v for k, v in row.items() if not timing.search(k)}
    print(json.dumps(keep, sort_keys=True))
PY
}

record_job() {
  local bin=$1 out=$2 name=$3 args
  args=$(job_args "$name") || { echo "behaviour_check: no job '$name'" >&2; return 2; }
  local run=$out/runs/$name
  rm -rf "$run" "$out/$name"
  mkdir -p "$out/$name"
  # shellcheck disable=SC2086  # the arguments are words without spaces
  HOLMES_LAUNCH_GRACE_S=2 timeout 600 "$bin" $args --set job.output_dir="$run" >"$out/$name/log" 2>&1
  echo $? >"$out/$name/exit"
  [ -f "$run/metrics.jsonl" ] && strip_timing "$run/metrics.jsonl" >"$out/$name/metrics.jsonl"
  [ -f "$run/plan.json" ] && cp "$run/plan.json" "$out/$name/plan.json"
  (
    cd "$run" 2>/dev/null || exit 0
    last=$(ls -d checkpoints/step-* 2>/dev/null | sort | tail -1)
    find final ${last:+"$last"} -type f ! -name manifest.json ! -name COMMITTED ! -name job.yaml 2>/dev/null | sort | xargs -r sha256sum
  ) >"$out/$name/weights.sha256"
  echo "behaviour_check: $name: exit $(cat "$out/$name/exit"), $(wc -l <"$out/$name/metrics.jsonl" 2>/dev/null || echo 0) metrics rows, $(wc -l <"$out/$name/weights.sha256") weight files"
}

record_plans() {
  local bin=$1 out=$2 name args
  mkdir -p "$out/plans"
  for name in $(plan_list); do
    args=$(plan_args "$name")
    # shellcheck disable=SC2086
    timeout 300 "$bin" $args --plan-only --format json >"$out/plans/$name.json" 2>"$out/plans/$name.err"
    echo $? >"$out/plans/$name.exit"
  done
  echo "behaviour_check: $(ls "$out"/plans/*.exit | wc -l) plans"
}

record() {
  local bin out
  bin=$(readlink -f "$1") out=$2
  shift 2
  mkdir -p "$out"
  out=$(readlink -f "$out")
  "$bin" --version >"$out/version" 2>&1 || true
  record_plans "$bin" "$out"
  local names=("$@")
  [ ${#names[@]} -gt 0 ] || names=("${jobs_all[@]}")
  for n in "${names[@]}"; do record_job "$bin" "$out" "$n"; done
}

# Plan JSON with the renamed fields mapped to their new names, keys sorted.
normalize_plan() {
  python3 - "$1" "${RENAMED[@]}" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
def rename(node, path, new):
    if not path:
        return
    head, rest = path[0], path[1:]
    items = (node.items() if isinstance(node, dict) else enumerate(node)) if isinstance(node, (dict, list)) else []
    for k, v in list(items):
        if head != "*" and str(k) != head:
            continue
        if not rest:
            if isinstance(node, dict):
                node[new] = node.pop(k)
        else:
            rename(v, rest, new)
for pair in sys.argv[2:]:
    old, new = pair.split("=", 1)
    rename(doc, old.split("."), new)
print(json.dumps(doc, indent=1, sort_keys=True))
PY
}

compare() {
  local ref=$1 new=$2 bad=0 name f
  for f in "$ref"/plans/*.json; do
    name=$(basename "$f" .json)
    if [ "$(cat "$ref/plans/$name.exit")" != "$(cat "$new/plans/$name.exit" 2>/dev/null)" ]; then
      echo "DIFF plan $name: exit $(cat "$ref/plans/$name.exit") -> $(cat "$new/plans/$name.exit" 2>/dev/null)"; bad=1; continue
    fi
    if [ -s "$f" ]; then
      if ! diff <(normalize_plan "$f") <(normalize_plan "$new/plans/$name.json") >"$new/plans/$name.diff" 2>&1; then
        echo "DIFF plan $name: $(grep -c '^[<>]' "$new/plans/$name.diff") lines ($new/plans/$name.diff)"; bad=1
      fi
    elif ! diff -q "$ref/plans/$name.err" "$new/plans/$name.err" >/dev/null; then
      echo "DIFF plan $name: the error differs"; bad=1
    fi
  done
  for d in "$ref"/*/; do
    name=$(basename "$d")
    [ "$name" = plans ] || [ "$name" = runs ] && continue
    [ -d "$new/$name" ] || { echo "MISSING job $name"; bad=1; continue; }
    [ "$(cat "$d/exit")" = "$(cat "$new/$name/exit")" ] || { echo "DIFF $name: exit $(cat "$d/exit") -> $(cat "$new/$name/exit")"; bad=1; }
    cmp -s "$d/metrics.jsonl" "$new/$name/metrics.jsonl" || { echo "DIFF $name: metrics"; diff "$d/metrics.jsonl" "$new/$name/metrics.jsonl" | head -6; bad=1; }
    cmp -s "$d/weights.sha256" "$new/$name/weights.sha256" || { echo "DIFF $name: weights"; diff "$d/weights.sha256" "$new/$name/weights.sha256" | head -6; bad=1; }
    if [ -f "$d/plan.json" ] && ! diff -q <(normalize_plan "$d/plan.json") <(normalize_plan "$new/$name/plan.json") >/dev/null; then
      echo "DIFF $name: plan.json"; bad=1
    fi
    [ -s "$d/weights.sha256" ] || { echo "EMPTY $name: the reference has no weights"; bad=1; }
    [ -s "$d/metrics.jsonl" ] || { echo "EMPTY $name: the reference has no metrics"; bad=1; }
  done
  [ $bad -eq 0 ] && echo "behaviour_check: $new equals $ref (metrics without timing, weights, plans)"
  return $bad
}

case ${1:-} in
  record) [ $# -ge 3 ] || { echo "usage: $0 record BIN OUT [JOB...]" >&2; exit 2; }; shift; record "$@" ;;
  compare) [ $# -eq 3 ] || { echo "usage: $0 compare REF NEW" >&2; exit 2; }; compare "$2" "$3" ;;
  check)
    [ $# -ge 3 ] || { echo "usage: $0 check BIN REF [JOB...]" >&2; exit 2; }
    bin=$2 ref=$3
    shift 3
    out=$(mktemp -d "${TMPDIR:-/tmp}/behaviour.XXXXXX")
    record "$bin" "$out" "$@"
    if [ $# -gt 0 ]; then  # only those jobs: compare against a copy of the reference narrowed to them
      part=$(mktemp -d "${TMPDIR:-/tmp}/behaviour-ref.XXXXXX")
      cp -r "$ref/plans" "$part/"
      for n in "$@"; do cp -r "$ref/$n" "$part/"; done
      ref=$part
    fi
    compare "$ref" "$out" ;;
  list) printf '%s\n' "${jobs_all[@]}"; plan_list ;;
  *) echo "usage: $0 record BIN OUT [JOB...] | compare REF NEW | check BIN REF [JOB...] | list" >&2; exit 2 ;;
esac
