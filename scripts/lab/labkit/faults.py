"""Faults during a run (docs/lab.md, "Faults"): a case run twice on the same emulated cluster
shape, once as it is and once with the scenario's faults injected while it trains, and what
the faults cost: goodput (tokens trained per second of the whole run, against the fault-free
run), per fault the time to detect and to recover, the tokens lost, and the final validation
loss beside the fault-free run's.

A fault is one of
  kill    SIGKILL to a node's workers; they are started again restart_after_s later (the node
          rebooted, Slurm restarting its tasks), with the same rank and environment;
  freeze  SIGSTOP to a node's workers for for_s seconds, then SIGCONT (a hung host);
  cut     an island's Ethernet down for for_s seconds, then up (a site's uplink flapping):
          its nodes still reach each other over their fabric, no one else;
  slow    a node's CPU quota times `speed` for for_s seconds (thermal throttling, a noisy
          neighbour); needs the scenario's CPU quotas.
It comes at_s seconds after the first step the run logged (start-up is not the fault's time),
or after step at_step (the same point of the run on a fast or a loaded machine). A kill or a
freeze at a step is raised by the workers it hits themselves, at the end of that step
(HOLMES_TEST_SIGNAL_AFTER_STEP): a lab that read the step from the logs and then sent the signal
would hit a later step, or none when the run ends first; the lab notices the worker killed or
stopped and takes it from there (the restart, the SIGCONT after for_s). A cut or a slow node at
a step starts when the lab reads the step in the rows.

How the job recovers (--recovery):
  relaunch  what a job without elasticity gets from Slurm's requeue: when a worker exits with
            an error, every other worker is stopped, and requeue_s later the whole job starts
            again with checkpoint.resume auto (its checkpoints every checkpoint_interval steps);
  elastic   the job's own recovery (parallel.elastic): a worker's exit stops no one; the lab
            only starts a killed (or dropped) worker again restart_after_s later, to rejoin;
  replan    a single pipeline's own recovery (parallel.elastic with one replica): a worker's exit
            stops no one and nothing is started again: the survivors re-plan on the nodes that
            remain and go on in the same processes (the killed node does not come back to the
            job; the store lives on rank 0's node unless fault_run.store is outside, so the
            fault must otherwise spare that node).
"""
import json
import os
import re
import signal
import subprocess
import time

from . import job, netlab
from .scenario import LabError

KINDS = ("kill", "freeze", "cut", "slow")
FAULT_KEYS = ("at_s", "at_step", "kind", "node", "island", "for_s", "speed", "restart_after_s")
RUN_KEYS = ("timeout_s", "checkpoint_interval", "requeue_s", "store")
POLL_S = 0.1
MAX_RESTARTS = 2  # elastic: how often the lab starts one rank again (a job that cannot take it back)
# A line of a worker that says it saw a peer fail (the runtime's failure messages and the
# elastic runtime's), or the launcher-style exit of the worker itself.
DETECT = re.compile(r"(peer rank \d+|a peer failed|rank \d+ .*(died|exited|lost|missing|timed out|did not)|replica \d+ .*(lost|left|dropped)"
                    r"|elastic|re-plan|time-out|timed out|connection (closed|reset))", re.IGNORECASE)
# A slow node fails no one: the job names it a straggler (docs/training.md, "Stragglers"; rank 0
# prints it, wherever rank 0 runs). Its recovery line ("back within") is no detection.
STRAGGLER = re.compile(r"^straggler: (rank|replica) \d+ .* since step \d+$")


def detected_at(kind, start, lines, events, faulted_ranks):
    """When the fault that began at `start` was first noticed: a line a worker it did not hit
    logs about a failed peer, a worker's exit or the lab stopping every one, and for a `slow`
    fault also the first straggler line (from any rank). None when nothing noticed it."""
    seen = [t for t, rank, text in lines if t >= start and rank not in faulted_ranks and DETECT.search(text)]
    seen += [t for t, e in events if t >= start and e.startswith(("exit ", "stop all"))]
    if kind == "slow":
        seen += [t for t, _, text in lines if t >= start and STRAGGLER.search(text)]
    return min(seen) if seen else None


