// The store keeper: a process of its own that serves an elastic job's TCP rendezvous store, so
// that the store, the arbiter of who goes on (docs/elastic.md), outlives rank 0's training
// process. Rank 0 starts it (`holmes-train store`, the same binary) where it would otherwise
// serve the store in-process: under Slurm or torchrun-style variables. It ends once every rank
// that connected has gone (the job over, however it ended). A user may also run it by hand on a
// host outside the job, so that the store outlives rank 0's node too (docs/launch.md).
#pragma once

#include <cstdint>
#include <string>

namespace holmes::runtime {

struct KeeperOptions {
  uint16_t port = 0;
  std::string token;          // the job's token: ranks of other jobs are refused
  int ready_fd = -1;          // writes "ready PORT\n" there once listening (rank 0 waits for it)
  bool outlive_signals = false;  // ignore SIGINT/SIGTERM/SIGHUP: the ranks stop on them and still need the store
  bool follow_parent = false;    // give up when the parent (rank 0) ended before any rank connected
  double linger_s = 2.0;         // how long no rank is connected before it ends
};

// `holmes-train store`: serves until every rank that connected has gone for linger_s (or a stop
// signal, where signals are not outlived). Exit code 0 when the job's ranks left, 1 otherwise;
// 3 when the port is taken (with ready_fd: said on it as "in-use").
int serve_job_store(const KeeperOptions& options);

// Rank 0 of an elastic job: starts the keeper on `port` and waits until it listens. Returns
// false when the port is already served (a rank 0 started again to rejoin: the keeper of the
// running job holds it), so the caller connects like any rank. Throws StoreError when the
// keeper could not be started.
bool start_store_keeper(uint16_t port, const std::string& token, double timeout_s);

}  // namespace holmes::runtime
