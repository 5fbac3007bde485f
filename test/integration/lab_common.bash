# Sourced by the lab's integration tests after bin=$1 src=$2: skips (exit 0 with HOLMES_SKIP)
# where the lab cannot run (not root, no iproute2 or python3-yaml, no network namespaces),
# then sets tmp (a directory removed at exit unless the test traps EXIT itself), fail=0, bad
# and HOLMES_BIN for scripts/lab.
skip() { echo "HOLMES_SKIP: $1"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "the lab needs root (network namespaces, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "iproute2 is missing"
/usr/bin/python3 -c "import yaml" 2>/dev/null || skip "python3-yaml is missing"
ip netns add "hlabprobe$$" 2>/dev/null || skip "network namespaces cannot be created here"
ip netns del "hlabprobe$$"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2" | tail -30; fail=1; }
export HOLMES_BIN=$bin
# same_losses A B N: the runs of cases A and B under $tmp logged N losses each, bit-identical.
same_losses() {
  /usr/bin/python3 - "$tmp/$1/out/metrics.jsonl" "$tmp/$2/out/metrics.jsonl" "$1" "$2" "$3" <<'PY' || fail=1
import json, sys
a, b = ([r["loss"] for r in map(json.loads, open(p)) if "loss" in r] for p in sys.argv[1:3])
if len(a) != int(sys.argv[5]) or a != b:
    sys.exit(f"FAIL losses differ: {sys.argv[3]} {a}, {sys.argv[4]} {b}")
print(f"{sys.argv[3]} and {sys.argv[4]}: {len(a)} bit-identical losses, last {a[-1]!r}")
PY
}
# tag_of LOG: the namespace prefix of the lab run that wrote LOG; gone TAG: none of its
# namespaces is left (other tests' lab runs may be up at the same time: check only one's own).
tag_of() { sed -n 's/.*emulated cluster in namespaces \(hlab[0-9]*\)-\*.*/\1/p' "$1" | head -1; }
gone() { ! ip netns list | grep -q "^$1-"; }
