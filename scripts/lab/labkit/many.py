"""bench-many: the bench of several scenarios in a row (generated ones, docs/lab.md), a table of
their outcomes and one summary line over all of them."""
import json
import os
import statistics
import time

from . import bench, scenario


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def recorded_loads(out_root):
    """The load column of the runs an earlier bench-many left in out_root (bench-many.json), by
    scenario file stem: what --reuse shows, since the runs were measured then, not now. {} when
    there is none (runs of an older lab, or benched one scenario at a time)."""
    try:
        with open(os.path.join(out_root, "bench-many.json")) as f:
            rows = json.load(f).get("rows") or []
    except (OSError, ValueError):
        return {}
    return {os.path.splitext(os.path.basename(r.get("scenario", "")))[0]: r.get("load") for r in rows if r.get("load")}


def row(summary, load):
    """The figures of one scenario's bench: speed-ups (b's step time over a's), the worst
    prediction error and spread, and whether holmes lost to naive or auto to holmes by more
    than the rounds' spread. `load`: the load column's text (the load average before-after the
    bench, or as recorded with reused runs)."""
    m, sp = summary["measured_s"], summary["spreads"]

    def over(a, b):
        return m[b] / m[a] if a in m and b in m else None

    def beyond_spread(slow, fast):  # `slow` slower than `fast` by more than either's spread
        if slow not in m or fast not in m:
            return None
        return m[slow] > m[fast] * (1 + max(sp[slow], sp[fast]))

    errs = summary["errors"]
    own = summary.get("own_errors") or {}  # runs benched by an older lab: none
    same = summary.get("same_plan") or {}
    return {"same_plan": sorted({" = ".join(v) for v in same.values()}),
            "across": summary.get("priced_across_tensor") or {}, "scenario": summary["path"], "degrees": summary["degrees"],
            "holmes_megatron": over("holmes", "megatron"), "holmes_naive": over("holmes", "naive"),
            "holmes_fast": over("holmes", "fast"), "auto_holmes": over("auto", "holmes"),
            "holmes_loses_to_naive": beyond_spread("holmes", "naive"),
            "auto_loses_to_holmes": beyond_spread("auto", "holmes"),
            "errors": errs, "spreads": sp, "max_error": max((abs(e) for e in errs.values()), default=None),
            "own_errors": own, "max_own_error": max((abs(e) for e in own.values()), default=None),
            "max_spread": max(sp.values(), default=None), "load": load,
            "losses_identical": summary["losses_identical"],
            # Ethernet bytes per step measured (frames, headers included) over the plan's, per case.
            "ethernet_over_plan": {c: summary["ethernet_bytes_per_step"][c] / summary["ethernet_predicted"][c] - 1
                                   for c in summary.get("ethernet_bytes_per_step") or {}
                                   if (summary.get("ethernet_predicted") or {}).get(c)}}


def fmt(x, pattern="{:.2f}"):
    return pattern.format(x) if x is not None else "-"


def print_table(rows, skipped):
    print("\nlab-many: one row per scenario (a/b: b's measured step time over a's; error: the largest "
          "|predicted/measured - 1| of its cases; spread: the largest (slowest - fastest)/median of a case's rounds; "
          "own: the largest error of its cases with each round's own calibration)")
    print(f"{'scenario':<28}{'degrees':>8}{'auto':>8}{'h/meg':>7}{'h/naive':>8}{'h/fast':>7}{'h/auto':>7}"
          f"{'error':>7}{'spread':>7}{'own':>7}  {'load 1m':<10} notes")
    for r in rows:
        d = r["degrees"].get("holmes") or next(iter(r["degrees"].values()), {})
        a = r["degrees"].get("auto") or {}
        deg = lambda x: f"{x['tensor']}x{x['pipeline']}x{x['data']}" if x else "-"  # noqa: E731
        notes = []
        if r["holmes_loses_to_naive"]:
            notes.append("holmes slower than naive beyond spread")
        if r["auto_loses_to_holmes"]:
            notes.append("auto slower than holmes beyond spread")
        notes += [f"same plan: {s}" for s in r.get("same_plan", [])]
        notes += [f"{case} priced {what}" for case, what in (r.get("across") or {}).items()]
        if not r["losses_identical"]:
            notes.append("LOSSES DIFFER")
        name = os.path.splitext(os.path.basename(r["scenario"]))[0]
        print(f"{name:<28}{deg(d):>8}{deg(a):>8}{fmt(r['holmes_megatron']):>7}{fmt(r['holmes_naive']):>8}"
              f"{fmt(r['holmes_fast']):>7}{fmt(r['auto_holmes']):>7}{fmt(r['max_error'] and r['max_error'] * 100, '{:.1f}%'):>7}"
              f"{fmt(r['max_spread'] and r['max_spread'] * 100, '{:.1f}%'):>7}"
              f"{fmt(r.get('max_own_error') and r['max_own_error'] * 100, '{:.1f}%'):>7}  {r['load']:<10} {'; '.join(notes)}")
    for path, why in skipped:
        print(f"{os.path.basename(path):<28} skipped: {why}")


