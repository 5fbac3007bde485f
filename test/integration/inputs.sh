#!/usr/bin/env bash
# Inputs that cannot be misread (issue 23), through the binary as a user runs it:
#   - a plain text file as data.train (with a GPT-2 vocabulary every pair of ASCII bytes is a
#     valid uint16 token) is refused with exit 2, pointing to prepare-data; the token file
#     prepare-data makes of it trains, and the data line says the format it detected;
#   - a key given twice in a job spec, a topology, calibration or lab scenario file is refused with
#     exit 2, naming both lines (bad_specs.sh has the job-spec cases of every kind).
# Usage: inputs.sh <holmes-train> <source dir>
set -u
bin=$(readlink -f "$1")
. "$(dirname "$0")/ckpt_common.bash"
refused() {  # refused NAME LOG FRAGMENT...: exit 2 and every fragment in the log
  local name=$1 log=$2; shift 2
  [ "$rc" -eq 2 ] || bad "$name: exit $rc, expected 2" "$log"
  for f in "$@"; do grep -qF -- "$f" "$log" || bad "$name: message lacks '$f'" "$log"; done
}

# A text corpus given as tokens.
for i in $(seq 400); do echo "line $i of a plain text corpus, which is not a token file"; done >"$tmp/corpus.txt"
run "$tmp/text" 2 --set data.source=files --set data.train="[$tmp/corpus.txt]" --set model.vocab_size=50257
refused "text as data.train" "$tmp/text.log" "$tmp/corpus.txt: this is UTF-8 text, not a token file" \
  "holmes-train prepare-data --input $tmp/corpus.txt --out FILE.bin"
[ ! -e "$tmp/text/metrics.jsonl" ] || bad "text as data.train: it trained"
run "$tmp/text_raw" 2 --set data.source=files --set data.train="[$tmp/corpus.txt]" --set data.format=raw-uint16 \
  --set model.vocab_size=50257
refused "text as data.train, format raw-uint16" "$tmp/text_raw.log" "this is UTF-8 text, not a token file"
# What the message says to do works, and the log names the format it found.
"$bin" prepare-data --input "$tmp/corpus.txt" --out "$tmp/corpus.bin" >"$tmp/prep.log" 2>&1 || bad "prepare-data" "$tmp/prep.log"
run "$tmp/tokens" 2 --set data.source=files --set data.train="[$tmp/corpus.bin]" --set model.vocab_size=257
[ "$rc" -eq 0 ] || bad "the prepared token file: exit $rc" "$tmp/tokens.log"
grep -q "^data: 1 train file(s) (llmc), " "$tmp/tokens.log" || bad "the data line lacks the detected format" "$tmp/tokens.log"
echo "a text file as data.train is refused; prepare-data's token file trains; the data line names its format"

# A key twice in a topology file (the plan reads it) and in a calibration file.
cat >"$tmp/topo.yaml" <<'YAML'
nodes:
  - names: a
    devices: {kind: cpu, count: 1}
    nics: [{kind: ethernet, name: eth0, rate_gbps: 10}]
    devices: {kind: cpu, count: 8}
YAML
"$bin" "${tiny[@]}" --set train.steps=2 --plan-only --topology "$tmp/topo.yaml" >"$tmp/topo.log" 2>&1
rc=$?
refused "topology key twice" "$tmp/topo.log" "topo.yaml:5:5: nodes[0].devices: 'devices' is given twice in 'nodes[0]' (lines 3 and 5)"
printf 'format: holmes-calibration/1\ncompute: {device_tflops: 1.5}\ncompute: {device_tflops: 9.5}\n' >"$tmp/cal.yaml"
"$bin" "${tiny[@]}" --set train.steps=2 --plan-only --set cluster.calibration="$tmp/cal.yaml" >"$tmp/cal.log" 2>&1
rc=$?
refused "calibration key twice" "$tmp/cal.log" "cal.yaml:3:1: compute: 'compute' is given twice in the top level (lines 2 and 3)"
echo "topology and calibration files refuse a key given twice"

# The lab's scenario files too (read before the lab needs root or builds anything).
src=$(readlink -f "$2")
sed 's/^ethernet_mbps: 200$/ethernet_mbps: 200\nethernet_mbps: 1000/' "$src/scripts/lab/scenarios/smoke.yaml" >"$tmp/sc.yaml"
line=$(grep -n '^ethernet_mbps: 1000$' "$tmp/sc.yaml" | cut -d: -f1)
HOLMES_BIN=$bin /usr/bin/python3 "$src/scripts/lab/lab.py" run "$tmp/sc.yaml" holmes --out "$tmp/lab" >"$tmp/lab.log" 2>&1
rc=$?
refused "scenario key twice" "$tmp/lab.log" \
  "sc.yaml:$line: key 'ethernet_mbps' is given twice in one mapping (lines $((line - 1)) and $line)"
echo "lab scenario files refuse a key given twice"
# Node speeds need quotas: cpu_cores 0 (no quotas) beside a declared speed is refused.
sed -e 's/^ethernet_mbps: 200$/ethernet_mbps: 200\ncpu_cores: 0/' \
  -e 's/island: roce-b}/island: roce-b, speed: 0.5}/' "$src/scripts/lab/scenarios/smoke.yaml" >"$tmp/sc0.yaml"
HOLMES_BIN=$bin /usr/bin/python3 "$src/scripts/lab/lab.py" run "$tmp/sc0.yaml" holmes --out "$tmp/lab0" >"$tmp/lab0.log" 2>&1
rc=$?
refused "speeds without quotas" "$tmp/lab0.log" "cpu_cores" "more than 0 when a node declares a speed"
echo "lab scenario files refuse node speeds without quotas"

# The lab's quota period knob is read before anything is built: a bad value is refused, exit 2.
HOLMES_LAB_QUOTA_PERIOD_US=10ms HOLMES_BIN=$bin /usr/bin/python3 "$src/scripts/lab/lab.py" run \
  "$src/scripts/lab/scenarios/smoke.yaml" holmes --out "$tmp/lab1" >"$tmp/lab1.log" 2>&1
rc=$?
refused "quota period" "$tmp/lab1.log" "HOLMES_LAB_QUOTA_PERIOD_US='10ms' is not accepted" "from 1000 to 1000000"
echo "the lab refuses a quota period that is not microseconds in the kernel's range"
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
