#include "comm/errors.hpp"

#include <fmt/format.h>

namespace holmes::comm {

static std::string describe(const CommError::Where& w, const std::string& detail) {
  std::string peer = "peer unknown";
  if (w.peer >= 0) peer = fmt::format("peer {} (global {})", w.peer, w.peer_global);
  return fmt::format("comm: {} on group '{}' failed at rank {} (global {}), {}: {}", w.op,
                     w.group, w.rank, w.global_rank, peer, detail);
}

CommError::CommError(Where where, const std::string& detail)
    : std::runtime_error(describe(where, detail)), where_(std::move(where)), detail_(detail) {}

}  // namespace holmes::comm
