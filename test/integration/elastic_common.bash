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
# replica_1_pair_lost NAME: job NAME (replicas of two ranks) exited 0 and rank 0 named the loss
# of replica 1 (ranks 2, 3, both missing), replicas [0, 2] going on as generation 1.
replica_1_pair_lost() {
  [ "$rc" -eq 0 ] || bad "$1: exit $rc, expected 0" "$tmp/$1.log"
  grep -q "rank 0: elastic: lost replica 1 (ranks 2, 3) (missing rank(s) \[2, 3\]); generation 1: replicas \[0, 2\]" \
    "$tmp/$1.log" || bad "$1: the loss of replica 1 is not named" "$tmp/$1.log"
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
dumped() { mkdir -p "$tmp/$1-dump"; echo "$tmp/$1-dump"; }

# rejoin_by_hand STEP ARGS...: the job ARGS (elastic, three one-rank replicas, output $tmp/join,
# dumps in $tmp/join-dump) through the local launcher with rank 1 (REJOIN_RANK=R: rank R) killed
# after step 6; once the survivors went on, that rank is started again by hand with the job's
# variables. The first rank holds the verdict after STEP until it asks
# (HOLMES_TEST_WAIT_FOR_JOINER), so the test does not depend on the machine's speed. Checks that
# both exit 0, that the rank is admitted after STEP and that the survivors name it; logs
# $tmp/join.log and $tmp/join-rank<R>.log.
rejoin_by_hand() {
  local step=$1 port dump launcher rc launcher_rc token="elastic-join-test-$$" r=${REJOIN_RANK:-1} left
  shift
  left=$( [ "$r" -eq 0 ] && echo "1, 2" || echo "0, 2" )
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  dump=$(dumped join)
  MASTER_PORT=$port HOLMES_JOB_TOKEN=$token HOLMES_TEST_SIGNAL_AFTER_STEP=6:KILL:$r HOLMES_TEST_WAIT_FOR_JOINER=$step \
    HOLMES_TEST_DUMP_WEIGHTS=$dump timeout 300 "$bin" --nproc-per-node 3 "$@" >"$tmp/join.log" 2>&1 &
  launcher=$!
  for _ in $(seq 1200); do grep -q "generation 1: replicas \[$left\] go on" "$tmp/join.log" && break; sleep 0.1; done
  RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HOLMES_JOB_TOKEN=$token \
    HOLMES_STORE_HOSTED=1 HOLMES_TEST_DUMP_WEIGHTS=$dump timeout 300 "$bin" "$@" >"$tmp/join-rank$r.log" 2>&1
  rc=$?
  wait "$launcher"
  launcher_rc=$?
  [ "$rc" -eq 0 ] || bad "join: the rejoining rank exited $rc" "$tmp/join-rank$r.log"
  [ "$launcher_rc" -eq 0 ] || bad "join: the job exited $launcher_rc" "$tmp/join.log"
  grep -q "rank $r: elastic: admitted after step $step; generation 2: replicas \[0, 1, 2\]" "$tmp/join-rank$r.log" \
    || bad "join: rank $r not admitted after step $step" "$tmp/join-rank$r.log"
  grep -q "rank ${left%%,*}: elastic: replica $r (rank $r) rejoin(s) after step $step; generation 2: replicas \[0, 1, 2\]" \
    "$tmp/join.log" || bad "join: the survivors do not name the rejoining replica" "$tmp/join.log"
}
