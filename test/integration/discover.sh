#!/usr/bin/env bash
# `holmes-train discover` on a fixture sysfs tree built here with mkdir/echo, on this machine,
# and with broken data. Usage: bash discover.sh <holmes-train binary> <source dir>
set -euo pipefail
BIN=$1
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- a fixture node: one IB HDR port, one RoCE v2 port on eth2, a 25 GbE port, loopback ---
R=$TMP/root
mkdir -p "$R/proc/sys/kernel" "$R/fixture" "$R/sys/devices/pci0000:00/0000:17:00.0"
echo fx-node7 > "$R/proc/sys/kernel/hostname"
echo 1 > "$R/sys/devices/pci0000:00/0000:17:00.0/numa_node"
P=$R/sys/class/infiniband/mlx5_0/ports/1
mkdir -p "$P/gids"
echo InfiniBand > "$P/link_layer"; echo "4: ACTIVE" > "$P/state"; echo "200 Gb/sec (4X HDR)" > "$P/rate"
echo fe80:0000:0000:0000:0c42:a103:0003:1f00 > "$P/gids/0"
ln -s ../../../devices/pci0000:00/0000:17:00.0 "$R/sys/class/infiniband/mlx5_0/device"
P=$R/sys/class/infiniband/mlx5_1/ports/1
mkdir -p "$P/gids" "$P/gid_attrs/types" "$P/gid_attrs/ndevs"
echo Ethernet > "$P/link_layer"; echo "4: ACTIVE" > "$P/state"; echo "100 Gb/sec (4X EDR)" > "$P/rate"
echo 0000:0000:0000:0000:0000:ffff:0a02:0007 > "$P/gids/1"; echo "RoCE v2" > "$P/gid_attrs/types/1"
echo eth2 > "$P/gid_attrs/ndevs/1"
for ifc in eth0:1:up:25000 eth2:1:up:100000 lo:772:unknown:; do
  IFS=: read -r name type state speed <<< "$ifc"
  mkdir -p "$R/sys/class/net/$name"
  echo "$type" > "$R/sys/class/net/$name/type"; echo "$state" > "$R/sys/class/net/$name/operstate"
  echo 0x9 > "$R/sys/class/net/$name/flags"
  [ -n "$speed" ] && echo "$speed" > "$R/sys/class/net/$name/speed"
done
printf 'eth0 10.0.0.7/16\neth2 10.2.0.7/16\nlo 127.0.0.1/8\n' > "$R/fixture/addresses"

"$BIN" discover --sysfs-root "$R" --format json > "$TMP/fx.json" || fail "discover on the fixture exited $?"
$PY - "$TMP/fx.json" <<'PY' || fail "fixture report is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["hostname"] == "fx-node7", r["hostname"]
assert set(r["devices"]) >= {"kind", "count", "name", "memory_gb"}, r["devices"]
got = [(n["name"], n["kind"], n["state"], n["rate_gbps"], n["netdev"], n["fabric"], n["numa_node"], n["virtual"],
        n["addresses"]) for n in r["nics"]]
want = [("mlx5_0", "ib", "active", 200, "", "fe80:0000:0000:0000", 1, False, []),
        ("mlx5_1", "roce", "active", 100, "eth2", "10.2.0.0/16", -1, True, ["10.2.0.7/16"]),
        ("eth0", "ethernet", "active", 25, "eth0", "10.0.0.0/16", -1, True, ["10.0.0.7/16"]),
        ("lo", "loopback", "active", None, "lo", "127.0.0.0/8", -1, True, ["127.0.0.1/8"])]
assert got == want, "\n".join(map(str, got))
PY
"$BIN" discover --sysfs-root "$R" > "$TMP/fx.txt" || fail "text format exited $?"
grep -q "mlx5_0:1" "$TMP/fx.txt" || fail "text format lacks mlx5_0:1"
"$BIN" discover --sysfs-root "$R" --format yaml > "$TMP/fx.yaml" || fail "yaml format exited $?"
grep -q "names: fx-node7" "$TMP/fx.yaml" || fail "yaml format lacks the node"

# --- this machine: loopback typed loopback, physical Ethernet ports typed ethernet ---
"$BIN" discover --format json > "$TMP/me.json" || fail "discover on this machine exited $?"
$PY - "$TMP/me.json" <<'PY' || fail "report of this machine is wrong"
import json, os, sys
r = json.load(open(sys.argv[1]))
nics = {n["name"]: n for n in r["nics"] if n["kind"] not in ("ib", "roce")}
assert nics["lo"]["kind"] == "loopback" and nics["lo"]["state"] == "active", nics.get("lo")
for name in os.listdir("/sys/class/net"):
    d = "/sys/class/net/" + name
    if not os.path.isdir(d): continue
    t = open(d + "/type").read().strip()
    if t == "1" and os.path.exists(d + "/device"):
        assert nics[name]["kind"] == "ethernet" and not nics[name]["virtual"], nics.get(name)
    for n in r["nics"]:
        assert n["state"] in ("active", "down") and (n["rate_gbps"] is None or n["rate_gbps"] > 0), n
print("this machine:", ", ".join(f'{n["name"]}={n["kind"]}' for n in r["nics"]))
PY

# --- a dumped node plans offline (the YAML form is a topology file) ---
"$BIN" discover --format yaml > "$TMP/me.yaml" || fail "yaml of this machine exited $?"
"$BIN" --plan-only --topology "$TMP/me.yaml" > "$TMP/plan.txt" || fail "--plan-only on the dumped topology exited $?"

# --- broken data: exit 2 and the message names the file ---
echo "fast" > "$R/sys/class/infiniband/mlx5_0/ports/1/rate"
rc=0; "$BIN" discover --sysfs-root "$R" > /dev/null 2> "$TMP/err" || rc=$?
[ "$rc" = 2 ] || fail "garbage rate: exit $rc, expected 2"
grep -q "mlx5_0/ports/1/rate: expected a port rate" "$TMP/err" || fail "garbage rate: $(cat "$TMP/err")"
rc=0; "$BIN" discover --sysfs-root "$TMP/absent" > /dev/null 2> "$TMP/err" || rc=$?
[ "$rc" = 2 ] || fail "missing root: exit $rc, expected 2"
rc=0; "$BIN" discover --format xml > /dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "--format xml: exit $rc, expected 2"
printf 'nodes:\n  - names: a\n    devices: {kind: cpu}\n    nics: [{kind: ib, speed: 200}]\n' > "$TMP/bad.yaml"
rc=0; "$BIN" --plan-only --topology "$TMP/bad.yaml" > /dev/null 2> "$TMP/err" || rc=$?
[ "$rc" = 2 ] || fail "malformed topology file: exit $rc, expected 2"
grep -q "bad.yaml:4:23: nodes\[0\].nics\[0\].speed: unknown key 'speed'" "$TMP/err" || fail "malformed topology: $(cat "$TMP/err")"
echo "discover: ok"
