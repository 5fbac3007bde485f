"""bench: every case of a scenario run alternately (A B C ... A B C ...), the losses checked for
bit-identity, each case's step time predicted by the planner with a calibration merged from
the *other* cases' runs, and the one-line summary (docs/lab.md)."""
import json
import os
import statistics
import subprocess

import yaml

from . import bench_html, job, scenario


def merge_calibrations(paths, cases):
    """Median of every figure the planner reads over the files (docs/cost-model.md, "Calibration")."""
    docs = [yaml.safe_load(open(p)) for p in paths]
    out = {"format": "holmes-calibration/1", "source": f"median of {len(docs)} runs of the cases {', '.join(cases)}"}
    compute = {}
    for key in ("device_tflops", "update_ns_per_param"):
        got = [d["compute"][key] for d in docs if (d.get("compute") or {}).get(key)]
        if got:
            compute[key] = statistics.median(got)
    if compute:
        out["compute"] = compute
    links = {}
    for d in docs:
        for kind, link in (d.get("links") or {}).items():
            links.setdefault(kind, []).append(link)
    out["links"] = {kind: {key: statistics.median(x[key] for x in got) for key in ("efficiency", "latency_us")}
                    for kind, got in links.items()}
    return out


def predict(exe, run_dir, sc, calibration):
    cmd = [exe, "--config", os.path.join(run_dir, "job.yaml"), "--plan-only", "--format", "json",
           "--topology", os.path.join(run_dir, "topology.yaml"), "--nodes", ",".join(sc.order),
           "--set", f"cluster.calibration={calibration}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise job.RunFailed(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    plan = json.loads(r.stdout)
    return plan["estimate"]["step_time_s"], plan["activation"]["plan"]["schedule"]


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"step {i + 1}: {x!r} vs {y!r}"
    return f"{len(a)} vs {len(b)} steps"


def ratio(measured, a, b):
    return f"{measured[b] / measured[a]:.2f}" if a in measured and b in measured else "n/a"


def run(sc, exe, out_dir, rounds):
    runs = {case: [] for case in sc.cases}  # case -> [(run_dir, results)]
    for r in range(rounds):
        for case in sc.cases:
            run_dir = os.path.join(out_dir, f"{case}-r{r + 1}")
            res = job.run_case(sc, scenario.case_net(sc, case), exe, run_dir)
            runs[case].append((run_dir, res))
            print(f"lab: round {r + 1}/{rounds} {case:<8} {res['step_s'] * 1e3:8.1f} ms per step", flush=True)

    # diloco optimises otherwise (docs/diloco.md): its runs agree with each other, not with the rest.
    family = {case: "diloco" if case == "diloco" else "sync" for case in sc.cases}
    refs = {}
    for case in sc.cases:
        refs.setdefault(family[case], (case, runs[case][0][1]))
    ref = refs[family[sc.cases[0]]][1]
    mismatches = [f"{case} (round {i + 1}) differs from {refs[family[case]][0]} (round 1) at "
                  f"{first_difference(refs[family[case]][1]['losses'], res['losses'])}"
                  for case in sc.cases for i, (_, res) in enumerate(runs[case])
                  if res["losses"] != refs[family[case]][1]["losses"]]

    measured = {case: statistics.median(res["step_s"] for _, res in runs[case]) for case in sc.cases}
    predicted, errors, schedules = {}, {}, {}
    for case in sc.cases:
        others = [res["calibration"] for c in sc.cases if c != case for _, res in runs[c] if res["calibration"]]
        if not others:
            continue
        merged = os.path.join(out_dir, f"calibration-for-{case}.yaml")
        with open(merged, "w") as f:
            yaml.safe_dump(merge_calibrations(others, [c for c in sc.cases if c != case]), f, sort_keys=False)
        predicted[case], schedules[case] = predict(exe, runs[case][0][0], sc, merged)
        errors[case] = predicted[case] / measured[case] - 1

    print(f"\nlab: {sc.path}: {rounds} round(s), {len(sc.order)} nodes x {sc.workers_per_node} worker(s), "
          f"tensor {sc.parallel['tensor']} x pipeline {sc.parallel['pipeline']} x data {sc.parallel['data']}")
    print(f"{'case':<13}{'placement':<10}{'schedule':<9}{'measured ms':>12}{'predicted ms':>14}{'error':>8}  per-round ms")
    for case in sc.cases:
        placement = scenario.case_net(sc, case).placement
        pred = f"{predicted[case] * 1e3:14.1f}{errors[case] * 100:+7.1f}%" if case in predicted else f"{'-':>14}{'-':>8}"
        rounds_ms = " ".join(f"{res['step_s'] * 1e3:.0f}" for _, res in runs[case])
        print(f"{case:<13}{placement:<10}{schedules.get(case, '-'):<9}{measured[case] * 1e3:12.1f}{pred}  {rounds_ms}")
    print(f"losses: {'bit-identical in every run' if not mismatches else 'DIFFER: ' + '; '.join(mismatches)} "
          f"({len(ref['losses'])} steps, last {ref['losses'][-1]!r})")
    worst = max((abs(e) for e in errors.values()), default=float("nan"))
    summary = (f"lab: holmes/megatron {ratio(measured, 'holmes', 'megatron')} holmes/naive {ratio(measured, 'holmes', 'naive')} "
               f"holmes/fast {ratio(measured, 'holmes', 'fast')} holmes/holmes-1f1b {ratio(measured, 'holmes', 'holmes-1f1b')} "
               f"diloco/sync {ratio(measured, 'diloco', 'sync')} "
               f"prediction error {worst * 100:.0f}% (max over cases)")
    print(summary)
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump({"measured_s": measured, "predicted_s": predicted, "errors": errors, "schedules": schedules,
                   "losses_identical": not mismatches,
                   "rounds_s": {case: [res["step_s"] for _, res in runs[case]] for case in sc.cases},
                   "placements": {case: str(scenario.case_net(sc, case).placement) for case in sc.cases},
                   "scenario": f"{sc.path}: {rounds} round(s), {len(sc.order)} nodes x {sc.workers_per_node} worker(s)",
                   "summary": summary},
                  f, indent=1)
    print(f"lab: wrote {bench_html.write(os.path.join(out_dir, 'bench.json'))}")
    return 1 if mismatches else 0
