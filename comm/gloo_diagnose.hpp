// After a Gloo operation failed, find out which peer is to blame so the error can name it.
// Gloo's own message says "timed out" or "connection closed" but rarely which rank; a
// ring algorithm also makes ranks far from a dead peer time out waiting on a live one.
#pragma once

#include <gloo/context.h>

#include <functional>
#include <optional>
#include <string>

#include "comm/store.hpp"

namespace holmes::comm {

struct Suspect {
  int peer = -1;       // group rank to blame, -1 when none could be pinned
  std::string reason;  // what we found, in words
};

// 0. Set "failed/<rank>" in the group's store: this member gave up, it did not die.
// 1. Probe every peer's connection with a one-byte send on a reserved slot: a closed one
//    without a "failed" marker (process died or closed the group) is the culprit.
// 2. Otherwise wait briefly for the others' markers; members that never set one did not
//    reach the operation (or are stuck elsewhere). The wait ends as soon as every member
//    without a marker is `gone` (group rank -> why, as GroupSpec::known_gone; may be empty).
// 3. Otherwise blame `peer_hint` (the peer of a send/recv, the root of a broadcast).
// Never throws: a store that is gone (rank 0 died) only makes the answer vaguer.
Suspect diagnose_gloo_failure(gloo::Context& ctx, Store& store, int rank, int peer_hint, const char* op,
                              uint32_t tag, Millis timeout,
                              const std::function<std::optional<std::string>(int)>& gone = {});

// Step 0 alone: member `rank` gave up (GlooGroup::abort). Never throws.
void mark_gave_up(Store& store, int rank) noexcept;

}  // namespace holmes::comm
