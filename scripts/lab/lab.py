#!/usr/bin/python3
"""The heterogeneous-cluster lab (docs/lab.md).

  lab.py run SCENARIO.yaml CASE [--out DIR]   one case on the emulated cluster
  lab.py bench SCENARIO.yaml [--out DIR] [--rounds N]
  lab.py bench-many SCENARIO.yaml... [--out DIR] [--rounds N] [--budget-s S] [--reuse]
  lab.py faults SCENARIO.yaml CASE [--out DIR] [--recovery relaunch|elastic|replan] [--set KEY=VALUE]...
                                              the case with and without the scenario's faults
  lab.py clean                                remove what crashed lab runs left behind

Exit codes: 0 ok, 1 a run failed, 2 bad scenario or arguments, 130 interrupted.
"""
import signal


# Ctrl-C and SIGTERM unwind through the finally blocks that kill the workers and remove the
# namespaces. Installed before anything else: a shell starts background jobs with SIGINT
# ignored, so a SIGINT that arrives before this line is discarded by the kernel (the imports
# below take a second on a loaded machine). run.sh closes the gap: it resets SIGINT to its
# default and starts Python with both signals blocked, so one that comes early waits for the
# unblocking below. The first signal stops the lab; the ones after it are
# ignored, so that they cannot cut the clean-up short and leave namespaces behind.
def _stop(signum, _frame):
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt(signum)


for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, _stop)

import sys  # noqa: E402

try:
    # run.sh starts Python with both blocked; one that came meanwhile is delivered now, to _stop.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    import argparse
    import os

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from labkit import bench, faults, job, many, netlab, scenario
except KeyboardInterrupt as _stopped:  # nothing built yet
    print(f"lab: stopped by signal {_stopped.args[0]}", file=sys.stderr)
    sys.exit(128 + _stopped.args[0])

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def binary():
    path = os.environ.get("HOLMES_BIN") or os.path.join(REPO, "build", "holmes-train")
    if not os.access(path, os.X_OK):
        raise scenario.LabError(f"holmes-train not found at {path}; build it with scripts/setup.sh build "
                                "or point HOLMES_BIN at it")
    return os.path.abspath(path)


def check_root():
    if os.geteuid() != 0:
        raise scenario.LabError("the lab creates network namespaces and tc qdiscs: run it as root")
    for tool in ("ip", "tc"):
        if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]):
            raise scenario.LabError(f"'{tool}' (iproute2) is missing; install iproute2")


def default_out(sc_path, what):
    stem = os.path.splitext(os.path.basename(sc_path))[0]
    return os.path.join(REPO, "runs", "lab", stem, what)


def cmd_run(args):
    sc = scenario.load(args.scenario)
    net = scenario.case_net(sc, args.case)
    exe = binary()
    check_root()
    left = netlab.sweep()
    if left:
        print(f"lab: removed {len(left)} namespace(s) an earlier lab run left behind")
    out_dir = os.path.abspath(args.out or default_out(args.scenario, args.case))
    r = job.run_case(sc, net, exe, out_dir, calibrate=not args.no_calibrate)
    print(r["plan_text"])
    print(f"lab: case {args.case}: {len(r['losses'])} steps, step time {r['step_s'] * 1e3:.1f} ms (median after "
          f"{job.WARMUP_STEPS} warm-up steps), loss {r['losses'][0]:.6f} -> {r['losses'][-1]:.6f}")
    e = r["ethernet"]
    if e:
        print(f"lab: case {args.case}: {e['bytes_per_step'] / 1e6:.3f} MB per step sent over Ethernet by all nodes "
              f"(steps {e['steps'][0] + 1}..{e['steps'][-1]}, frames with headers"
              f"{'; read after the run ended' if e.get('late') else ''})")
    if r["calibration"]:
        print(f"lab: calibration written to {r['calibration']}")
    print(f"lab: logs in {out_dir}")
    return 0


def cmd_bench(args):
    sc = scenario.load(args.scenario)
    for case in sc.cases:
        scenario.case_net(sc, case)  # every case is valid before anything runs
    exe = binary()
    check_root()
    netlab.sweep()
    out_dir = os.path.abspath(args.out or default_out(args.scenario, "bench"))
    return bench.run(sc, exe, out_dir, args.rounds or sc.rounds)[0]


