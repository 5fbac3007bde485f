"""Scenario files of the heterogeneous-cluster lab (docs/lab.md): loading, validation, and the
emulated cluster of each case.

A problem in a scenario file is a LabError naming the file, the key, the value seen and what is
accepted; lab.py turns it into exit code 2.
"""
import os
import re
from dataclasses import dataclass, field

import yaml

CASES = ("holmes", "holmes-1f1b", "holmes-interleaved", "holmes-uniform", "megatron", "naive", "fast", "slow", "sync", "diloco", "diloco-overlap", "auto")
REPLICA_CASES = ("sync", "diloco", "diloco-overlap")
ISLAND_KINDS = ("ib", "roce", "ethernet")
MAX_NODES = 250  # one /24 per network
TOP_KEYS = ("islands", "ethernet_mbps", "nodes", "workers_per_node", "order", "model", "train",
            "parallel", "cases", "rounds", "threads_per_worker", "timeout_s", "cpu_cores", "faults", "fault_run")
MODEL_KEYS = ("layers", "hidden", "heads", "vocab_size")
TRAIN_KEYS = ("seq_len", "micro_batch", "global_batch", "steps")
PARALLEL_KEYS = ("tensor", "pipeline", "data")
# Optional: the replicas of the sync and diloco cases (docs/diloco.md); both cases need them;
# diloco-overlap also outer_overlap (its parallel.outer_overlap, 1 if not given).
REPLICA_KEYS = ("replicas", "inner_steps", "outer_overlap")


class LabError(Exception):
    """Bad input (scenario file, arguments): exit code 2."""


@dataclass
class Island:
    name: str
    kind: str        # ib | roce | ethernet
    rate_mbps: float  # RDMA fabric rate per node and direction; 0 for ethernet


@dataclass
class Scenario:
    path: str
    islands: dict            # name -> Island
    ethernet_mbps: float
    nodes: list              # [(name, island name)] in file order
    workers_per_node: int
    order: list              # node names in launch order
    model: dict
    train: dict
    parallel: dict
    cases: list = field(default_factory=lambda: [x for x in CASES if x not in REPLICA_CASES and x != "auto"])
    rounds: int = 3
    threads_per_worker: int = 1
    timeout_s: float = 900
    speed: dict = field(default_factory=dict)  # node -> compute speed (1 = the fastest kind of node)
    cpu_cores: float = 0  # CPU time all workers share under quotas; 0 = no quotas
    cpu_cores_default: bool = False  # cpu_cores was not written: the machine's cores

    def quota_cores(self, node):
        """CPU cores a worker of `node` may use (its cgroup quota), or 0 for no quota: the
        workers' CPU time `cpu_cores` split in proportion to their nodes' speeds, so that every
        worker is held at its quota and the declared speeds are the real ones."""
        if self.cpu_cores <= 0:
            return 0.0
        total = sum(self.speed.get(n, 1.0) for n, _ in self.nodes) * self.workers_per_node
        return self.cpu_cores * self.speed.get(node, 1.0) / total


@dataclass
class CaseNet:
    """The emulated cluster of one case: its islands (rates in Mbit/s) and each node's island."""
    case: str
    placement: str
    islands: dict      # name -> Island with the case's rate
    node_island: dict  # node -> island name
    ethernet_mbps: float
    schedule: str = "auto"  # parallel.schedule: the planner's (auto), 1f1b for holmes-1f1b, interleaved for holmes-interleaved
    partition: str = "auto"  # parallel.partition: the planner's (auto), uniform for holmes-uniform

    def island_of(self, node):
        return self.islands[self.node_island[node]]


