// Failure blame of a multi-process job: after any rank fails, each live rank records in the
// store whom its own error blames; a rank that died or hangs never records anything, so the
// culprit is a blamed rank without a record of its own. Every rank then exits naming it.
#pragma once

#include <string>

#include "engine/runtime/startup.hpp"

namespace holmes::runtime {

// After a communication failure (peer_failure) first prints "holmes-train: rank R: a peer
// failed (<time>); the ranks agree which one" at once. Then prints "holmes-train: rank R:
// <what>, peer rank P" (P: the rank the reports single out, else own_peer; rank 0 when the
// store it hosts is gone after a communication failure (peer_failure); nothing when unknown) and ends the process with exit code 1 at once. First
// closes this rank's groups, so that peers blocked on it fail now rather than at their
// time-out; rank 0, which hosts the store, keeps it up until the others have decided (at
// most timeout_s).
[[noreturn]] void fail_rank(Runtime& rt, int rank, const std::string& what, int own_peer, bool peer_failure,
                            double timeout_s);

}  // namespace holmes::runtime
