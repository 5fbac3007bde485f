"""bench: every case of a scenario run alternately (A B C ... A B C ...), the losses checked for
bit-identity, each case's step time predicted by the planner with a calibration merged from
the *other* cases' runs, and the one-line summary (docs/lab.md)."""
import json
import os
import shutil
import statistics
import subprocess

import yaml

from . import bench_html, job, scenario


def merged_device(docs):
    """The device record of files measured on one kind of device (the planner refuses a file of
    another kind than its plan's): the first file's, dated by the latest; format-1 files are CPU."""
    devices = [d.get("device") or {"kind": "cpu"} for d in docs]
    kinds = {dev.get("kind") for dev in devices}
    if len(kinds) != 1:
        raise job.RunFailed(f"calibrations of different device kinds cannot be merged: {sorted(map(str, kinds))}")
    out = dict(devices[0])
    dates = [dev["date"] for dev in devices if dev.get("date")]
    if dates:
        out["date"] = max(dates)
    return out


def merge_calibrations(paths, cases):
    """Median of every figure the planner reads over the files (docs/cost-model.md, "Calibration")."""
    docs = [yaml.safe_load(open(p)) for p in paths]
    out = {"format": "holmes-calibration/2", "source": f"median of {len(docs)} runs of the cases {', '.join(cases)}",
           "device": merged_device(docs)}
    compute = {}
    for key in ("device_tflops", "update_ns_per_param", "job_sum_hop_us", "host_us_per_step"):
        got = [d["compute"][key] for d in docs if (d.get("compute") or {}).get(key)]
        if got:
            compute[key] = statistics.median(got)
    # The CPU-time rate: measured apart from the tensor-parallel sums (their CPU priced on its
    # own, host_comm_tp_ns_per_byte, or a degree-1 plan without sums) it holds for every degree
    # and every such file counts; a rate that counts its plan's sums (files of older binaries)
    # holds for the degree it was measured at (cpu_tensor): then the median over the files of
    # the degree most of them ran.
    cpu = [(d["compute"].get("cpu_tensor", 0), d["compute"]["cpu_tflops"],
            bool(d["compute"].get("host_comm_tp_ns_per_byte")) or d["compute"].get("cpu_tensor", 0) == 1)
           for d in docs if (d.get("compute") or {}).get("cpu_tflops")]
    if cpu:
        tensor = statistics.mode(t for t, _, _ in cpu)
        apart = all(a for _, _, a in cpu)
        compute["cpu_tflops"] = statistics.median(c for t, c, _ in cpu if apart or t == tensor)
        if tensor:
            compute["cpu_tensor"] = tensor
    # The host communication path's CPU per byte, the probe's and the steps' (the planner prefers
    # the latter; files of older binaries lack them: not merged).
    for key in ("host_comm_ns_per_byte", "host_comm_steps_ns_per_byte", "host_comm_tp_ns_per_byte",
                "host_comm_us_per_message"):
        host = [d["compute"][key] for d in docs if (d.get("compute") or {}).get(key)]
        if host:
            compute[key] = statistics.median(host)
    if compute:
        out["compute"] = compute
    links = {}
    for d in docs:
        for kind, link in (d.get("links") or {}).items():
            links.setdefault(kind, []).append(link)
    out["links"] = {kind: {key: statistics.median(x[key] for x in got) for key in ("efficiency", "latency_us")}
                    for kind, got in links.items()}
    outer = [d["outer"] for d in docs if (d.get("outer") or {}).get("efficiency")]
    if outer:  # diloco's exchange as it ran in the steps (docs/cost-model.md, "Calibration")
        out["outer"] = {"link": outer[0]["link"], "efficiency": statistics.median(o["efficiency"] for o in outer),
                        "exchange_ms": statistics.median(o.get("exchange_ms", 0) for o in outer),
                        "syncs": sum(o.get("syncs", 0) for o in outer)}
        drift = [o["drift_ms"] for o in outer if o.get("drift_ms")]
        if drift:  # the replicas' drift at their sums (files of older binaries lack it: not merged)
            out["outer"]["drift_ms"] = statistics.median(drift)
    for kind, got in links.items():  # efficiency by message size: the median at each size measured
        by_size = {}
        for link in got:
            for size, eff in link.get("sizes") or []:
                by_size.setdefault(float(size), []).append(eff)
        if by_size:  # one size too: another file's curve must not stand for this one's size
            out["links"][kind]["sizes"] = [[size, statistics.median(e)] for size, e in sorted(by_size.items())]
    return out