class Fault:
    def __init__(self, index, at_s, at_step, kind, target, for_s, speed, restart_after_s):
        self.index, self.at_s, self.at_step, self.kind, self.target = index, at_s, at_step, kind, target
        self.for_s, self.speed, self.restart_after_s = for_s, speed, restart_after_s

    def describe(self):
        what = {"kill": f"kill {self.target} (back after {self.restart_after_s:g} s)",
                "freeze": f"freeze {self.target} for {self.for_s:g} s",
                "cut": f"cut island {self.target}'s Ethernet for {self.for_s:g} s",
                "slow": f"slow {self.target} to {self.speed:g} for {self.for_s:g} s"}[self.kind]
        return f"at {self.at_s:g} s: {what}" if self.at_step is None else f"at step {self.at_step}: {what}"


def check(c, raw, sc):
    """The scenario's `faults` list and `fault_run` mapping (checked like every key: exit 2
    naming the key, the value and what is accepted). Sets sc.faults and sc.fault_run."""
    sc.faults, sc.fault_run = [], {"timeout_s": 30.0, "checkpoint_interval": 10, "requeue_s": 10.0, "store": "rank0"}
    if raw.get("faults") is None:
        return
    if not isinstance(raw["faults"], list) or not raw["faults"]:
        c.fail("faults", raw["faults"], "a non-empty list of faults ({kind, at_s, ...})")
    names = [n for n, _ in sc.nodes]
    for i, f in enumerate(raw["faults"]):
        where = f"faults[{i}]"
        c.keys(where, f, FAULT_KEYS, ("kind",))
        kind = f["kind"]
        if kind not in KINDS:
            c.fail(f"{where}.kind", kind, " | ".join(KINDS))
        if ("at_s" in f) == ("at_step" in f):
            c.fail(where, f, "one of at_s (seconds after the first step) and at_step (a step of the run)")
        at_s = c.number(f"{where}.at_s", f["at_s"], 0) if "at_s" in f else 0
        at_step = c.number(f"{where}.at_step", f["at_step"], 1, sc.train["steps"], True) if "at_step" in f else None
        if kind == "cut":
            if f.get("island") not in sc.islands:
                c.fail(f"{where}.island", f.get("island"), f"an island of the scenario: {', '.join(sc.islands)}")
            target = f["island"]
        else:
            if f.get("node") not in names:
                c.fail(f"{where}.node", f.get("node"), f"a node of the scenario: {', '.join(names)}")
            target = f["node"]
        for key in ("node", "island"):
            if key in f and (key == "island") != (kind == "cut"):
                c.fail(f"{where}.{key}", f[key], f"no {key} for a {kind} fault (cut names an island, the others a node)")
        lasting = kind in ("freeze", "cut", "slow")
        if lasting != ("for_s" in f):
            c.fail(f"{where}.for_s", f.get("for_s"), f"{'seconds > 0' if lasting else 'absent'} for a {kind} fault")
        for_s = c.number(f"{where}.for_s", f["for_s"], 0.1) if lasting else 0
        if (kind == "slow") != ("speed" in f):
            c.fail(f"{where}.speed", f.get("speed"), f"{'0.05 to 1' if kind == 'slow' else 'absent'} for a {kind} fault")
        speed = c.number(f"{where}.speed", f["speed"], 0.05, 1) if kind == "slow" else 1
        if kind == "slow" and sc.cpu_cores <= 0:
            c.fail(f"{where}.kind", kind, "kill, freeze or cut: a slow node needs the CPU quotas (cpu_cores above 0)")
        if "restart_after_s" in f and kind != "kill":
            c.fail(f"{where}.restart_after_s", f["restart_after_s"], "absent for a fault that kills no worker")
        restart = c.number(f"{where}.restart_after_s", f.get("restart_after_s", 20), 0) if kind == "kill" else 0
        sc.faults.append(Fault(i, at_s, at_step, kind, target, for_s, speed, restart))
    got = raw.get("fault_run", {})
    c.keys("fault_run", got, RUN_KEYS)
    if "timeout_s" in got:
        sc.fault_run["timeout_s"] = c.number("fault_run.timeout_s", got["timeout_s"], 1)
    if "checkpoint_interval" in got:
        sc.fault_run["checkpoint_interval"] = c.number("fault_run.checkpoint_interval", got["checkpoint_interval"], 1,
                                                       None, True)
    if "requeue_s" in got:
        sc.fault_run["requeue_s"] = c.number("fault_run.requeue_s", got["requeue_s"], 0)
    if "store" in got:
        if got["store"] not in ("rank0", "outside"):
            c.fail("fault_run.store", got["store"], "rank0 (rank 0 starts the job's store on its node) or outside "
                   "(`holmes-train store` on a host of the Ethernet outside every island, which no fault touches)")
        sc.fault_run["store"] = got["store"]


