// ProcessGroup over NCCL (docs/comm.md, "NCCL groups"). Buffers are device pointers on the
// current GPU (std::span never dereferences them); every operation is enqueued on
// OpOptions::stream (a cudaStream_t; null = the legacy default stream) and returns once
// enqueued, except barrier, which waits until every member has entered.
//
// Creation (collective over the group's members, in the same order on every rank):
//   group rank 0 makes the unique id and sets "pg/<name>/nccl_id" in the job's store; the
//   others read it (waiting up to spec.timeout). Every member sets "pg/<name>/joined/<rank>"
//   and calls ncclCommInitRankConfig with the config fields blocking = 0, commName = the
//   group's name and, unless `net` is empty (a group inside one node), netName = `net` ("IB"
//   inside an RDMA island, "Socket" across islands: engine/plan/nccl.hpp), then polls
//   ncclCommGetAsyncError (spinning briefly, then sleeping: poll_pause) until the communicator
//   is ready or spec.timeout has passed. On a time-out or error it calls ncclCommAbort and
//   throws CommError("connect") naming the members that never joined.
//
// Time-outs of operations: a watchdog thread per group follows an event recorded after each
// operation and the communicator's asynchronous error (and the return of that query); an
// operation aborts the communicator (ncclCommAbort) when it has not completed within its
// time-out counted from when the device could start it: its enqueue, or the completion of the
// operation before it, whichever is later (the host may run a whole step ahead of the GPU,
// and a healthy job's queued operations must not age while they wait their turn). The members
// blocked in it return. The next call on the group (or barrier, which waits) throws
// CommError; after that the group is broken, as every ProcessGroup is after a failure.
// barrier() given no stream uses a stream of the group's own, never the legacy default one.
#pragma once

#include <memory>
#include <string>

#include "comm/process_group.hpp"
#include "comm/store.hpp"

namespace holmes::comm {

// `net`: "IB" or "Socket" (config.netName), or "" to leave it unset (a group inside one node);
// std::invalid_argument otherwise. The
// process-wide NCCL variables (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, ...) must be set before the
// first group of the process (engine/runtime/nccl_env.hpp). Throws NcclUnavailable
// (nccl_api.hpp) when libnccl cannot be loaded, CommError when the group cannot be created.
std::unique_ptr<ProcessGroup> make_nccl_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const std::string& net);

}  // namespace holmes::comm
