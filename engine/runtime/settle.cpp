// The leader's wait after a failure (settle.hpp).
#include "engine/runtime/settle.hpp"

#include <chrono>
#include <thread>

namespace holmes::runtime {

std::vector<std::string> wait_for_registrations(comm::Store& store, const std::vector<std::string>& keys,
                                                double settle_s, double bound_s) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const auto start = Clock::now();
  size_t registered = 0;
  auto changed_at = start;
  for (;;) {
    const size_t now_in = keys.size() - store.missing(keys).size();
    if (now_in != registered) registered = now_in, changed_at = Clock::now();
    if (registered == keys.size() || since(changed_at) >= settle_s || since(start) >= bound_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return store.missing(keys);
}

}  // namespace holmes::runtime
