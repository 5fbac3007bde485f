#include "comm/gloo_diagnose.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
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

std::vector<int> members_not_failing(gloo::Context& ctx, Store& store, int rank, uint32_t tag, Millis timeout) {
  std::vector<std::string> keys;
  for (int q = 0; q < ctx.size; ++q) keys.push_back(fmt::format("fail/{}/{}", tag, q));
  std::vector<int> absent;
  try {
    store.set(keys[rank], {'1'});
    // Members that reached the operation fail within about the same time-out as we did;
    // a short grace period lets their markers arrive.
    const Millis grace = std::clamp(timeout / 4, Millis(200), Millis(2000));
    try {
      store.wait(keys, grace);
    } catch (const std::exception&) {
    }
    for (const auto& k : store.missing(keys)) absent.push_back(std::stoi(k.substr(k.rfind('/') + 1)));
  } catch (const std::exception&) {
  }
  return absent;
}

}  // namespace

Suspect diagnose_gloo_failure(gloo::Context& ctx, Store& store, int rank, int peer_hint, const char* op,
                              uint32_t tag, Millis timeout) {
  auto closed = closed_peers(ctx, rank);
  if (!closed.empty())
    return {closed.front(), fmt::format("connection to member(s) [{}] is closed (process died or closed the group)",
                                        fmt::join(closed, ","))};
  if (peer_hint >= 0) return {peer_hint, "the peer did not complete its side in time"};
  auto absent = members_not_failing(ctx, store, rank, tag, timeout);
  if (!absent.empty())
    return {absent.front(), fmt::format("member(s) [{}] never reached {} #{} (or are stuck elsewhere)",
                                        fmt::join(absent, ","), op, tag)};
  return {-1, fmt::format("every member reached {} #{} and failed; no single peer to blame", op, tag)};
}

}  // namespace holmes::comm
