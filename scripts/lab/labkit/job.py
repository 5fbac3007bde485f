"""One case of a scenario, run for real: the job spec and topology file of the case, the
workers started in the node namespaces as a torchrun-style launcher would start them, and
what the run measured (losses, step times, the calibration it wrote)."""
import ctypes
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import threading
import time

from . import netlab

MASTER_PORT = 29500
WARMUP_STEPS = 2  # steps left out of the step time: first allocations, connection set-up
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def job_yaml(sc, net, run_dir, calibrate, eval_interval=0, cluster_timeout_s=120, extra=""):
    m, t, p = sc.model, sc.train, sc.parallel
    tokens = max(200_000, 4 * t["steps"] * t["global_batch"] * (t["seq_len"] + 1))
    model = "".join(f", {k}: {m[k]}" for k in ("vocab_size",) if k in m)
    cal = f", calibrate: {json.dumps(calibrate)}" if calibrate else ""
    # auto: the planner picks the degrees too, for the same number of workers.
    degrees = ", ".join(f"{k}: {'auto' if net.case == 'auto' else p[k]}" for k in ("tensor", "pipeline", "data"))
    outer = ""
    if net.case in ("sync", "diloco", "diloco-overlap"):  # replicas (docs/diloco.md)
        mode = "sync" if net.case == "sync" else "diloco"
        outer = f", replicas: {p['replicas']}, outer: {mode}, inner_steps: {p.get('inner_steps', 20)}"
        if net.case == "diloco-overlap":
            outer += f", outer_overlap: {overlap(sc, net)}"
    partition = f", partition: {net.partition}" if net.partition != "auto" else ""
    return f"""# written by scripts/lab for case '{net.case}' of {sc.path}
job: {{name: lab-{net.case}, seed: 1234, output_dir: {run_dir}/out}}
model: {{layers: {m['layers']}, hidden: {m['hidden']}, heads: {m['heads']}, max_seq_len: {t['seq_len']}{model}}}
data: {{source: synthetic, synthetic: {{tokens: {tokens}}}}}
train: {{steps: {t['steps']}, micro_batch: {t['micro_batch']}, global_batch: {t['global_batch']}, seq_len: {t['seq_len']},
         warmup_steps: 2, eval_interval: {eval_interval}}}
parallel: {{{degrees}, placement: {net.placement}{partition}, schedule: {net.schedule}{outer}}}
cluster: {{topology: topology.yaml, timeout_s: {cluster_timeout_s:g}{cal}}}
log: {{interval: 1}}
{extra}"""


