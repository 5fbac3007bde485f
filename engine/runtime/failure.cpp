// The one place that turns a failure of any rank into this rank's exit message.
#include "engine/runtime/failure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp_store.hpp"
#include "engine/runtime/liveness.hpp"

namespace holmes::runtime {

namespace {

// After a failure every live rank records in the store whom its own error blames
// ("job/failed/<rank>" = peer, -1 when none). A rank that died or hangs never records
// anything, while a rank that only gave up because of it does: so the culprit is a blamed
// rank without a record of its own (the most blamed one when several). Waits up to
// `grace_s` until every rank has either reported or is such a culprit. Never throws. Rank 0
// hosts the store and keeps it up until the others have decided, so a store this rank cannot
// even write its report to after a communication failure means rank 0 is gone: it is the
// culprit (its neighbours see its connections close; the ranks further away only see a
// neighbour that gave up). After a failure of this rank's own (peer_failure false) the store
// is no evidence, and its own peer is all we know.
struct Verdict {
  int peer = -1;
  bool store_host_gone = false;
};

Verdict blame_failed_rank(comm::Store& store, int rank, int world, int own_peer, bool peer_failure,
                          double grace_s) {
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("job/failed/{}", r));
  int pick = -1;
  try {
    comm::set_string(store, keys[rank], std::to_string(own_peer));
  } catch (const std::exception&) {
    if (peer_failure && rank != 0) return {0, true};
    return {own_peer, false};
  }
  try {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    int last_reporters = -1;
    auto settled_at = deadline;
    for (;;) {
      std::vector<bool> reported(world, true);
      for (const auto& k : store.missing(keys)) reported[std::stoi(k.substr(k.rfind('/') + 1))] = false;
      std::map<int, int> blamed;  // culprit candidate -> times blamed
      int reporters = 0;
      for (int r = 0; r < world; ++r) {
        if (!reported[r]) continue;
        ++reporters;
        const int p = std::stoi(comm::get_string(store, keys[r], comm::Millis(1000)));
        if (p >= 0 && p < world && !reported[p]) ++blamed[p];
      }
      pick = -1;
      for (const auto& [p, n] : blamed)
        if (pick < 0 || n > blamed[pick]) pick = p;
      // Certain once only one rank is silent. Otherwise a silent rank may merely be slower
      // to time out (blamed by a neighbour that waits on it), so the verdict also needs the
      // reports to have settled for a moment.
      const auto now = std::chrono::steady_clock::now();
      if (reporters != last_reporters) {
        last_reporters = reporters;
        settled_at = now + std::chrono::milliseconds(1500);
      }
      const bool all_explained = reporters + static_cast<int>(blamed.size()) >= world;
      if (reporters >= world - 1 || (all_explained && now > settled_at) || now > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    store.add("job/decided", 1);
  } catch (const std::exception&) {
  }
  return {pick >= 0 ? pick : own_peer, false};
}

// Rank 0 hosts the store the others decide with: it keeps it up until every other live
// rank has decided, or no other process is connected to it any more (a TCP store: two ranks
// died, or one exited without deciding), or cluster.timeout_s.
void linger_as_store_host(comm::Store& store, int world, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  const auto* tcp = dynamic_cast<const comm::TcpStore*>(&store);
  if (tcp != nullptr && tcp->connected_clients() < 0) return;  // served by another process (a launcher, a keeper)
  try {
    // A rank that died never decides: world - 1 is everyone that can.
    while (store.add("job/decided", 0) < world - 1 && std::chrono::steady_clock::now() < deadline) {
      if (tcp != nullptr && tcp->connected_clients() == 1) break;  // only this rank's own connection
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
  }
}

}  // namespace

// A worker owns no children, so it may end at once. The destructors of the unwound Trainer
// already left the groups idle.
[[noreturn]] void fail_rank(Runtime& rt, int rank, const std::string& what, int own_peer, bool peer_failure,
                            double timeout_s) {
  rt.comms.clear();
  // Said at once: which rank failed is known only after the agreement below (up to 5 s).
  if (peer_failure && rt.store) {
    std::fflush(stdout);
    std::fprintf(stderr, "holmes-train: rank %d: a peer failed (%s); the ranks agree which one\n", rank,
                 wall_clock_text().c_str());
    std::fflush(stderr);
  }
  const Verdict v = rt.store ? blame_failed_rank(*rt.store, rank, rt.world, own_peer, peer_failure,
                                                 std::min(timeout_s, 5.0))
                             : Verdict{own_peer, false};
  std::fflush(stdout);
  if (v.store_host_gone)
    std::fprintf(stderr, "holmes-train: rank %d: %s, peer rank %d (it hosts the job's store, which is gone too)\n",
                 rank, what.c_str(), v.peer);
  else if (v.peer >= 0) std::fprintf(stderr, "holmes-train: rank %d: %s, peer rank %d\n", rank, what.c_str(), v.peer);
  else std::fprintf(stderr, "holmes-train: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  if (rt.store && rank == 0) linger_as_store_host(*rt.store, rt.world, timeout_s);
  std::_Exit(1);
}

}  // namespace holmes::runtime
