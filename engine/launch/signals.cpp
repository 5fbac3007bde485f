#include "engine/launch/signals.hpp"

#include <atomic>
#include <csignal>

namespace holmes::launch {

namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free atomic");

// SIGHUP: the terminal or ssh session went away; the run is saved as for the others.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, sig)) return;
  if (sig == SIGINT) {
    // Second Ctrl-C: the user does not want to wait for the checkpoint.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a signal arriving during a blocking read or collective must not turn it
  // into an EINTR failure; the loop checks the flag at the next step boundary.
  action.sa_flags = SA_RESTART;
  for (int sig : kStopSignals) sigaction(sig, &action, nullptr);
}

void ignore_stop_signals() {
  for (int sig : kStopSignals) ::signal(sig, SIG_IGN);
}

int stop_signal() { return g_stop_signal.load(); }

int stop_exit_code() {
  int sig = stop_signal();
  return sig == 0 ? 0 : 128 + sig;
}

void reset_stop_signal() { g_stop_signal.store(0); }

}  // namespace holmes::launch
