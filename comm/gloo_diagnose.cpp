#include "comm/gloo_diagnose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

namespace holmes::comm {

namespace {

constexpr uint64_t kProbeSlot = static_cast<uint64_t>(0x42) << 56;

// Gloo closes every pair of a context once an operation times out ("Application timeout
// caused pair closure"), so only other errors (reset, EOF, broken pipe) show a lost peer.
bool lost(const std::exception& e) {
  std::string what = e.what();
  return what.find("Timed out") == std::string::npos && what.find("Application timeout") == std::string::npos;
}

// A send to a live peer stays pending (nobody posts a recv on the probe slot) and times
// out; one to a peer whose connection is gone fails with another error, at once.
std::vector<int> closed_peers(gloo::Context& ctx, int rank) {
  static char byte = 0;  // pending probes may outlive this call
  std::vector<int> closed;
  std::vector<std::pair<int, std::unique_ptr<gloo::transport::UnboundBuffer>>> probes;
  for (int q = 0; q < ctx.size; ++q) {
    if (q == rank) continue;
    try {
      probes.emplace_back(q, ctx.createUnboundBuffer(&byte, 1));
      probes.back().second->send(q, kProbeSlot);
    } catch (const std::exception& e) {
      if (lost(e)) closed.push_back(q);
      probes.pop_back();
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + Millis(200);
  for (auto& [q, buf] : probes) {
    try {
      auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      buf->waitSend(std::max(left, Millis(1)));
    } catch (const std::exception& e) {
      if (lost(e)) closed.push_back(q);
    }
  }
  std::sort(closed.begin(), closed.end());
  return closed;
}

std::string marker(int q) { return fmt::format("failed/{}", q); }

// Members without a "failed/<q>" marker, after waiting up to `grace` for them (less when every
// member still without one is `gone`: its why is appended to `gone_why`); nullopt when the
// store cannot be asked (rank 0 hosted it and is gone).
using Gone = std::function<std::optional<std::string>(int)>;

std::optional<std::vector<int>> members_not_failing(Store& store, const std::vector<int>& candidates, Millis grace,
                                                    const Gone& gone = {}, std::vector<std::string>* gone_why = nullptr) {
  std::vector<std::string> keys;
  for (int q : candidates) keys.push_back(marker(q));
  auto absent_of = [&] {
    std::vector<int> absent;
    for (const auto& k : store.missing(keys)) absent.push_back(std::stoi(k.substr(k.rfind('/') + 1)));
    return absent;
  };
  try {
    if (!gone) {
      try {
        store.wait(keys, grace);
      } catch (const std::exception&) {
      }
      return absent_of();
    }
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (;;) {
      std::vector<int> absent = absent_of();
      std::vector<std::string> why;
      for (int q : absent) {
        auto w = gone(q);
        if (!w) break;
        why.push_back(fmt::format("member {}: {}", q, *w));
      }
      const bool all_gone = why.size() == absent.size();
      if (absent.empty() || all_gone || std::chrono::steady_clock::now() >= deadline) {
        if (all_gone && gone_why != nullptr) *gone_why = std::move(why);
        return absent;
      }
      std::this_thread::sleep_for(Millis(50));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

void mark_gave_up(Store& store, int rank) noexcept {
  try {
    store.set(marker(rank), {'1'});
  } catch (const std::exception&) {
  }
}

Suspect diagnose_gloo_failure(gloo::Context& ctx, Store& store, int rank, int peer_hint, const char* op,
                              uint32_t tag, Millis timeout, const Gone& gone) {
  // Say we failed before anything else: peers that probe us after we close must be able
  // to tell a member that gave up (marker set) from one that died (none).
  mark_gave_up(store, rank);
  auto closed = closed_peers(ctx, rank);
  if (!closed.empty()) {
    // A survivor whose own operation timed out closes all its connections too (Gloo does
    // that) and sets its marker a moment later; only closed peers without one are dead.
    auto died = members_not_failing(store, closed, Millis(300));
    if (!died)  // without a store every closed peer is a suspect
      return {closed.front(), fmt::format("connection to member(s) [{}] is closed and the rendezvous store is "
                                          "unreachable too (global rank 0 hosts it: it may be the one that died)",
                                          fmt::join(closed, ","))};
    if (!died->empty())
      return {died->front(), fmt::format("connection to member(s) [{}] is closed (process died or closed the group)",
                                         fmt::join(*died, ","))};
  }
  if (peer_hint >= 0) return {peer_hint, "the peer did not complete its side in time"};
  // Members that reached the operation fail within about the same time-out as we did;
  // a short grace period lets their markers arrive.
  std::vector<int> others;
  for (int q = 0; q < ctx.size; ++q)
    if (q != rank) others.push_back(q);
  std::vector<std::string> why;
  auto absent = members_not_failing(store, others, std::clamp(timeout / 2, Millis(500), Millis(5000)), gone, &why)
                    .value_or(std::vector<int>{});
  if (!absent.empty() && !why.empty())
    return {absent.front(), fmt::format("member(s) [{}] never reached {} #{} and are gone ({})", fmt::join(absent, ","),
                                        op, tag, fmt::join(why, "; "))};
  if (!absent.empty())
    return {absent.front(), fmt::format("member(s) [{}] never reached {} #{} (or are stuck elsewhere)",
                                        fmt::join(absent, ","), op, tag)};
  return {-1, fmt::format("every member reached {} #{} and failed; no single peer to blame", op, tag)};
}

}  // namespace holmes::comm