class Tail:
    """Every line the workers log and every metrics row, stamped with when the lab first saw
    it (polled every POLL_S: a stamp is at most that late). Rows a resumed job later trims
    from metrics.jsonl stay here: they are the steps the faults cost."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.offsets = {}
        self.lines = []  # (t, rank, text)
        self.rows = []   # (t, row), every loss row seen, in the order seen
        self.metrics_at = 0
        self.metrics_inode = None
        self.texts = {}  # step -> its line in the metrics file as it is now
        self.kept = {}   # after a resume rewrote the file: the rows it kept, not yet passed
        self.max_step = 0  # the furthest step logged so far

    def poll(self):
        now = time.monotonic()
        for name in os.listdir(self.run_dir):
            m = re.fullmatch(r"rank-(\d+)\.log", name)
            if m:
                for text in self._new(os.path.join(self.run_dir, name), name):
                    self.lines.append((now, int(m.group(1)), text))
        path = os.path.join(self.run_dir, "out", "metrics.jsonl")
        try:
            st = os.stat(path)
        except OSError:
            return
        if st.st_ino != self.metrics_inode:
            # A resume writes the rows up to its checkpoint to a new file: those lines, text for
            # text, were seen already; the rows after them are steps trained again.
            self.metrics_inode, self.metrics_at = st.st_ino, 0
            self.kept, self.texts = self.texts, {}
        with open(path, "rb") as f:
            f.seek(self.metrics_at)
            data = f.read()
        complete = data[:data.rfind(b"\n") + 1]
        self.metrics_at += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "loss" not in row:
                continue
            self.texts[row["step"]] = line
            if self.kept.get(row["step"]) == line:
                continue
            self.kept = {}
            self.rows.append((now, row))
            self.max_step = max(self.max_step, row["step"])

    def _new(self, path, key):
        at = self.offsets.get(key, 0)
        try:
            with open(path, "rb") as f:
                f.seek(at)
                data = f.read()
        except OSError:
            return []
        complete = data[:data.rfind(b"\n") + 1]
        self.offsets[key] = at + len(complete)
        return complete.decode(errors="replace").splitlines()

    def first_step_at(self):
        return self.rows[0][0] if self.rows else None


def node_ranks(sc):
    """rank -> (node rank, node, local rank), as the lab launches them."""
    out = {}
    for node_rank, node in enumerate(sc.order):
        for local in range(sc.workers_per_node):
            out[node_rank * sc.workers_per_node + local] = (node_rank, node, local)
    return out


class Workers:
    """The job's workers in their node namespaces, one process per rank, started and stopped
    one by one (job.launch starts them all and waits; a fault run needs each on its own)."""

    def __init__(self, sc, cluster, binary, run_dir, extra):
        self.sc, self.cluster, self.binary, self.run_dir, self.extra = sc, cluster, binary, run_dir, extra
        self.token = os.urandom(16).hex()
        self.env_extra = {}  # set over each worker's variables (the store outside the job)
        self.procs = {}
        self.node_of = node_ranks(sc)

    def ranks_on(self, node):
        return [r for r, (_, n, _) in self.node_of.items() if n == node]

    def start(self, rank, resume=False, note="", hook=None):
        """hook: (step, "KILL" or "STOP"): the worker raises that signal on itself after the step."""
        node_rank, node, local = self.node_of[rank]
        cmd = ["ip", "netns", "exec", self.cluster.node_ns[node], self.binary,
               "--config", os.path.join(self.run_dir, "job.yaml")] + self.extra
        if resume:
            cmd += ["--set", "checkpoint.resume=auto"]
        log = open(os.path.join(self.run_dir, f"rank-{rank}.log"), "a")
        if note:
            log.write(f"lab: {note}\n")
            log.flush()
        env = job.worker_env(self.sc, self.cluster, node, node_rank, local, self.token)
        env.update(self.env_extra)
        if hook is not None:
            env["HOLMES_TEST_SIGNAL_AFTER_STEP"] = f"{hook[0]}:{hook[1]}:{rank}"
        self.procs[rank] = subprocess.Popen(
            cmd, cwd=self.run_dir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=job._before_exec(self.cluster.cgroups.get(node)), env=env)
        log.close()

    def hit(self, rank, kind):
        """Whether the worker of `rank` raised the fault `kind` on itself: killed, or stopped."""
        p = self.procs.get(rank)
        if p is None:
            return False
        if kind == "kill":
            return p.poll() == -signal.SIGKILL
        try:
            with open(f"/proc/{p.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        except OSError:
            return False

    def signal(self, rank, sig):
        p = self.procs.get(rank)
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    def stop_all(self):
        for rank, p in self.procs.items():
            if p.poll() is None:
                self.signal(rank, signal.SIGCONT)
                self.signal(rank, signal.SIGKILL)
                p.wait()


def start_store(ns, binary, run_dir, token):
    """`holmes-train store` in the store host's namespace for the job of `token`; waits until it
    listens. It ends by itself once the job's ranks have gone."""
    path = os.path.join(run_dir, "store.log")
    with open(path, "a") as log:
        p = subprocess.Popen(["ip", "netns", "exec", ns, binary, "store", "--port", str(job.MASTER_PORT)],
                             cwd=run_dir, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=dict(os.environ, HOLMES_JOB_TOKEN=token))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise job.RunFailed(f"the store outside the job exited with code {p.returncode} (log: {path})")
        if f"serving on port {job.MASTER_PORT}" in open(path).read():
            return p
        time.sleep(0.1)
    p.kill()
    raise job.RunFailed(f"the store outside the job did not listen within 30 s (log: {path})")


