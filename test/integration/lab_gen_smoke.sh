#!/usr/bin/env bash
# The lab's scenario generator and bench-many (docs/lab.md, "Generated scenarios"): gen.py is
# deterministic by seed and its scenarios pass the lab's checker; one generated scenario (two
# nodes of two workers, tensor parallelism inside a node, one island slower at compute under a
# CPU quota) is benched with its holmes and auto cases for a few steps, and bench-many prints
# its table and summary line and leaves no namespace or cgroup behind. Timing is the bench's
# job, not this test's. The run needs root (network namespaces, tc, cgroups).
# Usage: lab_gen_smoke.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -40; fail=1; }
gen=$src/scripts/lab/gen.py
seed=29

/usr/bin/python3 -c "import yaml" 2>/dev/null || { echo "HOLMES_SKIP: python3-yaml is missing"; exit 0; }
/usr/bin/python3 "$gen" --seed 1 --count 8 --out "$tmp/a" >"$tmp/gen.log" 2>&1 || bad "gen.py --seed 1 --count 8: exit $?" "$tmp/gen.log"
/usr/bin/python3 "$gen" --seed 1 --count 8 --out "$tmp/b" >/dev/null 2>&1
diff -r "$tmp/a" "$tmp/b" >/dev/null || bad "gen.py is not deterministic by seed"
[ "$(ls "$tmp/a" | wc -l)" -eq 8 ] || bad "gen.py --count 8 wrote $(ls "$tmp/a" | wc -l) files"
/usr/bin/python3 "$gen" --seed -1 >"$tmp/neg.log" 2>&1
[ $? -eq 2 ] && grep -q "seed -1 --count 1 is not accepted" "$tmp/neg.log" || bad "a negative seed should be exit 2" "$tmp/neg.log"

# holmes-uniform (docs/lab.md, "The cases"): holmes's placement and schedule, the even partition.
sed 's/^cases: .*/cases: [holmes, holmes-uniform]/' "$tmp/a/gen-1.yaml" >"$tmp/uniform.yaml"
PYTHONPATH=$src/scripts/lab /usr/bin/python3 - "$tmp/uniform.yaml" >"$tmp/uniform.log" 2>&1 <<'PY' || bad "holmes-uniform's job" "$tmp/uniform.log"
import sys
from labkit import job, scenario
sc = scenario.load(sys.argv[1])
lines = {c: [l for l in job.job_yaml(sc, scenario.case_net(sc, c), "/r", None).splitlines() if l.startswith("parallel:")][0]
         for c in sc.cases}
print(lines)
assert "partition: uniform" in lines["holmes-uniform"] and "placement: holmes" in lines["holmes-uniform"], lines
assert "partition" not in lines["holmes"], lines
assert lines["holmes"].replace(" partition: uniform,", "") == lines["holmes-uniform"].replace(" partition: uniform,", ""), lines
PY
# bench-many's second line (docs/lab.md, "Own-calibration error"): the errors with each round's own
# calibration, median and max over every case of every scenario; no line from rows of an older lab.
PYTHONPATH=$src/scripts/lab /usr/bin/python3 - >"$tmp/own.log" 2>&1 <<'PY' || bad "bench-many's own-calibration line" "$tmp/own.log"
from labkit import many
rows = [{"own_errors": {"holmes": 0.02, "megatron": -0.09}}, {"own_errors": {"holmes": -0.04}}, {}]
line = many.own_line(rows)
print(line)
assert line.endswith("prediction error median 4% max 9%"), line
assert many.own_line([{}, {"own_errors": {}}]) is None
PY
[ "$(id -u)" -eq 0 ] || { echo "HOLMES_SKIP: the lab needs root (network namespaces, tc, cgroups)"; exit "$fail"; }
command -v ip >/dev/null && command -v tc >/dev/null || { echo "HOLMES_SKIP: iproute2 is missing"; exit "$fail"; }
[ -d /sys/fs/cgroup/cpu ] || { echo "HOLMES_SKIP: no cgroup v1 cpu controller for the node speeds"; exit "$fail"; }
ip netns add "hlabprobe$$" 2>/dev/null || { echo "HOLMES_SKIP: network namespaces cannot be created here"; exit "$fail"; }
ip netns del "hlabprobe$$"

/usr/bin/python3 "$gen" --seed "$seed" --out "$tmp/gen" >/dev/null || bad "gen.py --seed $seed"
sc=$tmp/gen/gen-$seed.yaml
grep -q "speed:" "$sc" && grep -q "workers_per_node: 2" "$sc" && grep -q "tensor: 2" "$sc" \
  || bad "seed $seed no longer draws two workers per node, tensor 2 and a slower island" "$sc"
sed -i 's/steps: 12}/steps: 4}/; s/^cases: .*/cases: [holmes, auto]/; s/^rounds: .*/rounds: 1/' "$sc"
HOLMES_BIN=$bin timeout 500 "$src/scripts/lab/bench_many.sh" "$sc" --out "$tmp/many" >"$tmp/many.log" 2>&1 \
  || bad "bench-many: exit $?" "$tmp/many.log"
grep -Eq "^lab-many: scenarios 1, holmes/megatron min n/a median n/a, holmes/naive min n/a, prediction error median [0-9]+% max [0-9]+%$" "$tmp/many.log" \
  || bad "bench-many: no summary line" "$tmp/many.log"
grep -Eq "^lab-many: with each run's own calibration \(the model without the machine's drift between runs\): prediction error median [0-9]+% max [0-9]+%$" "$tmp/many.log" \
  || bad "bench-many: no own-calibration line" "$tmp/many.log"
grep -Eq "^gen-$seed +2x2x1 +[0-9]x[0-9]x[0-9] " "$tmp/many.log" || bad "bench-many: no table row for gen-$seed" "$tmp/many.log"
grep -Eq "^auto +holmes +(1f1b|zb-h1) +[0-9]x[0-9]x[0-9] +[0-9.]+ +[0-9.]+ +[-+][0-9.]+% +[0-9.]+% +[-+][0-9.]+%" "$tmp/many.log" \
  || bad "bench: no predicted row for the auto case" "$tmp/many.log"
grep -q "peak_tflops" "$tmp/many/gen-$seed/holmes-r1/topology.yaml" || bad "the topology does not declare the node speeds"
# What this run built (other lab runs on the machine are not ours to judge).
for tag in $(sed -n 's/.*emulated cluster in namespaces \(hlab[0-9]*\)-\*.*/\1/p' "$tmp/many.log" | sort -u); do
  ip netns list | grep -q "^$tag-" && bad "namespaces $tag-* left behind"
  ls -d /sys/fs/cgroup/cpu/"$tag"-* 2>/dev/null | grep -q . && bad "cgroups $tag-* left behind"
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
