// The leader's wait after a failure (settle.hpp).
#include "engine/runtime/settle.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace holmes::runtime {

std::vector<std::string> wait_for_registrations(comm::Store& store, const std::vector<std::string>& keys,
                                                double settle_s, double bound_s,
                                                const std::vector<std::string>& coming,
                                                const std::function<bool(size_t)>& alive) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const auto start = Clock::now();
  size_t registered = 0;
  auto changed_at = start;
  bool live_missing = false;  // the last look at the missing ranks' liveness
  auto looked_at = start - std::chrono::seconds(1);
  for (;;) {
    const std::vector<std::string> missing = store.missing(keys);
    const size_t now_in = keys.size() - missing.size();
    if (now_in != registered) registered = now_in, changed_at = Clock::now();
    auto is_missing = [&](size_t i) { return std::find(missing.begin(), missing.end(), keys[i]) != missing.end(); };
    bool awaited = false;  // a missing rank that said it is coming, or is still alive
    if (!coming.empty() && !missing.empty()) {
      const std::vector<std::string> not_coming = store.missing(coming);
      for (size_t i = 0; i < keys.size() && !awaited; ++i)
        awaited = is_missing(i) && std::find(not_coming.begin(), not_coming.end(), coming[i]) == not_coming.end();
    }
    if (alive && !missing.empty() && !awaited) {
      if (since(looked_at) >= 0.25) {
        looked_at = Clock::now();
        live_missing = false;
        for (size_t i = 0; i < keys.size() && !live_missing; ++i) live_missing = is_missing(i) && alive(i);
      }
      awaited = live_missing;
    }
    if (registered == keys.size() || (!awaited && since(changed_at) >= settle_s) || since(start) >= bound_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return store.missing(keys);
}

}  // namespace holmes::runtime
