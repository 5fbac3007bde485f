// ProcessGroup: the collectives and point-to-point operations one communicator of the
// plan offers (a tensor-, pipeline- or data-parallel group). Implementations: Gloo over
// TCP (gloo_group.hpp), threads in one process (inproc_group.hpp); the NCCL one comes with
// the CUDA backend (docs/comm.md says how it fits: OpOptions::stream, a per-group network
// chosen at creation, the unique id exchanged through the Store).
//
// Contract for every operation:
// - all members call the same operations in the same order (collectives) or matching
//   send/recv pairs (same peer pair and tag, same element count);
// - buffers are host memory for CPU groups and device memory for NCCL groups;
// - it ends within OpOptions::timeout (or the group's default); on failure it throws
//   CommError naming the operation, the group, this rank and the peer. After a failure the
//   group is broken: every later call throws at once.
// - one thread at a time per group (a CommThread may own it while backward runs); distinct
//   groups may be used from distinct threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/dtype.hpp"

namespace holmes::comm {

enum class ReduceOp { kSum, kMax };
const char* to_string(ReduceOp op);

// Element types an operation may carry (common/dtype.hpp): fp32, or bf16 (2-byte storage;
// sums accumulate in the group's own way: NCCL adds in fp32 and rounds at each hop).
using holmes::DType;
using holmes::dtype_bytes;
using holmes::dtype_name;

struct OpOptions {
  std::chrono::milliseconds timeout{0};  // 0: the group's default time-out
  void* stream = nullptr;                // cudaStream_t for NCCL groups; CPU groups ignore it
  // send_recv on host-memory groups: called once, on the calling thread, as soon as every
  // receive of the batch holds its data, possibly while sends still run (so a caller on a
  // communication thread can hand the received tensors on early). Not called when the batch
  // fails first. Device groups (NCCL), whose calls only enqueue, never call it.
  std::function<void()> on_received{};
};

// One half of a point-to-point transfer; see ProcessGroup::send_recv.
struct P2POp {
  enum Kind { kSend, kRecv };
  Kind kind;
  std::span<float> data;  // read for kSend, written for kRecv; [n] on both sides
  int peer;               // group rank
  uint32_t tag;
};

// What every implementation is created from: which ranks, who am I, how long to wait.
struct GroupSpec {
  std::string name;               // unique in the job, e.g. "dp/pp0/tp1"; names the store prefix
  std::vector<int> global_ranks;  // members; a member's group rank is its index here
  int global_rank = 0;            // this process; must be in global_ranks
  std::chrono::milliseconds timeout{30'000};  // default per-operation time-out (and connect)
  // What the job knows of a member without asking it (its liveness mark, an elastic job's
  // heartbeats): why global rank r is gone (died, frozen), or nothing. Naming the member a
  // failed operation waited on then ends at once instead of after a grace for the others'
  // reports. Empty: nothing is known (the grace applies). Groups in one process ignore it.
  std::function<std::optional<std::string>(int global_rank)> known_gone{};

  // Index of global_rank in global_ranks; throws std::invalid_argument (a programming
  // error, not user input) when absent or when the list has duplicates.
  int group_rank() const;
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  const std::string& name() const { return spec_.name; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(spec_.global_ranks.size()); }
  int global_rank_of(int group_rank) const { return spec_.global_ranks.at(group_rank); }
  const std::vector<int>& global_ranks() const { return spec_.global_ranks; }
  std::chrono::milliseconds default_timeout() const { return spec_.timeout; }
  // What the group was made from (a decorator over this group is made from the same).
  const GroupSpec& spec() const { return spec_; }
  // Implementation and network, for logs: "gloo tcp eth0", "gloo tcp 127.0.0.1", "in-process".
  virtual std::string transport() const = 0;

  // data[i] <- op over members of data[i]. In place. data: [n]
  virtual void all_reduce(std::span<float> data, ReduceOp op, const OpOptions& o = {}) = 0;
  // The same for `count` elements of `dtype` at `data`. kF32 is all_reduce above; kBf16 only
  // where the group sums bf16 itself (NCCL): the host groups throw std::invalid_argument
  // (their callers widen to fp32 first, engine/parallel/group.cpp).
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceOp op, const OpOptions& o = {});
  virtual bool sums(DType dtype) const { return dtype == DType::kF32; }
  // out <- chunk `rank()` of (op over members of in). in: [size() * n], out: [n]
  virtual void reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op,
                              const OpOptions& o = {}) = 0;
  // out[r*n .. (r+1)*n) <- in of member r. in: [n], out: [size() * n]
  virtual void all_gather(std::span<float> out, std::span<const float> in, const OpOptions& o = {}) = 0;
  // data <- data of member `root`. data: [n]
  virtual void broadcast(std::span<float> data, int root, const OpOptions& o = {}) = 0;
  // All-to-all: block q of this member's `in` goes to member q, and block q of `out` comes
  // from member q (its block rank()). in, out: [size() * n], block q at [q n, (q + 1) n).
  // Not in place.
  void all_to_all(std::span<float> out, std::span<const float> in, const OpOptions& o = {});
  // The variable-size form (an expert-parallel token exchange): this member sends
  // in_counts[q] elements to member q, the blocks one after another in member order in `in`,
  // and receives out_counts[q] elements from member q, in member order in `out`; elements of
  // `dtype` (bytes are only copied, so bf16 works on every group). in_counts and out_counts:
  // [size()]; member q's in_counts[rank()] must equal this member's out_counts[q] (exchange
  // the counts first, e.g. with all_to_all of one count per member): the in-process group
  // checks it and throws CommError naming the member, Gloo fails that pair's transfer or times
  // out, NCCL cannot tell. A zero count moves nothing. Not in place.
  virtual void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in,
                            std::span<const size_t> in_counts, DType dtype, const OpOptions& o = {}) = 0;
  void all_to_all_v(std::span<float> out, std::span<const size_t> out_counts, std::span<const float> in,
                    std::span<const size_t> in_counts, const OpOptions& o = {});
  // Tagged point-to-point with rendezvous semantics (as NCCL): a send completes only once
  // the peer has posted the matching recv, so two ranks that both send first deadlock
  // unless they post both halves together in one send_recv (like ncclGroupStart/End or
  // Megatron's batch_isend_irecv). Messages between one pair with one tag match in order.
  // send_recv posts every op, then waits for all of them.
  virtual void send_recv(std::span<const P2POp> ops, const OpOptions& o = {}) = 0;
  void send(std::span<const float> data, int peer, uint32_t tag, const OpOptions& o = {});
  void recv(std::span<float> data, int peer, uint32_t tag, const OpOptions& o = {});
  // Returns once every member has entered.
  virtual void barrier(const OpOptions& o = {}) = 0;
  // After a failure elsewhere in this process: stops whatever the group still runs for this
  // rank (an NCCL group aborts its communicator, so its kernels stop spinning against a dead
  // peer and freeing device memory no longer waits for them; a Gloo group fails the wait of
  // an operation another thread runs on it at once). The group is broken afterwards. Safe to
  // call from any thread, also while an operation runs. The in-process group has nothing to stop.
  virtual void abort() noexcept {}

 protected:
  explicit ProcessGroup(GroupSpec spec);
  std::chrono::milliseconds timeout_of(const OpOptions& o) const {
    return o.timeout.count() > 0 ? o.timeout : spec_.timeout;
  }
  // Throws std::invalid_argument when sizes break the contract above (a programming error).
  void check_sizes(const char* op, size_t out, size_t in, size_t expected_out) const;
  void check_peer(const char* op, int peer) const;
  // all_to_all_v's counts: one per member each (std::invalid_argument otherwise); returns the
  // element offset of each member's block, [size() + 1] (the last: the total), for `counts`.
  std::vector<size_t> block_offsets(const char* op, std::span<const size_t> counts) const;

  GroupSpec spec_;
  int rank_;
};

}  // namespace holmes::comm