def worker_env(sc, cluster, node, node_rank, local, token):
    w = sc.workers_per_node
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "HOLMES_", "OMP_", "OPENBLAS_")) and k not in
           ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE",
            "MASTER_ADDR", "MASTER_PORT")}
    threads = str(sc.threads_per_worker)
    env.update(RANK=str(node_rank * w + local), WORLD_SIZE=str(len(sc.order) * w), LOCAL_RANK=str(local),
               LOCAL_WORLD_SIZE=str(w), GROUP_RANK=str(node_rank), GROUP_WORLD_SIZE=str(len(sc.order)),
               MASTER_ADDR=cluster.eth_addr(sc.order[0]), MASTER_PORT=str(MASTER_PORT), HOLMES_JOB_TOKEN=token,
               HOLMES_NODE_NAME=node, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
    return env


class RunFailed(Exception):
    pass


def set_autogroup_nice(pid, nice):
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass  # no autogroup scheduling on this kernel: the process nice value is all there is


def _before_exec(cgroup):
    """In each worker before exec: SIGKILL when the lab process is gone, however it ended
    (the setting survives the exec of `ip netns exec`, `nice` and holmes-train), and into its
    node's cgroup (its CPU quota) when the scenario declares speeds."""
    def run():
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    return run


CLK_TCK = os.sysconf("SC_CLK_TCK")  # the unit of /proc's utime, stime and /proc/stat


SWITCHES = ("se.nr_migrations", "nr_voluntary_switches", "nr_involuntary_switches")


def rank_threads(pid):
    """Per thread of a worker: (utime, stime, run) in seconds and (migrations, voluntary,
    involuntary switches). utime and stime are the kernel's tick-sampled split of the thread's
    run time (/proc/<pid>/task/<tid>/stat, fields 14-15); run is its schedstat run time (ns);
    the counts are its /proc/<pid>/task/<tid>/sched lines (zeros where the kernel has no such
    file). Without CONFIG_IRQ_TIME_ACCOUNTING a softirq that runs while the thread is on the
    CPU counts in its stime and run time. {} once it is gone. `ip netns exec` and `nice` exec
    the binary, so a launched pid is the worker's own."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the comm, which may hold spaces
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run = int(f.read().split()[0]) / 1e9
            counts = dict.fromkeys(SWITCHES, 0)
            try:
                with open(f"/proc/{pid}/task/{tid}/sched") as f:
                    for line in f:
                        key, _, value = line.partition(":")
                        if key.strip() in counts:
                            counts[key.strip()] = int(float(value))
            except OSError:
                pass  # no CONFIG_SCHED_DEBUG
            out[tid] = (int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK, run, tuple(counts.values()))
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return out


def host_kernel():
    """The whole VM's CPU time by kind so far (/proc/stat's first line, seconds: user, nice,
    system, irq, softirq, idle, steal), its NET_RX and NET_TX softirqs raised, and the CPU
    seconds of the ksoftirqd threads (softirq work deferred out of whichever task was on the
    CPU: charged to no worker)."""
    with open("/proc/stat") as f:
        v = [int(x) / CLK_TCK for x in f.readline().split()[1:9]]
    out = dict(zip(("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"), v))
    with open("/proc/softirqs") as f:
        for line in f:
            name, *counts = line.split()
            if name in ("NET_RX:", "NET_TX:"):
                out[name[:-1].lower()] = sum(int(c) for c in counts)
    ksoft = 0.0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if not f.read().startswith("ksoftirqd/"):
                        continue
                with open(f"/proc/{pid}/schedstat") as f:
                    ksoft += int(f.read().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                pass
    out["ksoftirqd"] = ksoft
    return out


def launch(sc, cluster, binary, run_dir, pids=None):
    """Starts every worker in its node's namespace, node by node in launch order; waits.
    `pids` (a dict) gets rank -> pid as each worker starts (the meter reads their CPU time)."""
    token = secrets.token_hex(16)
    # HOLMES_LAB_NICE (e.g. -10, as root) lets the workers win over other work on a shared
    # machine: their own session's autogroup gets that nice value, so the scheduler's fair share
    # between sessions does not halve their compute when someone else compiles.
    nice = int(os.environ.get("HOLMES_LAB_NICE", "0"))
    procs = []
    failed = []
    # A stop signal may arrive while workers are being started: the ones started are killed too.
    try:
        for node_rank, node in enumerate(sc.order):
            for local in range(sc.workers_per_node):
                rank = node_rank * sc.workers_per_node + local
                with open(os.path.join(run_dir, f"rank-{rank}.log"), "w") as log:
                    cmd = ["ip", "netns", "exec", cluster.node_ns[node], "nice", "-n", str(nice), binary,
                           "--config", os.path.join(run_dir, "job.yaml")]
                    p = subprocess.Popen(cmd, cwd=run_dir, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True,
                                         preexec_fn=_before_exec(cluster.cgroups.get(node)),
                                         env=worker_env(sc, cluster, node, node_rank, local, token))
                procs.append((rank, p))
                if pids is not None:
                    pids[rank] = p.pid
                if nice:
                    set_autogroup_nice(p.pid, nice)
        deadline = time.monotonic() + sc.timeout_s
        for rank, p in procs:
            left = max(1.0, deadline - time.monotonic())
            try:
                code = p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                raise RunFailed(f"rank {rank} did not finish within timeout_s = {sc.timeout_s:g} s "
                                f"(logs: {run_dir}/rank-*.log)")
            if code != 0:
                failed.append((rank, code))
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if failed:
        rank, code = failed[0]
        tail = open(os.path.join(run_dir, f"rank-{rank}.log")).read().splitlines()[-15:]
        raise RunFailed(f"rank {rank} exited with code {code} ({len(failed)} rank(s) failed); last lines of its "
                        f"log {run_dir}/rank-{rank}.log:\n    " + "\n    ".join(tail))


def rank_wait_windows(rows):
    """(first step covered, the ranks' mean wait in ms per step, those steps' mean step_ms) for
    each row with per-rank shares: the shares cover the steps after those of the previous such
    row up to its figures_step (binaries since 2026-11-27 reduce them in the background, so a
    row carries the previous step's; older ones: the row's own step), priced at those steps'
    mean step_ms. A share is at most 1, so each window's wait is at most its mean step."""
    by_step = {r["step"]: r for r in rows}
    out, covered = [], 0
    for r in rows:
        if not r.get("comm_share_ranks"):
            continue
        through = r.get("figures_step", r["step"])
        steps = [by_step[s]["step_ms"] for s in range(covered + 1, through + 1) if s in by_step] or [r["step_ms"]]
        step = statistics.mean(steps)
        out.append((covered + 1, statistics.mean(r["comm_share_ranks"]) * step, step))
        covered = through
    return out


