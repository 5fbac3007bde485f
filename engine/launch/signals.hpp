// Stop requests by signal. SIGINT, SIGTERM, SIGUSR1 (Slurm's --signal=USR1@T before the
// time limit) and SIGHUP (the session went away) only set a flag; the training loop polls it between steps, finishes the step,
// writes a checkpoint and exits with stop_exit_code() = 128 + N. A second SIGINT while a
// stop is pending kills the process at once (the usual "press Ctrl-C twice").
#pragma once

namespace holmes::launch {

// Installs the handlers (idempotent). The handlers are async-signal-safe: they store into a
// lock-free atomic and, for a repeated SIGINT, restore the default action and re-raise.
void install_stop_signal_handlers();
// The same signals ignored (a process that must outlive the stop of the ranks it serves).
void ignore_stop_signals();

// The first stop signal received since install (or the last reset); 0 when none.
int stop_signal();
inline bool stop_requested() { return stop_signal() != 0; }

// 128 + stop_signal(), the exit code after a stop by signal (DESIGN.md); 0 when none.
int stop_exit_code();

// Forgets a received signal (tests; a launcher that handled it).
void reset_stop_signal();

}  // namespace holmes::launch