def expand_names(text):
    """`ib[0-1],x` -> ['ib0', 'ib1', 'x'] (Slurm-style ranges, zero padding kept)."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        prefix, ranges, suffix = m.groups()
        for r in ranges.split(","):
            lo, _, hi = r.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValueError(f"'{r}' in '{text}' is not a number or a range a-b")
            for i in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{str(i).zfill(len(lo))}{suffix}")
    return out


class _Checker:
    def __init__(self, path):
        self.path = path

    def fail(self, key, value, accepted):
        raise LabError(f"{self.path}: {key}: {value!r} is not accepted; expected {accepted}")

    def keys(self, where, mapping, allowed, required=()):
        if not isinstance(mapping, dict):
            self.fail(where or "(top level)", mapping, "a mapping")
        for k in mapping:
            if k not in allowed:
                self.fail(f"{where + '.' if where else ''}{k}", k, f"one of the keys {', '.join(allowed)}")
        for k in required:
            if k not in mapping:
                raise LabError(f"{self.path}: {where + '.' if where else ''}{k} is missing (required)")

    def number(self, key, value, lo, hi=None, integer=False):
        ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
        if not ok or value < lo or (hi is not None and value > hi):
            kind = "an integer" if integer else "a number"
            self.fail(key, value, f"{kind} >= {lo}" + (f" and <= {hi}" if hi is not None else ""))
        return value


class _KeyTwice(Exception):
    pass


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping: YAML forbids it, and PyYAML
    would keep the last value silently (two `model:` sections: the first one dropped)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<` merges; the keys it brings may be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first:
                        raise _KeyTwice(f"{line}: key {key!r} is given twice in one mapping (lines {first[key]} "
                                        f"and {line}); YAML forbids that: keep one")
                    first[key] = line
                except TypeError:
                    pass  # an unhashable key: the constructor itself refuses it
        return super().construct_mapping(node, deep)


def load(path):
    try:
        with open(path) as f:
            doc = yaml.load(f, Loader=_StrictLoader)
    except OSError as e:
        raise LabError(f"{path}: cannot read the scenario file: {e.strerror}")
    except _KeyTwice as e:
        raise LabError(f"{path}:{e}")
    except yaml.YAMLError as e:
        raise LabError(f"{path}: not valid YAML: {e}")
    c = _Checker(path)
    c.keys("", doc, TOP_KEYS, ("islands", "ethernet_mbps", "nodes", "model", "train", "parallel"))
    islands = _islands(c, doc["islands"])
    nodes, speeds = _nodes(c, doc["nodes"], islands)
    names = [n for n, _ in nodes]
    order = _order(c, doc.get("order"), names)
    sc = Scenario(path, islands, c.number("ethernet_mbps", doc["ethernet_mbps"], 1), nodes,
                  c.number("workers_per_node", doc.get("workers_per_node", 1), 1, 64, True), order,
                  _section(c, "model", doc["model"], MODEL_KEYS, MODEL_KEYS[:3]),
                  _section(c, "train", doc["train"], TRAIN_KEYS, TRAIN_KEYS),
                  _section(c, "parallel", doc["parallel"], PARALLEL_KEYS + REPLICA_KEYS, PARALLEL_KEYS))
    sc.speed = {n: s for n, s in speeds.items() if s != 1.0}
    if "cpu_cores" in doc:
        sc.cpu_cores = float(c.number("cpu_cores", doc["cpu_cores"], 0, 64))
        if 0 < sc.cpu_cores < 0.1:
            c.fail("cpu_cores", doc["cpu_cores"], "0 (no quotas) or 0.1 to 64 cores")
        if sc.cpu_cores == 0 and sc.speed:
            c.fail("cpu_cores", doc["cpu_cores"], "more than 0 when a node declares a speed (the CPU time the "
                   "workers share, split among them by speed)")
    else:
        # Each node is a device of its own: a stage that waits leaves its share idle, as a GPU
        # would, instead of lending its core to the other stages (docs/lab.md, "CPU quotas").
        sc.cpu_cores = float(os.cpu_count() or 1)
        sc.cpu_cores_default = True
    # auto, holmes-interleaved and holmes-uniform are asked for by name (a scenario's or a
    # generated file's cases), never by default (interleaved needs micro-batches in groups of the
    # pipeline degree; holmes-uniform is a question about the partition, not a baseline).
    default = ["sync", "diloco"] if doc["parallel"].get("replicas", 1) > 1 else \
        [x for x in CASES if x not in REPLICA_CASES and x not in ("auto", "holmes-interleaved", "holmes-uniform")]
    cases = doc.get("cases", default)
    if not isinstance(cases, list) or not cases or any(x not in CASES for x in cases) or len(set(cases)) != len(cases):
        c.fail("cases", cases, f"a list of distinct cases from {', '.join(CASES)}")
    sc.cases = cases
    sc.rounds = c.number("rounds", doc.get("rounds", 3), 1, 100, True)
    sc.threads_per_worker = c.number("threads_per_worker", doc.get("threads_per_worker", 1), 1, 64, True)
    sc.timeout_s = c.number("timeout_s", doc.get("timeout_s", 900), 10)
    p = sc.parallel
    devices = len(nodes) * sc.workers_per_node
    replicas = p.get("replicas", 1)
    if replicas > 1 and any(x not in REPLICA_CASES for x in cases):
        c.fail("cases", cases, f"{', '.join(REPLICA_CASES)} alone when parallel.replicas > 1 (the degrees are a "
               "replica's)")
    if replicas == 1 and any(x in REPLICA_CASES for x in cases):
        c.fail("parallel.replicas", replicas, f"an integer >= 2 for the {', '.join(REPLICA_CASES)} cases")
    if p["tensor"] * p["pipeline"] * p["data"] * replicas != devices:
        c.fail("parallel", p, f"tensor x pipeline x data x replicas = {devices} (nodes x workers_per_node)")
    from . import faults  # it imports this module's LabError
    faults.check(c, doc, sc)
    return sc


def _islands(c, raw):
    if not isinstance(raw, dict) or not raw:
        c.fail("islands", raw, "a mapping of island names to {kind, rate_mbps}")
    out = {}
    for name, spec in raw.items():
        key = f"islands.{name}"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,40}", str(name)):
            c.fail(key, name, "an island name of letters, digits, '.', '_' and '-'")
        c.keys(key, spec, ("kind", "rate_mbps"), ("kind",))
        kind = spec["kind"]
        if kind not in ISLAND_KINDS:
            c.fail(f"{key}.kind", kind, " or ".join(ISLAND_KINDS))
        rate = 0.0
        if kind != "ethernet":
            if "rate_mbps" not in spec:
                raise LabError(f"{c.path}: {key}.rate_mbps is missing (required for {kind} islands)")
            rate = float(c.number(f"{key}.rate_mbps", spec["rate_mbps"], 1))
        elif "rate_mbps" in spec:
            c.fail(f"{key}.rate_mbps", spec["rate_mbps"], "no rate for an ethernet island (its nodes use ethernet_mbps)")
        out[str(name)] = Island(str(name), kind, rate)
    return out


def _nodes(c, raw, islands):
    if not isinstance(raw, list) or not raw:
        c.fail("nodes", raw, "a list of {names, island}")
    nodes, seen, speeds = [], set(), {}
    for i, entry in enumerate(raw):
        key = f"nodes[{i}]"
        c.keys(key, entry, ("names", "island", "speed"), ("names", "island"))
        speed = float(c.number(f"{key}.speed", entry.get("speed", 1.0), 0.05, 1))
        if entry["island"] not in islands:
            c.fail(f"{key}.island", entry["island"], f"one of the islands {', '.join(islands)}")
        try:
            names = expand_names(str(entry["names"]))
        except ValueError as e:
            c.fail(f"{key}.names", entry["names"], f"a host name or hostlist such as ib[0-3] ({e})")
        for n in names:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,40}", n):
                c.fail(f"{key}.names", n, "host names of letters, digits, '.' and '-' (at most 41 characters)")
            if n in seen:
                c.fail(f"{key}.names", n, "each node named once")
            seen.add(n)
            nodes.append((n, entry["island"]))
            speeds[n] = speed
    if len(nodes) < 2 or len(nodes) > MAX_NODES:
        c.fail("nodes", len(nodes), f"between 2 and {MAX_NODES} nodes")
    return nodes, speeds


def _order(c, raw, names):
    if raw is None:
        return list(names)
    try:
        order = expand_names(raw) if isinstance(raw, str) else [str(x) for x in raw]
    except ValueError as e:
        c.fail("order", raw, f"a hostlist or a list of node names ({e})")
    if sorted(order) != sorted(names):
        c.fail("order", raw, f"every node exactly once (nodes: {', '.join(names)})")
    return order


def _section(c, where, raw, allowed, required):
    c.keys(where, raw, allowed, required)
    for k, v in raw.items():
        c.number(f"{where}.{k}", v, 1, None, True)
    return dict(raw)


def case_net(sc, case):
    """The network a case runs on (docs/lab.md, "The cases").

    fast is the homogeneous RDMA cluster Holmes aims to match: every node on one fabric of the
    fastest island's kind and rate, the Ethernet at that rate too. slow is the homogeneous
    Ethernet cluster: no RDMA anywhere, every node on the Ethernet alone. The others run on the
    scenario's network as declared; holmes-1f1b is holmes with parallel.schedule 1f1b,
    holmes-interleaved holmes with parallel.schedule interleaved (virtual_stages: the planner's),
    holmes-uniform holmes with parallel.partition uniform (its placement without its partition);
    the others let the planner choose the schedule and the partition."""
    if case not in CASES:
        raise LabError(f"case '{case}' is not accepted; expected one of {', '.join(CASES)}")
    rdma = [i for i in sc.islands.values() if i.kind != "ethernet"]
    # auto: holmes, the degrees chosen too; sync, diloco: holmes inside a replica
    placement = case if case in ("megatron", "naive") else "holmes"
    names = [n for n, _ in sc.nodes]
    if case == "fast":
        if not rdma:
            raise LabError(f"{sc.path}: case 'fast' needs an ib or roce island (every link at the island rate)")
        best = max(rdma, key=lambda i: (i.rate_mbps, i.kind == "ib"))
        fabric = Island(best.name, best.kind, best.rate_mbps)
        return CaseNet(case, placement, {fabric.name: fabric}, {n: fabric.name for n in names}, best.rate_mbps)
    if case == "slow":
        alone = {n: Island(f"eth-{n}", "ethernet", 0) for n in names}
        return CaseNet(case, placement, {i.name: i for i in alone.values()}, {n: alone[n].name for n in names},
                       sc.ethernet_mbps)
    islands = {n: Island(i.name, i.kind, i.rate_mbps) for n, i in sc.islands.items()}
    return CaseNet(case, placement, islands, dict(sc.nodes), sc.ethernet_mbps,
                   {"holmes-1f1b": "1f1b", "holmes-interleaved": "interleaved"}.get(case, "auto"),
                   "uniform" if case == "holmes-uniform" else "auto")
