#!/usr/bin/env bash
# The fault lab (docs/lab.md "Faults"): scripts/lab/scenarios/faults-smoke.yaml run without and
# with a worker killed and one frozen while the job trains. Without replicas each fault stops
# the job, and the lab starts it again from its last checkpoint (Slurm's requeue): both faults
# are injected and detected, the committed history has every step once, and the final
# validation loss equals the fault-free run's bit for bit (a resume is exact). The same for one
# pipeline across three islands that re-plans on the nodes left (--recovery replan: nothing is
# relaunched or restarted). A bad fault is exit 2 naming its key. No timing is asserted (the times are the lab's report, not a test).
# Needs root (network namespaces, tc).
# Usage: lab_faults.sh <holmes-train> <source dir>
set -u
bin=$1
src=$2
source "$(dirname "$0")/lab_common.bash"
sc=$src/scripts/lab/scenarios/faults-smoke.yaml

timeout 400 "$src/scripts/lab/faults.sh" "$sc" holmes --out "$tmp/f" >"$tmp/f.log" 2>&1 \
  || bad "faults: exit $?" "$tmp/f.log"
for tag in $(sed -n 's/.*namespaces \(hlab[0-9]*\)-\*.*/\1/p' "$tmp/f.log"); do
  gone "$tag" || bad "namespaces $tag-* left behind" "$tmp/f.log"
done
/usr/bin/python3 - "$tmp/f/faults.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
if not s["steps_complete"] or s["steps_repeated"]:
    problems.append(f"committed history: complete {s['steps_complete']}, repeated {s['steps_repeated']}")
for f in s["faults"]:
    if not f["injected"] or f.get("detect_s") is None or f.get("recover_s") is None:
        problems.append(f"fault {f['fault']}: injected {f['injected']}, detected {f.get('detect_s')}, "
                        f"recovered {f.get('recover_s')}")
if sum(1 for _, e in s["events"] if e == "relaunch") != 2:
    problems.append(f"expected two relaunches, events {s['events']}")
v = s["val_loss"]
if v["clean"] is None or v["faults"] != v["clean"]:
    problems.append(f"final validation loss {v['faults']} against the fault-free run's {v['clean']}")
if not s["goodput"] or s["goodput"] <= 0:  # a measurement: a loaded machine can slow the fault-free run more
    problems.append(f"goodput {s['goodput']}")
if problems:
    sys.exit("FAIL " + "; ".join(problems))
print(f"faults: both injected and detected, history complete, validation loss {v['faults']!r} as without faults")
PY
# One pipeline across three islands that loses a node (pipeline-replan.yaml, shortened to 400
# steps): with --recovery replan the survivors re-plan and go on without a relaunch; the fault
# is detected, nothing is started again, the history is complete, the redone steps' losses
# equal their first (a continuous curve) and the final validation loss the fault-free run's.
# Here the node lost is a0, rank 0's, and the job's store runs outside the islands
# (fault_run.store: outside, `holmes-train store` on the lab's store host).
sed -e 's/steps: 1500}/steps: 400}/' -e 's/at_step: 530/at_step: 130/' -e 's/checkpoint_interval: 100/checkpoint_interval: 50/' \
  -e 's/node: a1,/node: a0,/' -e 's/requeue_s: 2}/requeue_s: 2, store: outside}/' \
  "$src/scripts/lab/scenarios/pipeline-replan.yaml" >"$tmp/replan.yaml"
timeout 400 "$src/scripts/lab/faults.sh" "$tmp/replan.yaml" holmes --recovery replan --set parallel.elastic=true \
  --out "$tmp/r" >"$tmp/r.log" 2>&1 || bad "replan: exit $?" "$tmp/r.log"
/usr/bin/python3 - "$tmp/r/faults.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
problems = []
if not s["steps_complete"] or s["steps_repeated"]:
    problems.append(f"committed history: complete {s['steps_complete']}, repeated {s['steps_repeated']}")
f = s["faults"][0]
if not f["injected"] or f.get("detect_s") is None or f.get("recover_s") is None:
    problems.append(f"fault: injected {f['injected']}, detected {f.get('detect_s')}, recovered {f.get('recover_s')}")
if any(e in ("relaunch", "stop all") or e.startswith("restart") for _, e in s["events"]):
    problems.append(f"the lab relaunched or restarted a worker: events {s['events']}")
if s["redone"]["steps"] < 1 or s["redone"]["max_rel_diff"] != 0:
    problems.append(f"redone steps {s['redone']}")
v = s["val_loss"]
if v["clean"] is None or v["faults"] != v["clean"]:
    problems.append(f"final validation loss {v['faults']} against the fault-free run's {v['clean']}")
if " a0" not in f["fault"]:
    problems.append(f"the fault is not on rank 0's node a0: {f['fault']}")
if problems:
    sys.exit("FAIL replan: " + "; ".join(problems))
print(f"replan: detected, {s['redone']['steps']} steps redone with their losses, validation loss {v['faults']!r} as without faults")
PY
[ "$(cat "$tmp/r"/*/store.log 2>/dev/null | grep -c "serving on port")" -eq 2 ] \
  || bad "replan: the fault-free run and the run with the fault did not each have a store outside the job" "$tmp/r.log"
# fault_run.store other than rank0 or outside: exit 2 naming the key.
sed 's/requeue_s: 2}/requeue_s: 2, store: rank3}/' "$sc" >"$tmp/bad-store.yaml"
"$src/scripts/lab/faults.sh" "$tmp/bad-store.yaml" holmes --out "$tmp/bad-store" >"$tmp/bad-store.log" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "fault_run.store.*rank3" "$tmp/bad-store.log" \
  || bad "fault_run.store rank3: exit $code, expected 2 naming fault_run.store" "$tmp/bad-store.log"
# A fault naming a node the scenario has not: exit 2 before anything runs, naming the key.
sed 's/node: roce1/node: roce7/' "$sc" >"$tmp/bad.yaml"
"$src/scripts/lab/faults.sh" "$tmp/bad.yaml" holmes --out "$tmp/bad" >"$tmp/bad.log" 2>&1
code=$?
[ "$code" -eq 2 ] && grep -q "faults\[0\].node.*roce7" "$tmp/bad.log" \
  || bad "a fault on an unknown node: exit $code, expected 2 naming faults[0].node" "$tmp/bad.log"
exit $fail