def summary_line(rows):
    hm = [r["holmes_megatron"] for r in rows if r["holmes_megatron"] is not None]
    hn = [r["holmes_naive"] for r in rows if r["holmes_naive"] is not None]
    errs = [abs(e) for r in rows for e in r["errors"].values()]
    f = lambda xs, g: fmt(g(xs)) if xs else "n/a"  # noqa: E731
    p = lambda xs, g: f"{g(xs) * 100:.0f}%" if xs else "n/a"  # noqa: E731
    return (f"lab-many: scenarios {len(rows)}, holmes/megatron min {f(hm, min)} median {f(hm, statistics.median)}, "
            f"holmes/naive min {f(hn, min)}, prediction error median {p(errs, statistics.median)} max {p(errs, max)}")


def own_line(rows):
    """The same errors with each round priced from the calibration it wrote itself (bench.own_errors):
    what of the error is the model's, and what the machine's drift between runs; None when no
    row has them."""
    errs = [abs(e) for r in rows for e in (r.get("own_errors") or {}).values()]
    if not errs:
        return None
    return (f"lab-many: with each run's own calibration (the model without the machine's drift between runs): "
            f"prediction error median {statistics.median(errs) * 100:.0f}% max {max(errs) * 100:.0f}%")


def ethernet_line(rows):
    """Every case's Ethernet bytes per step as measured (the nodes' eth0 counters: frames with their
    TCP/IP headers and acknowledgements) over the plan's bytes_per_step.ethernet; None without any."""
    over = [(r["scenario"], c, x) for r in rows for c, x in (r.get("ethernet_over_plan") or {}).items()]
    if not over:
        return None
    worst = max(over, key=lambda t: abs(t[2]))
    return (f"lab-many: Ethernet bytes per step, measured over the plan's: median "
            f"{statistics.median(x for _, _, x in over) * 100:+.1f}%, largest {worst[2] * 100:+.1f}% "
            f"({os.path.basename(worst[0])} {worst[1]}), {sum(abs(x) <= 0.05 for _, _, x in over)} of {len(over)} "
            f"cases within 5%")


def run(paths, exe, out_root, rounds, budget_s, reuse_runs=False):
    """Benches each scenario in turn (bench.run), none started after budget_s seconds; returns
    the exit code (1 when a bench failed or the losses of a scenario differ)."""
    scenarios = [scenario.load(p) for p in paths]  # every file is valid before anything runs
    for sc in scenarios:
        for case in sc.cases:
            scenario.case_net(sc, case)
    start, rows, skipped, code = time.monotonic(), [], [], 0
    recorded = recorded_loads(out_root) if reuse_runs else {}
    for sc in scenarios:
        elapsed = time.monotonic() - start
        if budget_s and elapsed > budget_s:
            skipped.append((sc.path, f"the time budget of {budget_s:g} s was spent ({elapsed:.0f} s)"))
            continue
        stem = os.path.splitext(os.path.basename(sc.path))[0]
        if reuse_runs:  # the runs were measured earlier: the load then, not this machine's now
            print(f"lab-many: {sc.path} (the runs in {os.path.join(out_root, stem)}, load then "
                  f"{recorded.get(stem) or 'not recorded'})", flush=True)
        else:
            before = load_average()
            print(f"lab-many: {sc.path} (load average {before}, {elapsed:.0f} s into the budget)", flush=True)
        rc, summary = bench.run(sc, exe, os.path.join(out_root, stem), rounds or sc.rounds, reuse_runs)
        code = max(code, rc)
        rows.append(row(summary, (recorded.get(stem) or "-") if reuse_runs else f"{before}-{load_average()}"))
    print_table(rows, skipped)
    line = summary_line(rows)
    print(line)
    own = own_line(rows)
    if own:
        print(own)
    eth = ethernet_line(rows)
    if eth:
        print(eth)
    with open(os.path.join(out_root, "bench-many.json"), "w") as f:
        json.dump({"rows": rows, "skipped": skipped, "line": line, "own_line": own, "ethernet_line": eth}, f, indent=1)
    return code
