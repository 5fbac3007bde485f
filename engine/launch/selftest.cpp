#include "engine/launch/selftest.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "engine/launch/launch_env.hpp"
#include "engine/launch/signals.hpp"

namespace holmes::launch {

namespace {

struct Script {
  bool report = false, wait = false, stubborn = false;
  int exit_code = -1;  // >= 0: this rank exits with it
  bool self_kill = false;
};

// Parses the directives that concern `rank`; unknown directives are a test-author error.
Script parse_script(const std::string& text, int rank) {
  Script s;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    int r = -1, code = 3;
    if (item == "report") s.report = true;
    else if (item == "wait") s.wait = true;
    else if (std::sscanf(item.c_str(), "crash:%d:%d", &r, &code) >= 1 && item.rfind("crash:", 0) == 0) {
      s.wait = true;
      if (r == rank) s.exit_code = code;
    } else if (std::sscanf(item.c_str(), "kill:%d", &r) == 1) {
      s.wait = true;
      s.self_kill = s.self_kill || r == rank;
    } else if (std::sscanf(item.c_str(), "stubborn:%d", &r) == 1) {
      s.stubborn = s.stubborn || r == rank;
    } else {
      fmt::print(stderr, "HOLMES_LAUNCH_SELFTEST: unknown directive '{}'\n", item);
      std::exit(2);
    }
  }
  return s;
}

}  // namespace

void maybe_run_launch_selftest() {
  const char* text = std::getenv("HOLMES_LAUNCH_SELFTEST");
  if (!text || !*text) return;
  LaunchEnv env = detect_launch_env_from_process(0, "selftest");
  Script s = parse_script(text, env.rank);
  // A rank that waits for a stop signal takes it from before it reports: a test sends the
  // signal once every rank reported, and a worker that had printed its line but not yet
  // installed its handlers died of that signal without the "stopping on signal" line (the
  // launch_local failure under load).
  const bool waits = s.wait && s.exit_code < 0 && !s.self_kill;
  if (waits) {
    install_stop_signal_handlers();
    if (s.stubborn) {
      signal(SIGTERM, SIG_IGN);
      signal(SIGINT, SIG_IGN);
    }
  }
  if (s.report)
    fmt::print("selftest rank={} world={} local_rank={} local_world={} node={}/{} master={}:{} token={} source={}\n",
               env.rank, env.world_size, env.local_rank, env.local_world_size, env.node_rank, env.num_nodes,
               env.master_addr, env.master_port, env.job_token, env.source);
  std::fflush(stdout);
  if (s.exit_code >= 0 || s.self_kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (s.self_kill) raise(SIGKILL);
    std::exit(s.exit_code);
  }
  if (!waits) std::exit(0);
  const char* max_text = std::getenv("HOLMES_LAUNCH_SELFTEST_MAX_S");
  double max_s = max_text ? std::atof(max_text) : 30.0;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long long>(max_s * 1000));
  while (std::chrono::steady_clock::now() < end) {
    if (stop_requested()) {
      fmt::print("selftest rank={} stopping on signal {}\n", env.rank, stop_signal());
      std::fflush(stdout);
      std::exit(stop_exit_code());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::exit(0);
}

}  // namespace holmes::launch
