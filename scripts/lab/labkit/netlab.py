"""The emulated cluster of one lab run: a network namespace per node, a switch namespace with
one bridge per network (the Ethernet that joins every node, one per RDMA island), veth pairs
between them, and a token-bucket filter (tc tbf) on both ends of every veth so each node sends
and receives at its link's rate.

Everything is named hlab<owner pid>-...; deleting the namespaces removes every interface and
bridge with them. `sweep()` removes what a lab run that no longer exists left behind.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

PREFIX = "hlab"
ETH_NET = "10.200.0"        # node i: 10.200.0.(i+1)/24 on eth0
STORE_ADDR = f"{ETH_NET}.250"  # the store's host outside every island (fault_run.store: outside)
ISLAND_NET = "10.201.{k}"   # node i on RDMA island k: 10.201.k.(i+1)/24
IFACE = {"ib": "ib0", "roce": "ens1f0"}  # what the island's IP interface is called on a node
MTU = 9000
CGROUP_CPU = "/sys/fs/cgroup/cpu"  # cgroup v1 cpu controller: one group per node with a quota
QUOTA_PERIOD_US = 100_000  # the default CFS period of a node's quota (HOLMES_LAB_QUOTA_PERIOD_US)
CPU_PEAK_TFLOPS_PER_CORE = 0.05  # the planner's default peak of a CPU core (engine/plan/links.hpp)


def quota_period_us():
    """The CFS period of the node cgroups' quotas: HOLMES_LAB_QUOTA_PERIOD_US, or 100 ms."""
    text = os.environ.get("HOLMES_LAB_QUOTA_PERIOD_US", str(QUOTA_PERIOD_US))
    if not text.isdigit() or not 1000 <= int(text) <= 1_000_000:
        raise ValueError(f"HOLMES_LAB_QUOTA_PERIOD_US={text!r} is not accepted; expected microseconds "
                       "from 1000 to 1000000 (the kernel's CFS period limits)")
    return int(text)


