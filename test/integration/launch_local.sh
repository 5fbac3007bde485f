#!/usr/bin/env bash
# The local launcher through the real binary: `--nproc-per-node N` starts N workers with the
# right RANK / WORLD_SIZE; a crashing or killed rank makes the launcher stop the others and
# exit non-zero naming the rank; SIGTERM to the launcher reaches every worker; killing the
# launcher kills the workers; no process is left. The workers play scripted parts through
# HOLMES_LAUNCH_SELFTEST (engine/launch/selftest.hpp). Every run is bounded in time.
set -u
bin=$1 src=$2
fail=0
tmp=$(mktemp -d)
marker="holmes-launch-test-$$-$RANDOM"
# Run the binary through a link with a unique name: the workers keep argv[0], so
# `pgrep -f $marker` finds every process of this test and nothing else.
ln -s "$(readlink -f "$bin")" "$tmp/$marker"
exe="$tmp/$marker"
export HOLMES_LAUNCH_SELFTEST_MAX_S=20 HOLMES_LAUNCH_GRACE_S=1
cleanup() { pkill -KILL -f "$marker" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

bad() { echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/    /' "$2"; fail=1; }
no_leftovers() {  # no_leftovers DESCRIPTION: waits up to 3 s for every test process to be gone
  for _ in $(seq 30); do pgrep -f "$marker" >/dev/null || return 0; sleep 0.1; done
  bad "$1: processes left: $(pgrep -af "$marker" | tr '\n' ';')"
}
wait_lines() {  # wait_lines FILE PATTERN COUNT: up to 10 s
  for _ in $(seq 100); do [ "$(grep -c "$2" "$1")" -ge "$3" ] && return 0; sleep 0.1; done
  return 1
}

# 1. Ranks and shared rendezvous details.
HOLMES_LAUNCH_SELFTEST=report timeout 30 "$exe" --nproc-per-node 3 >"$tmp/report.out" 2>&1
code=$?
if ! grep -q "selftest rank=" "$tmp/report.out"; then
  bad "report: the workers did not run the launch selftest; holmes-train must call
    holmes::launch::run_local_workers(...) for --nproc-per-node and
    holmes::launch::maybe_run_launch_selftest() at the start of a worker (see docs/launch.md)" "$tmp/report.out"
  exit 1
fi
[ "$code" -eq 0 ] || bad "report: exit $code, expected 0" "$tmp/report.out"
for r in 0 1 2; do
  grep -qF "[rank $r] selftest rank=$r world=3" "$tmp/report.out" || bad "report: rank $r's line lacks its prefix"
  grep -q "selftest rank=$r world=3 local_rank=$r local_world=3 node=0/1 master=127.0.0.1:" "$tmp/report.out" ||
    bad "report: no line for rank $r" "$tmp/report.out"
done
[ "$(grep "selftest rank=" "$tmp/report.out" | sed 's/.*master=\([^ ]*\) token=\([^ ]*\).*/\1 \2/' | sort -u | wc -l)" -eq 1 ] ||
  bad "report: ranks disagree on master or token" "$tmp/report.out"
no_leftovers "report"

# 2. A rank exits with an error: the others are stopped, the exit code is that rank's.
start=$(date +%s%N)
HOLMES_LAUNCH_SELFTEST=crash:2:5 timeout 30 "$exe" --nproc-per-node 4 >"$tmp/crash.out" 2>&1
code=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$code" -eq 5 ] || bad "crash: exit $code, expected 5" "$tmp/crash.out"
grep -q "rank 2 (pid [0-9]*) exited with code 5" "$tmp/crash.out" || bad "crash: rank 2 not named" "$tmp/crash.out"
[ "$took_ms" -lt 8000 ] || bad "crash: took ${took_ms} ms, expected < 8 s"
no_leftovers "crash"

# 3. A rank is killed by a signal: 128 + 9, named.
HOLMES_LAUNCH_SELFTEST=kill:1 timeout 30 "$exe" --nproc-per-node 2 >"$tmp/kill.out" 2>&1
code=$?
[ "$code" -eq 137 ] || bad "kill: exit $code, expected 137" "$tmp/kill.out"
grep -q "rank 1 (pid [0-9]*) was killed by signal 9" "$tmp/kill.out" || bad "kill: rank 1 not named" "$tmp/kill.out"
no_leftovers "kill"

# 4. A rank ignores SIGTERM after another failed: SIGKILL after the grace period.
HOLMES_LAUNCH_SELFTEST=crash:0:1,stubborn:1 timeout 40 "$exe" --nproc-per-node 2 >"$tmp/stubborn.out" 2>&1
code=$?
[ "$code" -eq 1 ] || bad "stubborn: exit $code, expected 1" "$tmp/stubborn.out"
grep -q "rank 1 (pid [0-9]*) still running .* sending SIGKILL" "$tmp/stubborn.out" ||
  bad "stubborn: no SIGKILL escalation" "$tmp/stubborn.out"
no_leftovers "stubborn"

# 5. SIGTERM to the launcher is forwarded; every worker stops on it; exit 128 + 15.
HOLMES_LAUNCH_SELFTEST=report,wait "$exe" --nproc-per-node 3 >"$tmp/term.out" 2>&1 &
pid=$!
wait_lines "$tmp/term.out" "selftest rank=" 3 || bad "term: workers did not start" "$tmp/term.out"
kill -TERM "$pid"
wait "$pid"
code=$?
[ "$code" -eq 143 ] || bad "term: exit $code, expected 143" "$tmp/term.out"
[ "$(grep -c "stopping on signal 15" "$tmp/term.out")" -eq 3 ] || bad "term: not every worker got SIGTERM" "$tmp/term.out"
no_leftovers "term"

# 6. The launcher is killed outright: the workers die with it (no orphans).
HOLMES_LAUNCH_SELFTEST=report,wait "$exe" --nproc-per-node 2 >"$tmp/orphan.out" 2>&1 &
pid=$!
wait_lines "$tmp/orphan.out" "selftest rank=" 2 || bad "orphan: workers did not start" "$tmp/orphan.out"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
no_leftovers "orphan"

[ "$fail" -eq 0 ] && echo "launch_local: all checks passed"
exit "$fail"