def loop_ms(rows):
    """Each step's loop period on rank 0 (ms): step_ms and the time the loop spent before it
    outside step_ms (between_ms; None for binaries without it, and for a process's first step,
    where between_ms is 0 and the period has no start)."""
    return [r["step_ms"] + r["between_ms"] if r.get("between_ms") and i > 0 else None for i, r in enumerate(rows)]


def results(run_dir):
    """Losses (exact, as logged), each step's step_ms, between_ms and loop_ms (None from binaries
    without between_ms), the steady step time (median after warm-up), the plan (its JSON), and the bytes
    sent over Ethernet per step in the window of ethernet_window (None if not measured)."""
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "out", "metrics.jsonl")) if '"loss"' in line]
    steady = [r["step_ms"] for r in rows[WARMUP_STEPS:]] or [r["step_ms"] for r in rows]
    # The plan the run ran under, as the binary wrote it (out/plan.json: --plan-only --format json's text).
    plan = json.load(open(os.path.join(run_dir, "out", "plan.json")))
    degrees = {k: plan[k] for k in ("tensor", "pipeline", "data")}
    # The plan as the log printed it, for people to read (nothing is parsed out of it).
    log = [line.removeprefix("[rank 0] ") for line in open(os.path.join(run_dir, "rank-0.log")).read().splitlines()]
    start = next((i for i, line in enumerate(log) if line.startswith("Plan: ")), 0)
    end = next((i for i, line in enumerate(log) if line.startswith("plan hash")), start)
    eth, cpu = os.path.join(run_dir, "ethernet.json"), os.path.join(run_dir, "cpu.json")
    # The ranks' mean time waiting on communication per step (comm_share_ranks of the log
    # steps), median over the steps after warm-up: what the plan and the network decide; the
    # rest of the step is compute and host work, which moves with the machine (docs/lab.md).
    windows = [(w, s) for first, w, s in rank_wait_windows(rows) if first > WARMUP_STEPS]
    waits = [w for w, _ in windows]
    return {"cpu": json.load(open(cpu)) if os.path.exists(cpu) else None, "phases": phases(run_dir, rows),
            "losses": [r["loss"] for r in rows], "step_ms": [r["step_ms"] for r in rows],
            "between_ms": [r.get("between_ms") for r in rows],
            "loop_ms": loop_ms(rows),
            "step_s": statistics.median(steady) / 1e3, "plan": plan, "plan_text": "\n".join(log[start:end + 1]),
            "wait_s": statistics.median(waits) / 1e3 if waits else None,
            "wait_windows_ms": windows,
            "degrees": degrees, "ethernet": json.load(open(eth)) if os.path.exists(eth) else None}


PHASES = ("pipeline", "grad_sync", "job_sum", "update")
# Inside the pipeline phase: its passes and its waits for the neighbouring stages (binaries
# from 2026-11-28 on).
PIPELINE_PARTS = ("passes", "pipeline_wait")
RANK_PHASES = re.compile(r"^rank (?P<rank>\d+): a step after the first, mean ms: pipeline (?P<pipeline>[\d.]+)"
                         r"(?: \(passes (?P<passes>[\d.]+), waiting for neighbouring stages (?P<pipeline_wait>[\d.]+)\))?"
                         r", gradient sync wait (?P<grad_sync>[\d.]+), job sums (?P<job_sum>[\d.]+), optimizer (?P<update>[\d.]+)")


def phases(run_dir, rows):
    """Where the steps went (the trainer's phase timers, docs/training.md "Log"): rank 0's median
    over the steps after warm-up of each phase, and every rank's means from its last line;
    None from binaries without them."""
    steady = rows[WARMUP_STEPS:] or rows
    if not steady or any(f"{k}_ms" not in steady[0] for k in PHASES):
        return None
    keys = PHASES + tuple(k for k in PIPELINE_PARTS if f"{k}_ms" in steady[0])
    out = {"rank0": {k: statistics.median(r[f"{k}_ms"] for r in steady) for k in keys}, "ranks": {}}
    for name in sorted(os.listdir(run_dir)):
        if not (name.startswith("rank-") and name.endswith(".log")):
            continue
        for line in open(os.path.join(run_dir, name)):
            m = RANK_PHASES.match(line.removeprefix(f"[rank {name[5:-4]}] "))
            if m:  # the pipeline's parts only where the binary printed them
                out["ranks"][int(m["rank"])] = {k: float(m[k]) for k in PHASES + PIPELINE_PARTS if m[k] is not None}
    return out


