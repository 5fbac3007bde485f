# Shared by the elastic*.sh integration tests (docs/elastic.md). Source it after setting
# bin=<holmes-train>; it sources ckpt_common.bash (tmp, tiny, run, bad, same_losses).
. "$(dirname "${BASH_SOURCE[0]}")/ckpt_common.bash"
# A link with a unique name, so that every process of the test (a frozen one included) can be
# found and ended whatever happens. KEEP_TMP=1 keeps the logs.
marker="holmes-elastic-test-$$-$RANDOM"
ln -s "$bin" "$tmp/$marker"
bin="$tmp/$marker"
trap 'pkill -KILL -f "$marker" 2>/dev/null; [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

# rows NAME: "step:replicas" of every metrics row, e.g. "1:0,1,2 2:0,1,2 ..."
rows() {
  python3 -c 'import json, sys; print(" ".join(str(r["step"]) + ":" + ",".join(str(int(x)) for x in r.get("replicas", [])) for r in map(json.loads, open(sys.argv[1])) if "step_ms" in r))' "$tmp/$1/metrics.jsonl"
}
# same_weights DUMP_A DUMP_B: the weights of two dumps (HOLMES_TEST_DUMP_WEIGHTS) are finite and
# equal bit for bit.
same_weights() {
  python3 - "$1" "$2" <<'PY'
import math, struct, sys
def weights(path):
    data = open(path, "rb").read()
    magic, replica, n, m, k = struct.unpack("<5Q", data[:40])
    return struct.unpack(f"<{n}f", data[40:40 + 4 * n])
a, b = weights(sys.argv[1]), weights(sys.argv[2])
assert all(math.isfinite(x) for x in a), "weights not finite"
diff = sum(1 for x, y in zip(a, b) if struct.pack("<f", x) != struct.pack("<f", y))
assert len(a) == len(b) and diff == 0, f"{diff} of {len(a)} weights differ"
print(f"{len(a)} weights equal bit for bit")
PY
}
# same_at_join DUMP SENDER JOINER: at the join the joiner's whole private state (weights, AdamW
# moments, outer state: DUMP/join-rank-<R>.bin) is the sender's, bit for bit; the sender is of
# replica 0, the joiner of replica 1.
same_at_join() {
  python3 - "$1/join-rank-$2.bin" "$1/join-rank-$3.bin" <<'PY'
import struct, sys
(ha, a), (hb, b) = ((struct.unpack("<5Q", d[:40]), d[40:]) for d in (open(p, "rb").read() for p in sys.argv[1:3]))
assert ha[1] == 0 and hb[1] == 1 and ha[2:] == hb[2:], (ha, hb)
assert a == b, "state differs"
print(f"at the join: {ha[2]} weights, 2 x {ha[3]} moments, {ha[4]} outer floats equal bit for bit")
PY
}
