// Errors of the communication layer. Both are runtime failures (exit code 1 from main):
// a peer died, a wait timed out, a stray process tried to join. Bad user input (a
// malformed rendezvous URL) throws holmes::UserError instead, see store.hpp.
#pragma once

#include <stdexcept>
#include <string>

namespace holmes::comm {

// A collective or point-to-point operation failed. Names the operation, the group, this
// process's rank in the group (and globally) and the peer involved; peer is -1 when the
// failure cannot be pinned to one peer (then `detail` lists the candidates).
class CommError : public std::runtime_error {
 public:
  struct Where {
    std::string op;           // "all_reduce", "send", "connect", ...
    std::string group;        // group name as created, e.g. "dp/pp0/tp1"
    int rank = -1;            // rank in the group
    int global_rank = -1;     // rank in the job
    int peer = -1;            // group rank of the peer, -1 when unknown or several
    int peer_global = -1;     // global rank of the peer, -1 when unknown
  };
  CommError(Where where, const std::string& detail);

  const Where& where() const { return where_; }
  const std::string& detail() const { return detail_; }

 private:
  Where where_;
  std::string detail_;
};

// The rendezvous store failed: a key did not appear in time (the message names the
// missing keys), the store host is unreachable, or the per-job token did not match.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A wait through the store ended before its time-out because the caller learnt that a rank it
// waited for will not come (store.hpp: StoreGiveUp); the message names the ranks and why.
class StoreWaitAbandoned : public StoreError {
 public:
  using StoreError::StoreError;
};

}  // namespace holmes::comm