def calibration_sources(cases, runs, degrees, case):
    """The cases whose runs calibrate `case`'s prediction: the other cases that ran its tensor
    degree, or every other case when none did. A calibration holds for jobs of the tensor
    degree it was measured at: the per-device compute rate, the CPU per FLOP, the host path's
    CPU per byte and the in-step tensor sums' link figures all move with it, and a median over
    files of two degrees is a figure of neither (docs/lab.md, the twenty-fifth run: auto's
    tp1 runs, whose intra-node samples are 6.5 MB data-parallel sums with 1-1.7 ms latencies,
    moved the class latency to 0.73 ms for the tp2 cases' 128 KB tensor sums, 0.07 ms in
    megatron's own runs: two of those cases were predicted 11-18% too slow)."""
    others = [c for c in cases if c != case and runs[c]]
    same = [c for c in others if degrees[c].get("tensor") == degrees[case].get("tensor")]
    return same or others


def predict(exe, run_dir, sc, calibration, degrees=None, partition=None, activation=None):
    """The planner's step time for a run's job with `calibration`; `degrees` pins the degrees an
    `auto` run chose, `partition` the layers per stage the run had and `activation` its schedule
    and recomputation (run_activation; with another calibration the planner might choose others:
    the prediction would price another job). Returns the
    step time, the schedule, the bytes all ranks send over Ethernet per step, and with diloco
    the bytes of one outer sync of the whole model (None otherwise)."""
    cmd = [exe, "--config", os.path.join(run_dir, "job.yaml"), "--plan-only", "--format", "json",
           "--topology", os.path.join(run_dir, "topology.yaml"), "--nodes", ",".join(sc.order),
           "--set", f"cluster.calibration={calibration}"]
    for key, value in (degrees or {}).items():
        cmd += ["--set", f"parallel.{key}={value}"]
    if partition:
        cmd += ["--set", f"parallel.partition=[{', '.join(map(str, partition))}]"]
    for key, value in (activation or {}).items():
        cmd += ["--set", f"{key}={value}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise job.RunFailed(f"`{' '.join(cmd)}` failed ({r.returncode}): {r.stderr.strip()}")
    plan = json.loads(r.stdout)
    est = plan["estimate"]
    return (est["step_time_s"], plan["activation"]["plan"]["schedule"], est["bytes_per_step"]["ethernet"],
            (plan.get("replicas") or {}).get("sync_bytes"), est)


def predict_as_ran(exe, sc, case, run_dir, res, calibration):
    """predict() for one run of `case` with `calibration`, pinned to what that run had: the
    degrees an `auto` run chose, its layers per stage, its schedule and recomputation."""
    return predict(exe, run_dir, sc, calibration, res["degrees"] if case == "auto" else None,
                   run_partition(res["plan"]), run_activation(res["plan"]))


def run_partition(plan):
    """Layers per stage of a run's plan (its JSON), None when the stages hold interleaved chunks."""
    stages = plan["stages"]
    return None if any(s.get("chunks") for s in stages) else [s["num_layers"] for s in stages]


def run_activation(plan):
    """The schedule (with its virtual stages) and recomputation a run's plan chose, as the
    settings that pin them."""
    chosen = plan["activation"]["plan"]
    out = {"parallel.schedule": chosen["schedule"], "train.recompute": chosen["recompute"]}
    if chosen["schedule"] == "interleaved":
        out["parallel.virtual_stages"] = str(chosen["virtual_stages"])
    return out


def plan_signature(plan):
    """What a run's plan runs, without its name: the ranks per node, the stages, the groups with
    their transports and links, the schedule and recomputation, and how replicas stay in step.
    Two cases with one signature (holmes and naive where every link is Ethernet) run the same
    job: their measurements differ by the machine's noise alone."""
    rep = plan.get("replicas") or {}
    return json.dumps({
        "ranks": [[r["node"], r["local_rank"], r["tp"], r["pp"], r["dp"], r.get("replica", 0)] for r in plan["ranks"]],
        "stages": [[s["first_layer"], s["num_layers"], s.get("chunks")] for s in plan["stages"]],
        "groups": sorted([g["kind"], g["transport"], g["link"], g["ranks"]] for g in plan["groups"]),
        "activation": {k: plan["activation"]["plan"][k] for k in ("schedule", "recompute", "virtual_stages")},
        "replicas": {k: rep.get(k) for k in ("count", "outer", "inner_steps", "fragments", "outer_overlap")},
    }, sort_keys=True)


def same_plans(sc, runs):
    """case -> the cases (itself included) whose first runs have its plan signature."""
    sig = {case: plan_signature(runs[case][0][1]["plan"]) for case in sc.cases}
    return {case: [c for c in sc.cases if sig[c] == sig[case]] for case in sc.cases}


def window_step_s(res, steps):
    """Rank 0's mean step time over the steps between two readings taken when `steps` = [first,
    last] steps were logged (steps first + 1 .. last); the median steady step if the log lacks
    them."""
    first, last = steps
    ms = res["step_ms"][first:last]
    return statistics.mean(ms) / 1e3 if ms and len(ms) == last - first else res["step_s"]


def cpu_figures(sc, runs):
    """Per case, median over its rounds (None without cpu.json): the largest share of CFS periods
    a node cgroup ended throttled, its throttled ms per step, and the least and most any rank
    used of its quota over the step (CPU seconds per step / (quota cores x the mean step time of
    the window the CPU seconds were read over: a diloco window holds an outer sync, whose long
    step the median step time leaves out))."""
    out = {}
    for case in sc.cases:
        share, thr, use_lo, use_hi = [], [], [], []
        for _, res in runs[case]:
            c = res.get("cpu")
            if not c or not c["nodes"]:
                continue
            share.append(max(n["throttled"] / n["periods"] if n["periods"] else 0.0 for n in c["nodes"].values()))
            thr.append(max(n["throttled_s"] for n in c["nodes"].values()) * 1e3)
            use = []
            step_s = window_step_s(res, c["steps"])
            for rank, cpu_s in c["rank_cpu_s"].items():
                node = sc.order[int(rank) // sc.workers_per_node]
                if sc.quota_cores(node) > 0:
                    use.append(cpu_s / (sc.quota_cores(node) * step_s))
            if use:
                use_lo.append(min(use))
                use_hi.append(max(use))
        if share:
            out[case] = {"throttled_share": statistics.median(share), "throttled_ms": statistics.median(thr),
                         "quota_used_min": statistics.median(use_lo) if use_lo else None,
                         "quota_used_max": statistics.median(use_hi) if use_hi else None}
    return out


def thread_figures(sc, runs):
    """Per case, median over its rounds of cpu.json's per-thread split (runs that recorded it),
    ms per step, each the mean over the ranks: the training (main) thread's user and system
    time, the other threads' CPU (communication, Gloo's I/O), and the whole host's softirq time
    (ticks that landed in one, any task or idle)."""
    out = {}
    for case in sc.cases:
        got = []
        for _, res in runs[case]:
            c = res.get("cpu")
            if not c or not c.get("rank_threads_s"):
                continue
            ranks = list(c["rank_threads_s"].values())
            got.append([statistics.mean(t["main"]["user"] for t in ranks),
                        statistics.mean(t["main"]["system"] for t in ranks),
                        statistics.mean(t.get("others", {}).get("run", 0.0) for t in ranks),
                        c["host_s"]["softirq"]])
        if got:
            out[case] = dict(zip(("main_user_ms", "main_system_ms", "others_ms", "host_softirq_ms"),
                                 (statistics.median(col) * 1e3 for col in zip(*got))))
    return out


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"step {i + 1}: {x!r} vs {y!r}"
    return f"{len(a)} vs {len(b)} steps"


def ratio(measured, a, b):
    return f"{measured[b] / measured[a]:.2f}" if a in measured and b in measured else "n/a"


def spread(steps):
    """The rounds' spread: (slowest - fastest) / median, what the machine's noise alone moves a
    case's step time by (0 with one round)."""
    return (max(steps) - min(steps)) / statistics.median(steps) if len(steps) > 1 else 0.0


def loss_mismatches(sc, runs):
    """Every run against the first run of its kind: the fixed-degree cases against each other
    (bit-identical, docs/lab.md), auto against its own first round (other degrees add the
    gradients of other micro-batch splits in another order), diloco against its own
    (it optimises otherwise, docs/diloco.md)."""
    out = []
    apart = ("auto", "diloco", "diloco-overlap")
    for group in [[c for c in sc.cases if c not in apart]] + [[c] for c in apart if c in sc.cases]:
        if not group:
            continue
        ref_case, ref = group[0], runs[group[0]][0][1]
        out += [f"{case} (round {i + 1}) differs from {ref_case} (round 1) at "
                f"{first_difference(ref['losses'], res['losses'])}"
                for case in group for i, (_, res) in enumerate(runs[case]) if res["losses"] != ref["losses"]]
    return out


def reuse(sc, out_dir, rounds):
    """The runs an earlier bench left in out_dir (to predict them again with another binary)."""
    runs = {case: [] for case in sc.cases}
    for r in range(rounds):
        for case in sc.cases:
            run_dir = os.path.join(out_dir, f"{case}-r{r + 1}")
            if not os.path.exists(os.path.join(run_dir, "out", "metrics.jsonl")):
                raise job.RunFailed(f"--reuse: {run_dir} holds no finished run")
            res = job.results(run_dir)
            cal = os.path.join(run_dir, "calibration.yaml")
            res["calibration"] = cal if os.path.exists(cal) else ""
            runs[case].append((run_dir, res))
    return runs


def outer_bytes(sc, case, runs):
    """A diloco case's Ethernet bytes split by the readings of job.ethernet_window (first, the
    step before the first outer sync, last): bytes per step without an outer sync, what the
    outer syncs add per sync of the whole model, and the two amortized per step as the plan
    does (median over the rounds); None without the middle reading."""
    h = sc.parallel.get("inner_steps", 20)
    tau = job.overlap(sc, scenario.case_net(sc, case))
    per_step, per_sync, quiet = [], [], None
    for _, res in runs:
        e = res.get("ethernet")
        if not e or len(e["steps"]) != 3:
            continue
        (s0, s1, s2), (_, b1, b2) = e["steps"], e["bytes"]
        if s1 <= s0 or (s2 - s0 - tau) % h:
            continue
        per_step.append(b1 / (s1 - s0))
        per_sync.append((b2 - per_step[-1] * (s2 - s0)) / ((s2 - s0 - tau) // h))
        quiet = [s0, s1]
    if not per_step:
        return None
    out = {"per_step": statistics.median(per_step), "per_sync": statistics.median(per_sync), "quiet": quiet}
    out["amortized"] = out["per_step"] + out["per_sync"] / h
    return out


def outer_sync_parts(runs):
    """Rank 0's outer sync parts (metrics.jsonl `outer_*_ms`) over every run of a case: the
    median of each part over the rows where it is not zero (with outer_overlap the sending step
    and the applying step carry different parts). None without outer syncs."""
    got = {}
    for run_dir, _ in runs:
        for line in open(os.path.join(run_dir, "out", "metrics.jsonl")):
            row = json.loads(line)
            for key, value in row.items():
                if key.startswith("outer_") and key.endswith("_ms") and value > 0:
                    got.setdefault(key[len("outer_"):-len("_ms")], []).append(value)
    if "" not in got and "encode" not in got:
        return None
    out = {"syncs": len(got.get("encode", []))}
    out.update({k or "total": statistics.median(v) for k, v in got.items()})
    return out


def period_window(sc, case, res):
    """The rows a diloco case's step time is measured on, as a slice: whole inner_steps periods
    of the Ethernet window, from tau steps after its first step (so each period holds one
    exchange sent and one landed): steps first + 1 .. last. None without a window."""
    e = res.get("ethernet")
    if not e:
        return None
    tau = job.overlap(sc, scenario.case_net(sc, case))
    return slice(e["steps"][0] + tau, e["steps"][-1])


def period_step_s(sc, case, res):
    """A diloco case's step time as the plan prices it, the outer sync amortized: the mean step
    over period_window. The median step of the other cases would leave the sync out (one step
    in H). None without a window."""
    rows = period_window(sc, case, res)
    window = res["step_ms"][rows] if rows else None
    return statistics.mean(window) / 1e3 if window else None


def between_figures(sc, runs):
    """Per case and round: rank 0's mean wall time between its steps (metrics.jsonl between_ms:
    the loop's own work outside step_ms: with the lab's log.interval 1, binaries before
    2026-11-27 blocked on the job-wide log figures' exchange after every step; later ones run
    it in the background, docs/training.md "Log") over the steps the case's step time is measured on (diloco cases:
    period_window; the others: every step after warm-up). Measured, never predicted against:
    the plan prices the exchange as log_s. None for runs of binaries without the key
    (docs/diloco.md, "Eighth pass")."""
    out = {}
    for case in sc.cases:
        got = []
        for _, res in runs[case]:
            rows = period_window(sc, case, res) if case.startswith("diloco") else None
            window = res["between_ms"][rows] if rows else res["between_ms"][job.WARMUP_STEPS:]
            between = [x for x in window if x is not None]
            got.append(statistics.mean(between) if between and len(between) == len(window) else None)
        if any(x is not None for x in got):
            out[case] = got
    return out


def loop_figures(sc, runs):
    """Per case: rank 0's loop period per step (s), step_ms and the loop's time before the step
    outside it (between_ms), taken over the same steps and in the same way as the case's
    measured step (the median after warm-up; diloco cases: the mean over period_window), median
    over the rounds; with it each round's. What a user's tokens per second see; the measured
    step (step_ms) is what the prediction error is computed against (docs/lab.md, "Rank 0's
    time between steps"). Cases with a run of a binary without between_ms are left out."""
    out = {}
    for case in sc.cases:
        got = []
        for _, res in runs[case]:
            loop = res.get("loop_ms") or []
            if case.startswith("diloco"):
                rows = period_window(sc, case, res)
                window = loop[rows] if rows else []
                got.append(statistics.mean(window) / 1e3 if window and None not in window else None)
            else:
                window = [x for x in loop[job.WARMUP_STEPS:] if x is not None]
                got.append(statistics.median(window) / 1e3 if window else None)
        if got and None not in got:
            out[case] = {"loop_s": statistics.median(got), "rounds_s": got}
    return out


def wait_split(sc, runs):
    """Per case and round: the median step's wait on communication and the rest of it (busy),
    so that a case's step time can be read apart from the machine's speed: identical work
    measured 0.79 to 1.21 s busy in runs minutes apart on the two-core VM while the waits held
    within a few percent (docs/lab.md). Left out: diloco cases (their step is the mean over
    outer periods) and runs whose log has no per-rank shares."""
    out = {}
    for case in sc.cases:
        got = [res for _, res in runs[case] if res.get("wait_s") is not None]
        if case.startswith("diloco") or not got or len(got) != len(runs[case]):
            continue
        out[case] = {"wait_s": [res["wait_s"] for res in got], "busy_s": [res["step_s"] - res["wait_s"] for res in got]}
    return out


def phase_figures(sc, runs):
    """Per case, the trainer's phase timers (job.phases): rank 0's medians, median over the rounds,
    and the lowest and highest rank mean of each phase over every round; cases whose runs lack
    them are left out."""
    out = {}
    for case in sc.cases:
        got = [res["phases"] for _, res in runs[case] if res.get("phases")]
        if not got or len(got) != len(runs[case]):
            continue
        ranks = [r for g in got for r in g["ranks"].values()] or [g["rank0"] for g in got]
        # The pipeline's parts where every run and rank has them (job.PIPELINE_PARTS).
        keys = [k for k in job.PHASES + job.PIPELINE_PARTS
                if all(k in g["rank0"] for g in got) and all(k in r for r in ranks)]
        out[case] = {"rank0": {k: statistics.median(g["rank0"][k] for g in got) for k in keys},
                     "lo": {k: min(r[k] for r in ranks) for k in keys},
                     "hi": {k: max(r[k] for r in ranks) for k in keys}}
    return out


def own_errors(sc, exe, runs):
    """Each round priced with the calibration that round wrote itself, against that round's
    step: the model without the machine's drift between runs (CPU per FLOP, link rates), which
    a prediction made beforehand cannot know. Median over the rounds per case (docs/lab.md,
    "Own-calibration error"). A diagnostic beside the error, never instead of it: a run's own
    figures are what a prediction is tested against."""
    out = {}
    for case in sc.cases:
        got = []
        for run_dir, res in runs[case]:
            if not res["calibration"] or not res["step_s"]:
                continue
            step = predict_as_ran(exe, sc, case, run_dir, res, res["calibration"])[0]
            got.append(step / res["step_s"] - 1)
        if got:
            out[case] = statistics.median(got)
    return out


def run(sc, exe, out_dir, rounds, reuse_runs=False):
    """Runs the bench (or, reuse_runs, takes an earlier one's runs); prints its table and line;
    returns (exit code, summary dict)."""
    runs = reuse(sc, out_dir, rounds) if reuse_runs else {case: [] for case in sc.cases}
    for r in range(0 if reuse_runs else rounds):
        for case in sc.cases:
            run_dir = os.path.join(out_dir, f"{case}-r{r + 1}")
            res = job.run_case(sc, scenario.case_net(sc, case), exe, run_dir)
            # Nothing the bench reads is in a run's checkpoints (metrics, calibration, logs
            # stay); kept, a bench-many's filled gigabytes of disk.
            shutil.rmtree(os.path.join(run_dir, "out", "checkpoints"), ignore_errors=True)
            runs[case].append((run_dir, res))
            print(f"lab: round {r + 1}/{rounds} {case:<8} {res['step_s'] * 1e3:8.1f} ms per step", flush=True)

    mismatches = loss_mismatches(sc, runs)
    for case in sc.cases:  # diloco cases: the step with the outer sync amortized (period_step_s)
        if case.startswith("diloco"):
            for _, res in runs[case]:
                res["step_s"] = period_step_s(sc, case, res) or res["step_s"]
    # Cases that run one plan are rounds of one job: their measured step (the median) and their
    # spread are taken over all their rounds (docs/lab.md, "same plan").
    same = same_plans(sc, runs)
    pooled = {case: [res["step_s"] for c in same[case] for _, res in runs[c]] for case in sc.cases}
    measured = {case: statistics.median(steps) for case, steps in pooled.items()}
    spreads = {case: spread(steps) for case, steps in pooled.items()}
    degrees = {case: runs[case][0][1]["degrees"] for case in sc.cases}
    predicted, errors, schedules, eth_predicted, sync_predicted, priced = {}, {}, {}, {}, {}, {}
    across = {}  # case -> the tensor degrees of the files that priced it, when not its own
    for case in sc.cases:
        sources = calibration_sources(sc.cases, runs, degrees, case)
        tensors = sorted({degrees[c].get("tensor") for c in sources}, key=str)
        if sources and degrees[case].get("tensor") not in tensors:
            across[case] = f"tp{degrees[case].get('tensor')} from tp{'/'.join(map(str, tensors))} files"
        others = [res["calibration"] for c in sources for _, res in runs[c] if res["calibration"]]
        if not others:
            continue
        merged = os.path.join(out_dir, f"calibration-for-{case}.yaml")
        with open(merged, "w") as f:
            yaml.safe_dump(merge_calibrations(others, sources), f, sort_keys=False)
        predicted[case], schedules[case], eth_predicted[case], sync_predicted[case], priced[case] = predict_as_ran(
            exe, sc, case, *runs[case][0], merged)
        errors[case] = predicted[case] / measured[case] - 1
    own = own_errors(sc, exe, runs)

    print(f"\nlab: {sc.path}: {rounds} round(s), {len(sc.order)} nodes x {sc.workers_per_node} worker(s), "
          f"tensor {sc.parallel['tensor']} x pipeline {sc.parallel['pipeline']} x data {sc.parallel['data']}")
    # Bytes over Ethernet per step: every node's eth0 counters (frames, headers included) over
    # the steps of job.ethernet_window, median over the rounds, beside the plan's payload bytes.
    # diloco cases: the bytes per step without a sync plus one sync's bytes / H, as the plan amortizes.
    eth_measured, splits = {}, {}
    for case in sc.cases:
        got = [res["ethernet"]["bytes_per_step"] for _, res in runs[case] if res.get("ethernet")]
        if case.startswith("diloco"):
            splits[case] = outer_bytes(sc, case, runs[case])
            got = [splits[case]["amortized"]] if splits[case] else []
        if got:
            eth_measured[case] = statistics.median(got)
    loops = loop_figures(sc, runs)
    print(f"{'case':<16}{'placement':<10}{'schedule':<9}{'degrees':>9}{'measured ms':>12}{'predicted ms':>14}"
          f"{'error':>8}{'spread':>8}{'own cal':>8}{'loop ms':>9}{'eth MB/step':>12}{'predicted':>10}  per-round ms")
    for case in sc.cases:
        placement = scenario.case_net(sc, case).placement
        d = degrees[case]
        deg = f"{d['tensor']}x{d['pipeline']}x{d['data']}" if d else "?"
        pred = f"{predicted[case] * 1e3:14.1f}{errors[case] * 100:+7.1f}%" if case in predicted else f"{'-':>14}{'-':>8}"
        rounds_ms = " ".join(f"{res['step_s'] * 1e3:.0f}" for _, res in runs[case])
        eth = f"{eth_measured[case] / 1e6:12.3f}" if case in eth_measured else f"{'-':>12}"
        eth += f"{eth_predicted[case] / 1e6:10.3f}" if case in eth_predicted else f"{'-':>10}"
        loop = f"{loops[case]['loop_s'] * 1e3:9.1f}" if case in loops else f"{'-':>9}"
        mine = f"{own[case] * 100:+7.1f}%" if case in own else f"{'-':>8}"
        print(f"{case:<16}{placement:<10}{schedules.get(case, '-'):<9}{deg:>9}{measured[case] * 1e3:12.1f}{pred}"
              f"{spreads[case] * 100:7.1f}%{mine}{loop}{eth}  {rounds_ms}")
    print("(measured: rank 0's step_ms, the median step after warm-up"
          + ("; diloco cases: the mean step over whole outer periods, the sync amortized as the plan prices it"
             if any(case.startswith("diloco") for case in sc.cases) else "")
          + "; the error is against it. own cal: each round priced with the calibration it wrote itself against "
          "its own step, median over rounds: the model without the machine's drift between runs. loop: rank 0's "
          "loop period per step, step_ms + between_ms, taken the same way: what tokens per second see)")
    for case in sc.cases:
        if same[case][0] == case and len(same[case]) > 1:
            print(f"same plan: {', '.join(same[case])} (ranks, stages, groups, schedule): their measured step "
                  "and their spread are over all their rounds; the spread is what the machine's noise alone moves "
                  "one job by")
    if across:
        print("priced across tensor degrees (no other case ran theirs; the calibration's compute, CPU and "
              "tensor-sum figures are another degree's, docs/lab.md): "
              + "; ".join(f"{case} {what}" for case, what in across.items()))
    cpu = cpu_figures(sc, runs)
    if cpu:
        # CFS bandwidth control: a node cgroup that spent its quota waits for the next period.
        print("CPU quotas (steps of the Ethernet window, median over rounds): "
              + "; ".join(f"{case} throttled {f['throttled_share'] * 100:.0f}% of periods, {f['throttled_ms']:.0f} ms/step"
                          + (f", ranks used {f['quota_used_min'] * 100:.0f}-{f['quota_used_max'] * 100:.0f}% of quota"
                             if f["quota_used_min"] is not None else "") for case, f in cpu.items()))
    threads = thread_figures(sc, runs)
    if threads:
        # Without CONFIG_IRQ_TIME_ACCOUNTING a softirq is charged to the task it interrupts
        # (docs/results/cost-model-history.md, "gen-4's holmes plan"): the training thread's system time shows it.
        print("CPU by thread (ms a step, mean over ranks, median over rounds; training thread user + system, "
              "other threads; the host's softirq): "
              + "; ".join(f"{case} {f['main_user_ms']:.0f} + {f['main_system_ms']:.1f}, {f['others_ms']:.0f}; "
                          f"{f['host_softirq_ms']:.0f}" for case, f in threads.items()))
    waits = wait_split(sc, runs)
    if waits:
        print("where the step went (ms; wait: the ranks' mean time waiting on communication, median step; "
              "busy: the step less it, compute and host work, which moves with the machine):")
        for case, w in waits.items():
            print(f"  {case:<16}wait {' '.join(f'{x * 1e3:.0f}' for x in w['wait_s']):<12} "
                  f"busy {' '.join(f'{x * 1e3:.0f}' for x in w['busy_s'])}")
    phase = phase_figures(sc, runs)
    if phase:
        # The trainer's phase timers beside the priced parts (docs/cost-model.md, "Step time and
        # its parts"): what of a prediction's error is which part.
        print("phases (ms; measured: rank 0's median step, median over rounds, and the ranks' range of their means; "
              "priced: the plan's parts with the calibration that priced the case):")
        for case, f in phase.items():
            e = priced.get(case) or {}
            parts_text = " ".join(f"{k} {e.get(k + '_s', 0) * 1e3:.1f}" for k in
                              ("compute", "tp_comm", "pp_comm", "bubble", "dp_comm", "update", "sums", "quota") if e.get(k + "_s"))
            print(f"  {case:<16}" + ", ".join(f"{k} {f['rank0'][k]:.1f} ({f['lo'][k]:.1f}-{f['hi'][k]:.1f})" for k in f["rank0"])
                  + (f"; priced: {parts_text}" if parts_text else ""))
    between = between_figures(sc, runs)
    if between:
        print("rank 0's time between steps (ms, between_ms: the loop outside step_ms, in binaries before 2026-11-27 "
              "mostly the job-wide log exchange; per round, over the measured steps; not in the measured step, in the loop column): "
              + "; ".join(f"{case} {' '.join('-' if x is None else f'{x:.0f}' for x in got)}" for case, got in between.items()))
    ref = runs[sc.cases[0]][0][1]
    print(f"losses: {'bit-identical in every run' if not mismatches else 'DIFFER: ' + '; '.join(mismatches)} "
          f"({len(ref['losses'])} steps, last {ref['losses'][-1]!r})")
    worst = max((abs(e) for e in errors.values()), default=float("nan"))
    line = (f"lab: holmes/megatron {ratio(measured, 'holmes', 'megatron')} holmes/naive {ratio(measured, 'holmes', 'naive')} "
            f"holmes/fast {ratio(measured, 'holmes', 'fast')} holmes/holmes-1f1b {ratio(measured, 'holmes', 'holmes-1f1b')} "
            f"diloco/sync {ratio(measured, 'diloco', 'sync')} "
            + (f"diloco-overlap/sync {ratio(measured, 'diloco-overlap', 'sync')} " if "diloco-overlap" in measured else "")
            + f"prediction error {worst * 100:.0f}% (max over cases)")
    print(line)
    if all(c in eth_measured and c in eth_predicted for c in ("sync", "diloco")):
        print(f"lab: Ethernet bytes per step sync/diloco: measured {eth_measured['sync'] / eth_measured['diloco']:.2f}x, "
              f"the plan says {eth_predicted['sync'] / eth_predicted['diloco']:.2f}x")
    for case, split in splits.items():
        if split and sync_predicted.get(case):
            # The plan's bytes per step besides the exchange: the small messages (docs/cost-model.md).
            small = eth_predicted[case] - sync_predicted[case] / sc.parallel.get("inner_steps", 20)
            print(f"lab: {case} outer exchange: {split['per_sync'] / 1e6:.3f} MB per outer sync measured, the plan says "
                  f"{sync_predicted[case] / 1e6:.3f} MB; besides it {split['per_step'] / 1e3:.1f} kB per step "
                  f"(steps {split['quiet'][0] + 1}..{split['quiet'][1]}, between the syncs); the plan's small messages "
                  f"{small / 1e3:.1f} kB a step amortized (loss/stop sums across the replicas and job-wide log "
                  f"figures: binaries since 2026-11-27 send both at the outer syncs, so inside the per-sync figure, "
                  f"older ones every step)")
    outer_parts = {}
    for case in sc.cases:  # where rank 0's outer syncs spent their time (docs/diloco.md)
        parts = outer_sync_parts(runs[case])
        if parts:
            outer_parts[case] = parts
            print(f"lab: {case} outer syncs on rank 0, median ms over {parts['syncs']} sync(s): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in parts.items() if k != "syncs"))
    windows = {case: [res["ethernet"] for _, res in runs[case]] for case in sc.cases}  # per round: steps, bytes, late
    result = {"ethernet_bytes_per_step": eth_measured, "ethernet_predicted": eth_predicted,
              "outer_bytes": splits, "outer_sync_parts": outer_parts, "outer_bytes_predicted": {c: sync_predicted.get(c) for c in splits},
              "ethernet_windows": windows,"measured_s": measured, "predicted_s": predicted, "errors": errors, "own_errors": own, "schedules": schedules,
              "losses_identical": not mismatches,
              "rounds_s": {case: [res["step_s"] for _, res in runs[case]] for case in sc.cases},
              "placements": {case: str(scenario.case_net(sc, case).placement) for case in sc.cases},
              "scenario": f"{sc.path}: {rounds} round(s), {len(sc.order)} nodes x {sc.workers_per_node} worker(s)",
              "summary": line, "path": sc.path, "rounds": rounds, "spreads": spreads, "degrees": degrees,
              "same_plan": {case: same[case] for case in sc.cases if len(same[case]) > 1},
              "priced_across_tensor": across, "cpu": cpu, "cpu_threads": threads,
              "waits": waits, "between_ms": between, "loop": loops, "phases": phase,
              "priced_parts": {c: {k: v for k, v in e.items() if k.endswith("_s") and isinstance(v, (int, float))}
                               for c, e in priced.items()}}
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"lab: wrote {bench_html.write(os.path.join(out_dir, 'bench.json'))}")
    return (1 if mismatches else 0), result