def _set_link(cluster, node, up):
    netlab.sh("ip", "-n", cluster.node_ns[node], "link", "set", "eth0", "up" if up else "down")


def _set_quota(cluster, node, factor, base):
    with open(os.path.join(cluster.cgroups[node], "cpu.cfs_quota_us"), "w") as f:
        f.write(str(max(1000, int(base[node] * factor))))


def run_once(sc, net, binary, run_dir, extra, recovery, faults):
    """One run of the case, with `faults` injected (none: the fault-free run). Returns what it
    saw: the tail of logs and rows, the events (time, what), the run's wall time."""
    os.makedirs(run_dir, exist_ok=True)
    subprocess.run(["rm", "-rf", os.path.join(run_dir, "out")] +
                   [os.path.join(run_dir, f) for f in os.listdir(run_dir) if re.fullmatch(r"rank-\d+\.log", f)],
                   check=True)
    fr = sc.fault_run
    steps = sc.train["steps"]
    with open(os.path.join(run_dir, "job.yaml"), "w") as f:
        f.write(job.job_yaml(sc, net, run_dir, "", eval_interval=steps, cluster_timeout_s=fr["timeout_s"],
                             extra=f"checkpoint: {{interval: {fr['checkpoint_interval']}, keep: 2}}\n"))
    cluster = netlab.Cluster(sc, net)
    tail = Tail(run_dir)
    events = []
    try:
        cluster.build()
        with open(os.path.join(run_dir, "topology.yaml"), "w") as f:
            f.write(cluster.topology_yaml(sc.workers_per_node, sc.threads_per_worker))
        base = {}
        for node, path in cluster.cgroups.items():
            with open(os.path.join(path, "cpu.cfs_quota_us")) as q:
                base[node] = int(q.read())
        w = Workers(sc, cluster, binary, run_dir, extra)
        store_ns = None
        if fr["store"] == "outside":
            # Every rank, rank 0 included, a client of the store on the host outside the islands.
            store_ns = cluster.add_store_host()
            w.env_extra = {"MASTER_ADDR": netlab.STORE_ADDR, "HOLMES_STORE_HOSTED": "1"}
            store = start_store(store_ns, binary, run_dir, w.token)
        # The kills and freezes at a step that the workers raise themselves: one per rank (the
        # earliest; any other at a step on the same rank is sent by the lab when it reads the step).
        hooked = {}  # rank -> fault
        for f in sorted(faults, key=lambda f: f.at_step or 0):
            if f.at_step is not None and f.kind in ("kill", "freeze"):
                for rank in w.ranks_on(f.target):
                    hooked.setdefault(rank, f)
        fired = set()  # faults that happened (a worker started again never raises one twice)

        def hook_of(rank):
            f = hooked.get(rank)
            if f is None or f.index in fired:
                return None
            return (f.at_step, "KILL" if f.kind == "kill" else "STOP")

        t0 = time.monotonic()
        last_poll = t0
        for rank in sorted(w.node_of):
            w.start(rank, hook=hook_of(rank))
        pending = []     # (time, action, fault) not yet done
        active = {}      # fault index -> when it ends (a killed node: when it is back)
        restarts = {}    # rank -> time to start it again (elastic)
        started = {}     # rank -> times it was started again (elastic: at most MAX_RESTARTS)
        handled = set()  # the processes whose exit was dealt with
        killed = set()   # processes the lab killed: their exit is the fault, not a detection
        requeue = False
        scheduled = set()  # the faults whose start and end are in pending
        deadline = t0 + sc.timeout_s
        try:
            while True:
                time.sleep(POLL_S)
                tail.poll()
                now = time.monotonic()
                if now > deadline:
                    raise job.RunFailed(f"the run did not finish within timeout_s = {sc.timeout_s:g} s "
                                        f"(logs: {run_dir}/rank-*.log)")
                for f in faults:
                    if f.index in scheduled:
                        continue
                    if f in hooked.values():
                        # Raised by the workers: it began, at the latest, when the first of them
                        # is seen hit (since the last poll: a peer may have logged it already).
                        ranks = [r for r, g in hooked.items() if g is f]
                        if not any(w.hit(r, f.kind) for r in ranks):
                            continue
                        scheduled.add(f.index)
                        fired.add(f.index)
                        at = last_poll
                        events.append((at, f"start {f.index}"))
                        active[f.index] = at + (f.restart_after_s if f.kind == "kill" else f.for_s)
                        pending.append((active[f.index], "end", f))
                        for rank in ranks:
                            if f.kind == "kill":
                                killed.add(w.procs[rank])
                                w.signal(rank, signal.SIGKILL)  # a rank of the node not yet at the step
                                if recovery == "elastic":
                                    restarts[rank] = at + f.restart_after_s
                            else:
                                w.signal(rank, signal.SIGSTOP)
                        continue
                    if tail.first_step_at() is None:
                        continue
                    if f.at_step is None:
                        at = tail.first_step_at() + f.at_s
                    elif tail.max_step >= f.at_step:
                        at = now
                    else:
                        continue
                    scheduled.add(f.index)
                    pending.append((at, "start", f))
                    pending.append((at + (f.restart_after_s if f.kind == "kill" else f.for_s), "end", f))
                for item in sorted((p for p in pending if p[0] <= now), key=lambda p: p[0]):
                    pending.remove(item)
                    at, action, f = item
                    if action == "end" and f.index not in active:
                        continue  # its start was skipped (the run had ended) or it ended already
                    events.append((now, f"{action} {f.index}"))
                    if action == "start":
                        active[f.index] = next(t for t, a, g in pending if g is f and a == "end")
                    else:
                        del active[f.index]
                    nodes = [n for n, isl in sc.nodes if isl == f.target] if f.kind == "cut" else [f.target]
                    for node in nodes:
                        if f.kind == "cut":
                            _set_link(cluster, node, action == "end")
                        elif f.kind == "slow":
                            _set_quota(cluster, node, f.speed if action == "start" else 1.0, base)
                        for rank in w.ranks_on(node):
                            if f.kind == "freeze":
                                w.signal(rank, signal.SIGSTOP if action == "start" else signal.SIGCONT)
                            elif f.kind == "kill" and action == "start":
                                if w.procs[rank].poll() is None:
                                    killed.add(w.procs[rank])
                                w.signal(rank, signal.SIGKILL)
                                if recovery == "elastic":
                                    restarts[rank] = at + f.restart_after_s
                for rank, p in list(w.procs.items()):
                    code = p.poll()
                    if code is None or code == 0 or p in handled:
                        continue
                    f = hooked.get(rank)
                    if code == -signal.SIGKILL and f is not None and f.kind == "kill" and f.index not in fired:
                        continue  # it killed itself since the fault check above: the next poll takes it
                    handled.add(p)
                    if p not in killed:
                        events.append((now, f"exit {rank} {code}"))
                    if recovery == "elastic":
                        # Not once every worker ended (the job is over, and its store with
                        # it): a worker started now would find no one to rejoin.
                        if started.get(rank, 0) < MAX_RESTARTS and any(q.poll() is None for q in w.procs.values()):
                            restarts.setdefault(rank, now + fr["requeue_s"])
                    elif recovery == "relaunch" and p not in killed and not requeue:
                        # The job failed (a worker saw its peer go): stop it as Slurm would, start it
                        # again once requeued and every node it needs is back.
                        events.append((now, "stop all"))
                        w.stop_all()
                        handled.update(w.procs.values())
                        requeue = True
                        requeue_not_before = now + fr["requeue_s"]
                for rank, at in list(restarts.items()):
                    if at <= now:
                        del restarts[rank]
                        started[rank] = started.get(rank, 0) + 1
                        events.append((now, f"restart {rank}"))
                        w.start(rank, resume=False, note="started again after a fault", hook=hook_of(rank))
                if requeue and now >= max([requeue_not_before] + list(active.values())):
                    requeue = False
                    killed.clear()
                    events.append((now, "relaunch"))
                    w.token = os.urandom(16).hex()
                    if store_ns is not None:
                        # The old job's store ended with its ranks; the new job gets its own.
                        try:
                            store.wait(timeout=15)
                        except subprocess.TimeoutExpired:
                            store.kill()
                            store.wait()
                        store = start_store(store_ns, binary, run_dir, w.token)
                    for rank in sorted(w.node_of):
                        w.start(rank, resume=True, note="the job started again (checkpoint.resume auto)",
                                hook=hook_of(rank))
                if not requeue and not restarts and all(p.poll() == 0 for p in w.procs.values()):
                    break
                last_poll = now
                if recovery != "relaunch" and not restarts and all(p.poll() is not None for p in w.procs.values()):
                    # Every worker ended; those that failed used their restarts (a job that could
                    # not take them back): the run counts when a worker finished the job (exit 0;
                    # a rank dropped with its replica exits 1, rank 0 included).
                    if not any(p.poll() == 0 for p in w.procs.values()):
                        codes = {r: p.poll() for r, p in w.procs.items()}
                        raise job.RunFailed(f"no worker finished the job (exit codes {codes}; logs: {run_dir}/rank-*.log)")
                    break
        finally:
            w.stop_all()
            for node in cluster.cgroups:
                if node in base:
                    _set_quota(cluster, node, 1.0, base)
        tail.poll()
        wall = time.monotonic() - t0
    finally:
        cluster.close()
    return {"tail": tail, "events": events, "t0": t0, "wall_s": wall}