def cmd_bench_many(args):
    for path in args.scenarios:
        scenario.load(path)
    exe = binary()
    check_root()
    netlab.sweep()
    out_dir = os.path.abspath(args.out or os.path.join(REPO, "runs", "lab", "many"))
    os.makedirs(out_dir, exist_ok=True)
    return many.run(args.scenarios, exe, out_dir, args.rounds, args.budget_s, args.reuse)


def cmd_faults(args):
    sc = scenario.load(args.scenario)
    net = scenario.case_net(sc, args.case)
    for kv in args.set:
        if "=" not in kv:
            raise scenario.LabError(f"--set {kv!r}: expected KEY=VALUE (a job spec key, as holmes-train --set takes)")
    exe = binary()
    check_root()
    netlab.sweep()
    out_dir = os.path.abspath(args.out or default_out(args.scenario, f"faults-{args.case}"))
    extra = [x for kv in args.set for x in ("--set", kv)]
    faults.run(sc, net, exe, out_dir, extra, args.recovery, baseline=not args.reuse_clean)
    return 0


def cmd_clean(_args):
    check_root()
    left = netlab.sweep()
    print(f"lab: removed {len(left)} namespace(s)" + (f": {', '.join(left)}" if left else ""))
    return 0


def parse_args():
    ap = argparse.ArgumentParser(prog="lab.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run one case of a scenario")
    r.add_argument("scenario")
    r.add_argument("case", help=" | ".join(scenario.CASES))
    r.add_argument("--out", help="run folder (default runs/lab/<scenario>/<case>)")
    r.add_argument("--no-calibrate", action="store_true", help="do not measure a calibration")
    b = sub.add_parser("bench", help="run every case alternately and compare")
    b.add_argument("scenario")
    b.add_argument("--out", help="bench folder (default runs/lab/<scenario>/bench)")
    b.add_argument("--rounds", type=int, help="rounds (default: the scenario's, else 3)")
    m = sub.add_parser("bench-many", help="bench several scenarios, a table and one summary line")
    m.add_argument("scenarios", nargs="+")
    m.add_argument("--out", help="folder of the benches (default runs/lab/many)")
    m.add_argument("--rounds", type=int, help="rounds per scenario (default: each scenario's)")
    m.add_argument("--budget-s", type=float, default=0,
                   help="start no scenario after this many seconds (0: no limit); skipped ones are listed")
    m.add_argument("--reuse", action="store_true",
                   help="run nothing: predict and tabulate the runs an earlier bench-many left in --out again "
                        "(the plans those runs chose are not changed)")
    f = sub.add_parser("faults", help="a case with and without the scenario's faults: goodput, detection, recovery")
    f.add_argument("scenario")
    f.add_argument("case", help=" | ".join(scenario.CASES))
    f.add_argument("--out", help="folder (default runs/lab/<scenario>/faults-<case>)")
    f.add_argument("--recovery", choices=("relaunch", "elastic", "replan"), default="relaunch",
                   help="relaunch: a failed worker stops the job, started again with resume auto (Slurm's "
                        "requeue); elastic: the job recovers itself, the lab only restarts killed workers; replan: "
                        "the job recovers itself on the nodes left, nothing is started again")
    f.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a job spec key for both runs (e.g. parallel.elastic=true), repeatable")
    f.add_argument("--reuse-clean", action="store_true", help="keep the fault-free run an earlier call left in --out")
    sub.add_parser("clean", help="remove namespaces that crashed lab runs left behind")
    return ap.parse_args()


def main():
    try:
        args = parse_args()
        try:
            netlab.quota_period_us()  # read before anything is built, as a scenario key is
        except ValueError as e:
            raise scenario.LabError(str(e)) from None
        return {"run": cmd_run, "bench": cmd_bench, "bench-many": cmd_bench_many,
                "faults": cmd_faults, "clean": cmd_clean}[args.command](args)
    except scenario.LabError as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 2
    except (job.RunFailed, netlab.NetError) as e:
        print(f"lab: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        signum = e.args[0] if e.args else signal.SIGINT
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second signal must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        netlab.remove_own()
        print(f"lab: stopped by signal {signum}; the emulated cluster was removed", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
