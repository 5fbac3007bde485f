#!/usr/bin/env bash
# The lab's per-thread CPU readings (docs/lab.md, "CPU by thread and kind"), without a lab run:
# a child process whose main thread computes and whose second thread makes system calls, each
# until it has used a fixed amount of its own CPU time (so a loaded machine only makes it
# slower); the meter's readings of it before and after must give the main thread and the
# others at least that much run time each, a user + system split that adds up to it, and the
# other thread's syscalls as system time; cpu.json's assembly (EthernetMeter.cpu_result) must
# carry the split, the host's counters and the pids. Not timed.
# Usage: lab_cpu_meter.sh <holmes-train> <source dir>
set -u
src=$2
/usr/bin/python3 - "$src/scripts/lab" <<'PY'
import os, subprocess, sys, textwrap
sys.path.insert(0, sys.argv[1])
from labkit import job

CPU_S = 0.3  # each thread of the child uses this much of its own CPU time
child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
    import os, sys, threading, time
    spent, hold = threading.Event(), threading.Event()
    def syscalls():
        fd = os.open("/dev/zero", os.O_RDONLY)
        while time.thread_time() < {CPU_S}:
            for _ in range(200):
                os.read(fd, 1 << 18)  # the kernel zeroes 256 KB: system time
        spent.set()
        hold.wait()  # alive until the second reading: a thread that ended leaves /proc
    sys.stdin.readline()  # the meter's first reading is taken
    t = threading.Thread(target=syscalls)
    t.start()
    x = 0
    while time.thread_time() < {CPU_S}:
        for i in range(10000):
            x += i * i
    spent.wait()
    print("done", flush=True)
    sys.stdin.readline()  # held until the second reading
    hold.set()
    t.join()
""")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
fails = []
try:
    before, host0 = job.rank_threads(child.pid), job.host_kernel()
    child.stdin.write("go\n"); child.stdin.flush()
    assert child.stdout.readline().strip() == "done"
    after, host1 = job.rank_threads(child.pid), job.host_kernel()
    split = job.thread_split(child.pid, before, after, 1)
    for kind in ("main", "others"):
        k = split.get(kind)
        if not k:
            fails.append(f"no {kind} thread in {split}")
            continue
        if k["run"] < 0.95 * CPU_S:
            fails.append(f"{kind}: run {k['run']:.3f} s, at least {CPU_S} expected")
        # /proc's utime + stime is the run time split by ticks, in 1/CLK_TCK units
        if abs(k["user"] + k["system"] - k["run"]) > 0.1 * k["run"] + 3 / job.CLK_TCK:
            fails.append(f"{kind}: user {k['user']:.3f} + system {k['system']:.3f} s is not its run {k['run']:.3f} s")
        if k["involuntary"] < 0 or k["voluntary"] < 0 or k["migrations"] < 0:
            fails.append(f"{kind}: negative switch counts {k}")
    if split.get("others") and split["others"]["system"] <= split.get("main", {}).get("system", 0):
        fails.append(f"the syscall thread's system time {split['others']['system']:.3f} s is not above the "
                     f"computing thread's {split['main']['system']:.3f} s")
    for key in ("user", "system", "softirq", "idle", "steal", "net_rx", "net_tx", "ksoftirqd"):
        if key not in host1 or host1[key] < host0[key]:
            fails.append(f"host counter {key}: {host0.get(key)} -> {host1.get(key)}")
    # cpu.json as the meter assembles it: two readings, 4 steps apart
    meter = job.EthernetMeter(None, "/nonexistent", [2, 6])
    meter.pids = {0: child.pid}
    meter.snaps = [(2, 0, False), (6, 400, False)]
    meter.cpu = [({}, {0: 1.0}, {0: before}, host0), ({}, {0: 2.0}, {0: after}, host1)]
    got = meter.cpu_result()
    if not got or got["pids"] != {"0": child.pid} or got["rank_cpu_s"] != {"0": 0.25}:
        fails.append(f"cpu_result: {got}")
    elif abs(got["rank_threads_s"]["0"]["main"]["run"] - split["main"]["run"] / 4) > 1e-9 \
            or abs(got["host_s"]["idle"] - (host1["idle"] - host0["idle"]) / 4) > 1e-9:
        fails.append(f"cpu_result: not per step: {got}")
finally:
    child.stdin.write("end\n"); child.stdin.flush()
    child.wait(timeout=60)
for f in fails:
    print("FAIL", f)
sys.exit(1 if fails else 0)
PY