def committed(run_dir):
    """The rows of the run's final metrics.jsonl: the history the checkpoints and the final
    weights stand for (a resume trims the rows after its checkpoint)."""
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "out", "metrics.jsonl"))]
    return [r for r in rows if "loss" in r], [r for r in rows if "val_loss" in r]


def tokens_of(row, sc):
    """Tokens a step trained: its global batch, less the replicas that did not contribute (a
    row of an elastic run names those that did)."""
    t = sc.train["global_batch"] * sc.train["seq_len"]
    replicas = sc.parallel.get("replicas", 1)
    if "replicas" in row and replicas > 1:
        return t * len(row["replicas"]) / replicas
    return t


def replica_tokens_lost(rows, sc):
    """Tokens an elastic diloco job trained and dropped with a lost replica: the steps that
    replica trained since its last outer sync (every inner_steps steps) before the first row
    without it. Rows name the replicas that trained each step; none of this is in them twice."""
    replicas = sc.parallel.get("replicas", 1)
    h = sc.parallel.get("inner_steps", 20)
    per_replica = sc.train["global_batch"] * sc.train["seq_len"] / replicas
    lost = 0.0
    for prev, row in zip(rows, rows[1:]):
        if "replicas" in prev and "replicas" in row:
            for r in set(prev["replicas"]) - set(row["replicas"]):
                lost += (prev["step"] % h) * per_replica
    return lost


