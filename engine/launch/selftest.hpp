// A test hook for the launcher, driven by HOLMES_LAUNCH_SELFTEST (test/integration/
// launch_local.sh). A worker calls maybe_run_launch_selftest() first thing; when the
// variable is unset it returns at once, otherwise it plays a scripted worker and exits:
//   report        print "selftest rank=R world=W local_rank=L local_world=LW node=N/NN
//                 master=A:P token=T source=S" (from detect_launch_env) and exit 0
//                 (unless a directive below keeps the process alive)
//   crash:R[:C]   rank R exits with code C (default 3) after 0.3 s
//   kill:R        rank R kills itself with SIGKILL after 0.3 s
//   stubborn:R    rank R ignores SIGTERM/SIGINT (so only SIGKILL stops it)
//   wait          every rank waits for a stop signal
// Ranks that wait print "selftest rank=R stopping on signal S" and exit 128+S when a stop
// signal arrives, or exit 0 after HOLMES_LAUNCH_SELFTEST_MAX_S seconds (default 30).
// Directives are comma-separated, e.g. "report,crash:2".
#pragma once

namespace holmes::launch {

void maybe_run_launch_selftest();

}  // namespace holmes::launch
