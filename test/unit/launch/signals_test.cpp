// The stop-signal flag: the first signal is kept, the exit code is 128 + N, reset forgets it.
#include <catch2/catch.hpp>
#include <csignal>

#include "engine/launch/signals.hpp"

using namespace holmes::launch;

TEST_CASE("stop signals set a flag instead of ending the process", "[launch]") {
  install_stop_signal_handlers();
  reset_stop_signal();
  CHECK_FALSE(stop_requested());
  CHECK(stop_exit_code() == 0);
  std::raise(SIGUSR1);
  CHECK(stop_signal() == SIGUSR1);
  std::raise(SIGTERM);  // a later signal does not replace the first
  CHECK(stop_signal() == SIGUSR1);
  CHECK(stop_exit_code() == 128 + SIGUSR1);
  reset_stop_signal();
  std::raise(SIGTERM);
  CHECK(stop_exit_code() == 128 + SIGTERM);
  reset_stop_signal();
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) std::signal(sig, SIG_DFL);
}