def redone(seen, committed_rows):
    """The steps trained twice (a relaunch or a re-plan redoes the steps after its checkpoint):
    how many, and the largest relative difference between a committed loss and the loss the
    same step had when first trained (the loss curve's continuity across the recovery)."""
    first, times = {}, {}
    for _, r in seen:
        first.setdefault(r["step"], r["loss"])
        times[r["step"]] = times.get(r["step"], 0) + 1
    final = {r["step"]: r["loss"] for r in committed_rows}
    twice = [s for s, n in times.items() if n > 1 and s in final]
    worst = max((abs(final[s] - first[s]) / abs(first[s]) for s in twice if first[s]), default=0.0)
    return {"steps": len(twice), "max_rel_diff": worst}


def summarize(sc, clean, faulted, clean_dir, fault_dir, faults):
    steps_c, val_c = committed(clean_dir)
    steps_f, val_f = committed(fault_dir)
    tok_c = sum(tokens_of(r, sc) for r in steps_c)
    tok_f = sum(tokens_of(r, sc) for r in steps_f)
    good_c, good_f = tok_c / clean["wall_s"], tok_f / faulted["wall_s"]
    seen = faulted["tail"].rows
    executed = sum(tokens_of(r, sc) for _, r in seen)
    numbers = [r["step"] for r in steps_f]
    out = {"wall_s": {"clean": clean["wall_s"], "faults": faulted["wall_s"]},
           "tokens": {"clean": tok_c, "faults": tok_f, "executed": executed,
                      "lost": max(0.0, executed - tok_f) + replica_tokens_lost(steps_f, sc)},
           "goodput": good_f / good_c if good_c > 0 else None,
           "steps_repeated": len(numbers) - len(set(numbers)),
           "redone": redone(seen, steps_f),
           "steps_complete": numbers == list(range(1, sc.train["steps"] + 1)),
           "val_loss": {"clean": val_c[-1]["val_loss"] if val_c else None,
                        "faults": val_f[-1]["val_loss"] if val_f else None},
           "faults": []}
    lines, events = faulted["tail"].lines, faulted["events"]
    for f in faults:
        start = next((t for t, e in events if e == f"start {f.index}"), None)
        row = {"fault": f.describe(), "injected": start is not None}
        if start is not None:
            faulted_ranks = set()
            if f.kind != "cut":
                faulted_ranks = {r for r, (_, n, _) in node_ranks(sc).items() if n == f.target}
            detect = detected_at(f.kind, start, lines, events, faulted_ranks)
            row["detect_s"] = detect - start if detect is not None else None
            after = [t for t, _ in seen if detect is not None and t > detect]
            row["recover_s"] = after[0] - detect if after else None
        out["faults"].append(row)
    return out