class NetError(Exception):
    """A command that builds the network failed (exit code 1)."""


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetError(f"`{' '.join(args)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def _owner_alive(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"lab.py" in f.read()
    except OSError:
        return False


def lab_namespaces():
    out = sh("ip", "netns", "list", check=False)
    return [line.split()[0] for line in out.splitlines() if re.match(rf"{PREFIX}\d+-", line)]


def kill_inside(ns):
    for pid in sh("ip", "netns", "pids", ns, check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def delete(ns_list):
    for ns in ns_list:
        kill_inside(ns)
    for ns in ns_list:
        sh("ip", "netns", "del", ns, check=False)


def _remove_cgroup(path):
    """rmdir of a node's cgroup once its workers are gone (SIGKILLed ones take a moment)."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            for pid in open(os.path.join(path, "cgroup.procs")).read().split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            time.sleep(0.1)


def remove_own():
    """Removes this process's namespaces and cgroups, also those a signal left half-built
    (created before the Cluster that owns them was returned or recorded them)."""
    tag = f"{PREFIX}{os.getpid()}-"
    delete([ns for ns in lab_namespaces() if ns.startswith(tag)])
    if os.path.isdir(CGROUP_CPU):
        for name in os.listdir(CGROUP_CPU):
            if name.startswith(tag):
                _remove_cgroup(os.path.join(CGROUP_CPU, name))


def sweep():
    """Removes the namespaces (and their processes) and the cgroups of lab runs whose owner has exited."""
    stale = [ns for ns in lab_namespaces() if not _owner_alive(int(re.match(rf"{PREFIX}(\d+)-", ns).group(1)))]
    delete(stale)
    if os.path.isdir(CGROUP_CPU):
        for name in os.listdir(CGROUP_CPU):
            m = re.match(rf"{PREFIX}(\d+)-", name)
            if m and not _owner_alive(int(m.group(1))):
                _remove_cgroup(os.path.join(CGROUP_CPU, name))
    return stale


def _tbf(ns, dev, mbps):
    # burst: a 64 KB GSO packet, or 2 ms at the rate when that is more (on a loaded machine the
    # qdisc timer fires late; a smaller bucket would lose that time); queue: 20 ms at the rate.
    rate_bytes = mbps * 1e6 / 8
    burst = max(65536, int(rate_bytes * 0.002))
    limit = max(4 * burst, int(rate_bytes * 0.02))
    sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{mbps}mbit",
       "burst", str(burst), "limit", str(limit))


class Cluster:
    """Builds the namespaces of `net` (scenario.CaseNet) for the nodes of `sc`; close() removes them."""

    def __init__(self, sc, net):
        self.sc, self.net = sc, net
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{self.tag}-sw"
        self.node_ns = {name: f"{self.tag}-n{i}" for i, (name, _) in enumerate(sc.nodes)}
        self.index = {name: i for i, (name, _) in enumerate(sc.nodes)}
        rdma = [n for n, isl in net.islands.items() if isl.kind != "ethernet"]
        self.island_index = {n: k for k, n in enumerate(rdma)}
        self.created = []
        self.cgroups = {}  # node -> cgroup folder holding its workers (scenario cpu_cores)

    def eth_addr(self, node):
        return f"{ETH_NET}.{self.index[node] + 1}"

    def island_addr(self, node):
        isl = self.net.island_of(node)
        return f"{ISLAND_NET.format(k=self.island_index[isl.name])}.{self.index[node] + 1}"

    def _ns(self, name):
        sh("ip", "netns", "add", name)
        self.created.append(name)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        # A connection that paused (the pipeline between micro-batches, data parallelism between
        # steps) keeps its congestion window, as RDMA and NCCL's long-lived sockets do in effect.
        sh("ip", "netns", "exec", name, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0")

    def _wire(self, node, ifname, peer, bridge, addr, mbps):
        self._wire_ns(self.node_ns[node], ifname, peer, bridge, addr, mbps)

    def add_store_host(self):
        """A host on the Ethernet that belongs to no island and that no fault touches (a login
        node): the job's store runs there when fault_run.store is outside. Its link is named
        s0 on the switch, so ethernet_bytes() (the nodes' e<i> links) does not count it.
        Returns its namespace."""
        ns = f"{self.tag}-store"
        self._ns(ns)
        self._wire_ns(ns, "eth0", "s0", "breth", STORE_ADDR, self.net.ethernet_mbps)
        return ns

    def _wire_ns(self, ns, ifname, peer, bridge, addr, mbps):
        sh("ip", "link", "add", f"{self.tag[-6:]}t", "netns", ns, "type", "veth", "peer", "name", peer,
           "netns", self.switch)
        sh("ip", "-n", ns, "link", "set", f"{self.tag[-6:]}t", "name", ifname)
        # Jumbo frames, as data-centre fabrics use: a sixth of the packets (and of the shaper's
        # timer interrupts, which otherwise steal compute time from the workers).
        sh("ip", "-n", ns, "link", "set", ifname, "mtu", str(MTU))
        sh("ip", "-n", self.switch, "link", "set", peer, "mtu", str(MTU))
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
        sh("ip", "-n", ns, "link", "set", ifname, "up")
        sh("ip", "-n", self.switch, "link", "set", peer, "master", bridge, "up")
        _tbf(ns, ifname, mbps)          # what the node sends
        _tbf(self.switch, peer, mbps)   # what the node receives

    def build(self):
        self._ns(self.switch)
        bridges = {"eth": "breth"}
        for name, k in self.island_index.items():
            bridges[name] = f"bri{k}"
        for br in bridges.values():
            sh("ip", "-n", self.switch, "link", "add", br, "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", br, "up")
        if self.sc.cpu_cores > 0 and self.sc.cpu_cores_default and not os.path.isdir(CGROUP_CPU):
            print(f"lab: {CGROUP_CPU} is missing: the nodes share the CPU without quotas (a stage's wait "
                  "lends its core to the others; schedules and bubbles measure smaller than on devices)",
                  file=sys.stderr)
            self.sc.cpu_cores = 0
        if self.sc.cpu_cores > 0:
            self._cgroups()
        for node, _ in self.sc.nodes:
            self._ns(self.node_ns[node])
            i = self.index[node]
            self._wire(node, "eth0", f"e{i}", "breth", self.eth_addr(node), self.net.ethernet_mbps)
            isl = self.net.island_of(node)
            if isl.kind != "ethernet":
                self._wire(node, IFACE[isl.kind], f"i{i}", bridges[isl.name], self.island_addr(node), isl.rate_mbps)
        return self

    def _cgroups(self):
        """A cpu cgroup per node whose quota is the node's share of the workers' CPU time: an
        older, slower kind of node beside a newer one (scenario speed, docs/lab.md)."""
        if not os.path.isdir(CGROUP_CPU):
            raise NetError(f"{CGROUP_CPU} is missing: node speeds need the cgroup v1 cpu controller")
        for node, _ in self.sc.nodes:
            path = os.path.join(CGROUP_CPU, f"{self.tag}-n{self.index[node]}")
            os.mkdir(path)
            self.cgroups[node] = path
            period = quota_period_us()
            quota = int(self.sc.quota_cores(node) * self.sc.workers_per_node * period)
            # A task in a cgroup is scheduled as part of the group, not of its session's autogroup:
            # the group needs the weight HOLMES_LAB_NICE gives each worker's session (autogroup
            # nice n weighs 1024 / 1.25^n), or the workers lose it and other users' work takes
            # the CPU their quotas allow.
            nice = int(os.environ.get("HOLMES_LAB_NICE", "0"))
            with open(os.path.join(path, "cpu.shares"), "w") as f:
                f.write(str(int(1024 * 1.25 ** -nice) * self.sc.workers_per_node))
            with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
                f.write(str(period))
            with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
                f.write(str(max(1000, quota)))

    def cpu_stat(self):
        """Each node cgroup's CFS counters so far (cgroup v1 cpu.stat): periods with runnable
        tasks, periods that ended throttled (the quota spent before the period's end) and the
        time its tasks stood throttled, in seconds. Empty without quotas."""
        out = {}
        for node, path in self.cgroups.items():
            got = dict(line.split() for line in open(os.path.join(path, "cpu.stat")) if line.strip())
            out[node] = {"periods": int(got["nr_periods"]), "throttled": int(got["nr_throttled"]),
                         "throttled_s": int(got["throttled_time"]) / 1e9}
        return out

    def ethernet_bytes(self):
        """Bytes every node has sent over the emulated Ethernet so far: the receive counters of
        the switch ends of the nodes' eth0 veth pairs (e<i>), read in one `ip` call. Frames as
        on the wire: TCP/IP headers and acknowledgements included."""
        links = json.loads(sh("ip", "-j", "-s", "-n", self.switch, "link", "show"))
        return sum(link["stats64"]["rx"]["bytes"] for link in links if re.fullmatch(r"e\d+", link["ifname"]))

    def close(self):
        delete(list(reversed(self.created)))
        self.created = []
        # A signal that lands while `ip netns add` runs leaves a namespace that exists but was
        # never recorded: every namespace and cgroup of this process's tag goes too.
        remove_own()
        for path in self.cgroups.values():
            _remove_cgroup(path)
        self.cgroups = {}

    def topology_yaml(self, workers, threads):
        """The topology entries discovery would report for these nodes on real hardware."""
        lines = ["# written by scripts/lab for one case: what each emulated node's NICs are", "nodes:"]
        for node, _ in self.sc.nodes:
            isl = self.net.island_of(node)
            gbps = self.net.ethernet_mbps / 1000
            # A declared speed is the node's peak against the default CPU core's (the planner's
            # ratios between nodes are what matter; a calibration scales them all alike).
            peak = (f", peak_tflops: {CPU_PEAK_TFLOPS_PER_CORE * threads * self.sc.speed.get(node, 1.0):.6g}"
                    if self.sc.cpu_cores > 0 else "")
            # The quota each worker runs under and its period (docs/topology.md
            # `cpu_quota_cores`, `cpu_quota_period_ms`): the cost model's overlap of
            # communication with compute, its quota bound and its CFS-period wait depend on them.
            if self.sc.cpu_cores > 0:
                peak += f", cpu_quota_cores: {self.sc.quota_cores(node):.6g}"
                if quota_period_us() != 100_000:  # the kernel's default is the planner's too
                    peak += f", cpu_quota_period_ms: {quota_period_us() / 1000:g}"
            # Every emulated node runs on this machine's cores (docs/topology.md `machine`): the
            # cost model's pipeline loop gives a waiting stage the cores the others leave.
            peak += f", machine: lab, machine_cores: {len(os.sched_getaffinity(0))}"
            lines += [f"  - names: {node}",
                      f"    devices: {{kind: cpu, count: {workers}, name: lab-cpu, memory_gb: 4, cores: {threads}{peak}}}",
                      "    nics:",
                      f"      - {{kind: ethernet, name: eth0, rate_gbps: {gbps:g}, addresses: [{self.eth_addr(node)}/24]}}"]
            if isl.kind == "ib":
                lines += [f"      - {{kind: ib, name: mlx5_0, rate_gbps: {isl.rate_mbps / 1000:g}, fabric: {isl.name}}}",
                          f"      - {{kind: ipoib, name: ib0, rate_gbps: {isl.rate_mbps / 1000:g}, "
                          f"addresses: [{self.island_addr(node)}/24]}}"]
            elif isl.kind == "roce":
                lines += [f"      - {{kind: roce, name: mlx5_0, rate_gbps: {isl.rate_mbps / 1000:g}, fabric: {isl.name}, "
                          f"netdev: {IFACE['roce']}, gid_index: 3, addresses: [{self.island_addr(node)}/24]}}"]
        return "\n".join(lines) + "\n"