def ethernet_window(sc, net):
    """The steps after which a run reads its Ethernet byte counters: after step WARMUP_STEPS
    (start-up, the calibration probes and the first steps' connection set-up are over) and up
    to the step before the last (the end-of-run checkpoint stays out); for diloco a whole
    number of inner_steps periods, so the window holds as many outer syncs as the plan
    amortizes (each exchange landed: tau steps after it was sent, with overlap), with one more
    reading just before the first of them (the steps without an outer sync alone)."""
    first, steps = WARMUP_STEPS, sc.train["steps"]
    if net.case not in ("diloco", "diloco-overlap"):
        return [first, steps - 1] if steps - 1 > first else None
    h = sc.parallel.get("inner_steps", 20)
    tau = overlap(sc, net)  # an exchange sent after step t lands after t + tau: the window waits for it
    k = (steps - 1 - first - tau) // h
    if k < 1:
        return None
    quiet = (first // h + 1) * h - 1  # the last step before the first outer sync after `first`
    return [first] + ([quiet] if quiet > first else []) + [first + k * h + tau]


def overlap(sc, net):
    """The case's parallel.outer_overlap (tau)."""
    return sc.parallel.get("outer_overlap", 1) if net.case == "diloco-overlap" else 0


class EthernetMeter(threading.Thread):
    """Reads the cluster's Ethernet byte counters (and, for cpu_result, the node cgroups' CFS
    counters and each worker's CPU time) when rank 0 has trained each step of `window`
    (metrics.jsonl, polled every 10 ms: a read may come a little after the step ended, so each
    reading records how many steps were trained when it was taken). Every step's row is written
    when the step has trained (a diloco job's too: the rows between its outer syncs carry the
    replica's loss, loss_replica, instead of waiting for the job's)."""

    def __init__(self, cluster, metrics, window):
        super().__init__(daemon=True)
        self.cluster, self.metrics, self.window = cluster, metrics, window
        self.snaps = []  # (steps logged, bytes, read after the workers exited)
        self.times = []  # time.monotonic() of each reading
        self.pids = {}  # rank -> pid, filled by launch
        self.cpu = []  # per reading: (node cgroups' cpu.stat, rank -> CPU seconds, rank -> rank_threads, host_kernel)
        self.done = threading.Event()

    def _steps_logged(self):
        try:
            with open(self.metrics) as f:
                return sum(1 for line in f if line.endswith("\n") and '"loss"' in line)
        except OSError:
            return 0

    def run(self):
        size = -1
        while len(self.snaps) < len(self.window):
            exited = self.done.is_set()  # the workers are gone: one last look, then stop
            now = os.stat(self.metrics).st_size if os.path.exists(self.metrics) else 0
            if now != size:
                size = now
                steps = self._steps_logged()
                if steps >= self.window[len(self.snaps)]:
                    self.times.append(time.monotonic())
                    self.snaps.append((steps, self.cluster.ethernet_bytes(), exited))
                    threads = {r: rank_threads(p) for r, p in self.pids.items()}
                    # A rank's CPU seconds: its threads' run times of the same reading (None once it is gone).
                    self.cpu.append((self.cluster.cpu_stat(),
                                     {r: sum(t[2] for t in th.values()) if th else None for r, th in threads.items()},
                                     threads, host_kernel()))
            if exited:
                break
            self.done.wait(0.01)

    def result(self):
        """{'bytes_per_step' (first to last reading), 'steps': the steps logged at each reading,
        'bytes': at each reading from the first, 'late', 'wall_s_per_step': the wall-clock time
        between the first and the last reading per step (to compare with the steps' logged
        step_ms)} or None when the run ended first."""
        if len(self.snaps) < len(self.window) or self.snaps[-1][0] <= self.snaps[0][0]:
            return None
        (s0, b0, _), (s1, b1, late) = self.snaps[0], self.snaps[-1]
        # late: read after the workers exited, so the end-of-run traffic is in it too.
        return {"bytes_per_step": (b1 - b0) / (s1 - s0), "steps": [s for s, _, _ in self.snaps],
                "bytes": [b - b0 for _, b, _ in self.snaps], "late": late,
                "wall_s_per_step": (self.times[-1] - self.times[0]) / (s1 - s0)}


    def cpu_result(self):
        """Between the first and the last reading, per step: each node cgroup's CFS periods,
        throttled periods and throttled seconds, each rank's CPU seconds; None when the run ended
        first, read late, or ran without quotas and pids. docs/lab.md, "CPU quotas"."""
        if len(self.snaps) < len(self.window) or self.snaps[-1][0] <= self.snaps[0][0] or self.snaps[-1][2]:
            return None
        steps = self.snaps[-1][0] - self.snaps[0][0]
        (stat0, cpu0, thr0, host0), (stat1, cpu1, thr1, host1) = self.cpu[0], self.cpu[-1]
        nodes = {node: {k: (stat1[node][k] - stat0[node][k]) / steps for k in ("periods", "throttled", "throttled_s")}
                 for node in stat1 if node in stat0}
        ranks = {str(r): (cpu1[r] - cpu0[r]) / steps for r in cpu1
                 if cpu1[r] is not None and cpu0.get(r) is not None}
        if not nodes and not ranks:
            return None
        return {"steps": [self.snaps[0][0], self.snaps[-1][0]], "nodes": nodes, "rank_cpu_s": ranks,
                "rank_threads_s": {str(r): thread_split(self.pids[r], thr0.get(r, {}), thr1.get(r, {}), steps)
                                   for r in thr1 if thr1[r]},
                "host_s": {k: (host1[k] - host0[k]) / steps for k in host1},
                "pids": {str(r): p for r, p in self.pids.items()}}


def thread_split(pid, before, after, steps):
    """A rank's per-step figures by thread kind: the main thread (it trains) and all the others
    (communication thread, Gloo's I/O threads): CPU seconds as user, system (ticks' split) and
    run (schedstat), and the times its threads moved to another CPU, gave the CPU up (waits)
    and were preempted; threads that started inside the window count from zero."""
    out = {}
    names = ("migrations", "voluntary", "involuntary")
    for tid, (u1, s1, r1, n1) in after.items():
        u0, s0, r0, n0 = before.get(tid, (0.0, 0.0, 0.0, (0, 0, 0)))
        kind = out.setdefault("main" if tid == str(pid) else "others",
                              {"user": 0.0, "system": 0.0, "run": 0.0, **dict.fromkeys(names, 0.0)})
        kind["user"] += (u1 - u0) / steps
        kind["system"] += (s1 - s0) / steps
        kind["run"] += (r1 - r0) / steps
        for name, a, b in zip(names, n0, n1):
            kind[name] += (b - a) / steps
    return out


def run_case(sc, net, binary, run_dir, calibrate=True):
    os.makedirs(run_dir, exist_ok=True)
    # What an earlier run left: its step lines in rank-N.log would pass for this run's.
    stale = ["out", "calibration.yaml", "ethernet.json", "cpu.json"] + [f for f in os.listdir(run_dir) if re.fullmatch(r"rank-\d+\.log", f)]
    subprocess.run(["rm", "-rf"] + [os.path.join(run_dir, f) for f in stale], check=True)
    cal = os.path.join(run_dir, "calibration.yaml") if calibrate else ""
    with open(os.path.join(run_dir, "job.yaml"), "w") as f:
        f.write(job_yaml(sc, net, run_dir, cal))
    cluster = netlab.Cluster(sc, net)
    try:
        print(f"lab: case {net.case}: emulated cluster in namespaces {cluster.tag}-* ({len(sc.nodes)} nodes, "
              f"Ethernet {net.ethernet_mbps:g} Mbit/s)", flush=True)
        cluster.build()
        with open(os.path.join(run_dir, "topology.yaml"), "w") as f:
            f.write(cluster.topology_yaml(sc.workers_per_node, sc.threads_per_worker))
        window = ethernet_window(sc, net)
        meter = EthernetMeter(cluster, os.path.join(run_dir, "out", "metrics.jsonl"), window) if window else None
        if meter:
            meter.start()
        try:
            launch(sc, cluster, binary, run_dir, meter.pids if meter else None)
        finally:
            if meter:
                meter.done.set()
                meter.join()
    finally:
        cluster.close()
    eth = meter.result() if meter else None
    if meter and eth is None:
        # the readings collapsed (the meter looked only after the window's last step): say so
        print(f"lab: case {net.case}: Ethernet bytes not measured: the counters were read after steps "
              f"{[s for s, _, _ in meter.snaps]} for the window {window}", flush=True)
    with open(os.path.join(run_dir, "ethernet.json"), "w") as f:
        json.dump(eth, f)
    with open(os.path.join(run_dir, "cpu.json"), "w") as f:
        json.dump(meter.cpu_result() if meter else None, f)
    out = results(run_dir)
    out["calibration"] = cal if cal and os.path.exists(cal) else ""
    return out