def run(sc, net, binary, out_dir, extra, recovery, baseline=True):
    if not sc.faults:
        raise LabError(f"{sc.path}: no `faults` in the scenario (docs/lab.md, \"Faults\")")
    clean_dir, fault_dir = os.path.join(out_dir, "clean"), os.path.join(out_dir, "faults")
    if baseline or not os.path.exists(os.path.join(clean_dir, "out", "metrics.jsonl")):
        print(f"lab: case {net.case}: the fault-free run", flush=True)
        clean = run_once(sc, net, binary, clean_dir, extra, recovery, [])
        with open(os.path.join(clean_dir, "wall.json"), "w") as f:
            json.dump({"wall_s": clean["wall_s"]}, f)
    else:
        clean = json.load(open(os.path.join(clean_dir, "wall.json")))
    print(f"lab: case {net.case}: the run with {len(sc.faults)} fault(s), recovery {recovery}:", flush=True)
    for f in sc.faults:
        print(f"  {f.describe()}")
    faulted = run_once(sc, net, binary, fault_dir, extra, recovery, sc.faults)
    s = summarize(sc, clean, faulted, clean_dir, fault_dir, sc.faults)
    s["events"] = [(round(t - faulted["t0"], 2), e) for t, e in faulted["events"]]
    s["recovery"] = recovery
    with open(os.path.join(out_dir, "faults.json"), "w") as f:
        json.dump(s, f, indent=1)
    print(report(s))
    return s


def report(s):
    def sec(x):
        return f"{x:.1f} s" if x is not None else "-"
    v = s["val_loss"]
    dv = (v["faults"] / v["clean"] - 1) * 100 if v["clean"] and v["faults"] else None
    out = [f"recovery {s['recovery']}: goodput {s['goodput'] * 100:.1f}% of the fault-free run "
           f"({s['wall_s']['faults']:.1f} s against {s['wall_s']['clean']:.1f} s; "
           f"{s['tokens']['faults']:.0f} tokens trained, {s['tokens']['lost']:.0f} computed and lost)",
           f"final validation loss {v['faults'] if v['faults'] is not None else '-'} against "
           f"{v['clean'] if v['clean'] is not None else '-'}" + (f" ({dv:+.2f}%)" if dv is not None else ""),
           f"committed history: steps complete {s['steps_complete']}, steps repeated {s['steps_repeated']}",
           f"steps trained twice: {s['redone']['steps']}, the committed loss within "
           f"{s['redone']['max_rel_diff']:.1e} (relative) of the first",
           "| fault | detected after | recovered after |", "| --- | --- | --- |"]
    out += [f"| {r['fault']} | {sec(r.get('detect_s'))} | {sec(r.get('recover_s'))} |" for r in s["faults"]]
    return "\n".join(out)
