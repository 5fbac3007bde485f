// One axis of this rank's parallel groups (groups.hpp): the one way the trainer's parts move
// bytes between ranks. A Group takes host buffers and buffers in the backend's memory, each
// with a data type, and was told when it was made (from the plan's transport) how to carry
// them:
//   kHost    the backend's memory is host memory (the CPU): the host group (Gloo, in-process)
//            works on the buffers directly; work beside the compute runs on the group's
//            communication thread.
//   kDevice  an NCCL group of the same members carries device buffers: on the compute queue,
//            or for work beside the compute on the backend's side queue (after what the
//            compute queue holds, landed by a fence). Host buffers go to the host group.
//   kStaged  device buffers over the host group (Gloo across islands, ranks sharing a GPU,
//            parallel.nccl off): each is copied into pinned host memory by a copy queued on the
//            compute queue and fenced, the host group works there (on the communication
//            thread, or at once for a collective in the compute order), and results go back by
//            copies queued when they land. The one staging path: every operation takes it.
// Callers say only what must be ordered: all_reduce runs in the compute order (the host and
// the compute queue see its result afterwards); all_reduce_beside, reduce_scatter, all_gather
// and send_recv run
// beside the compute, starting after what the compute queue holds, and return a Work that is
// landed before the results are read.
//
// Pinned memory is bounded (Options::max_pinned_bytes): when it is all in use, the oldest
// operation is waited for and landed early (its device buffer is only read after its own
// landing, so an early copy changes nothing). Operations run in the order they were posted, so
// waiting for the oldest never waits longer than a synchronous group would have.
//
// Main thread only; the communication thread owns the host group while work is queued, so a
// collective in the compute order first waits for that work (comm/process_group.hpp: one
// thread at a time per group). A Group of one member (default) does nothing, at once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/comm_thread.hpp"
#include "comm/process_group.hpp"
#include "device/device_memory.hpp"
#include "engine/parallel/comm_clock.hpp"

namespace holmes::parallel {

// `count` elements of `dtype` at `data`: host memory or the backend's memory.
struct Buf {
  void* data = nullptr;
  size_t count = 0;
  comm::DType dtype = comm::DType::kF32;
  size_t bytes() const { return count * comm::dtype_bytes(dtype); }
  static Buf f32(const float* p, size_t n) { return {const_cast<float*>(p), n, comm::DType::kF32}; }
};

// One half of a point-to-point transfer (pipeline tensors): matched by peer and tag, in order.
struct Transfer {
  enum Kind { kSend, kRecv } kind = kSend;
  Buf buf;   // bytes() a multiple of 4
  int peer;  // group rank
  uint32_t tag;
};

class Group;

// What an operation beside the compute returns.
class Work {
 public:
  Work() = default;  // nothing pending
  // Before its results are read: waits for them (host groups; the wait counts as
  // communication), or makes the compute queue wait (device groups), and queues the copies of
  // staged results to the device. Rethrows the operation's failure. Later calls do nothing.
  void land();
  // Ready once the operation no longer reads its inputs (a sent buffer may be written again);
  // an invalid future means at once (device and staged groups: later writes queue behind).
  std::shared_future<void> inputs_free() const;
  bool pending() const { return s_ != nullptr; }
  // The results are there (or nothing is pending): land() will not block.
  bool ready() const;

 private:
  friend class Group;
  struct State;
  std::shared_ptr<State> s_;
};

class Group {
 public:
  enum class Mode { kNone, kHost, kDevice, kStaged };
  struct Options {
    size_t max_pinned_bytes = size_t{256} << 20;  // staged: pinned host memory kept at most
  };

  Group() = default;  // one member
  // host (every member, group rank = this rank's coordinate), mem and clock outlive the group;
  // device: an NCCL group of the same members, or null.
  Group(comm::ProcessGroup& host, comm::ProcessGroup* device, device::DeviceMemory& mem, CommClock& clock,
        Options options);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return host_ ? host_->rank() : 0; }
  int size() const { return host_ ? host_->size() : 1; }
  Mode mode() const { return mode_; }
  const std::string& name() const;
  std::string transport() const;  // for logs: "nccl IB (host buffers: gloo tcp eth0)", ...

  // In the compute order, in place: every member's `data` becomes the sum (or max). bf16 is
  // summed by NCCL as NCCL does; elsewhere widened to fp32, summed in the host group's order
  // and rounded once (the same bits under every plan).
  void all_reduce(Buf data, comm::ReduceOp op);
  // Beside the compute, in place (fp32): every member's `data` becomes the sum (or max), the
  // same bits as all_reduce. Nothing may read or write `data` until the Work lands. On a
  // device group it is queued on the side queue behind what was posted there before.
  Work all_reduce_beside(Buf data, comm::ReduceOp op);
  // Beside the compute. out <- chunk rank() of the sum of every member's `in`, where in is
  // zero-padded to size() x out.count (so a bucket dp does not divide needs no copy).
  Work reduce_scatter(Buf out, Buf in, comm::ReduceOp op);
  // Beside the compute. Member r's `in` (at most chunk = ceil(out.count / size()) elements,
  // zero-padded to chunk) lands at out[r * chunk, ...), cut to out.count.
  Work all_gather(Buf out, Buf in);
  // Beside the compute, posted in call order (schedule order, which keeps it deadlock free).
  Work send_recv(std::span<const Transfer> ops);
  // Beside the compute, on the communication thread: `fn` runs a sequence of the host group's
  // operations on host buffers that the caller leaves alone until the Work lands (an exchange
  // that is more than one collective: outer_sync.hpp). Not on a group of one member.
  Work run_host(std::function<void(comm::ProcessGroup&)> fn);
  // Every member has entered (over the host group).
  void barrier();

  // Waits for everything beside the compute; rethrows the first failure.
  void drain();
  // After a failed step: drops what was not started, waits for what runs, forgets the rest.
  void abandon() noexcept;

  // The compute-order sums (all_reduce) this group did since reset_sums(), by message size in
  // bytes as it travels the host group (bf16 widened to fp32): how many and the host time they
  // took, waiting for the other members included. In a step every member must reach a sum after
  // its own compute, so this is what a tensor-parallel sum really costs the step, not what an
  // idle probe sees (calibration: cluster.calibrate). Sums on a device group are queued, not
  // timed on the host: not counted. thread_cpu_s: the calling (training) thread's CPU inside
  // them; process_cpu_s: the whole process's (Gloo's I/O threads serving the sum, and whatever
  // else ran meanwhile): what a CPU quota charges the sums, apart from the passes' CPU.
  struct SumTally {
    int64_t calls = 0;
    double seconds = 0;
    double thread_cpu_s = 0, process_cpu_s = 0;
  };
  const std::map<size_t, SumTally>& sums() const { return sums_; }
  void reset_sums() { sums_.clear(); }

  // Staged: pinned buffers held now, and their bytes (tests).
  size_t pinned_buffers() const { return slots_.size(); }
  size_t pinned_bytes() const { return pinned_bytes_; }

 private:
  struct Slot {
    void* host = nullptr;
    size_t bytes = 0;
    std::shared_ptr<Work::State> owner;  // the operation using it, until free_now()
    bool output = false;                 // receives results (freed once landed and copied)
  };

  bool on_device(const void* p) const;
  comm::CommThread& thread();
  void check_beside(const char* op, std::initializer_list<Buf> bufs) const;
  void host_all_reduce(Buf data, comm::ReduceOp op);  // data in host memory, this thread
  void staged_all_reduce(Buf data, comm::ReduceOp op);
  Work device_reduce_scatter(Buf out, Buf in, comm::ReduceOp op);
  Work device_all_gather(Buf out, Buf in);
  Work side_queued(void* side);  // a Work landed once what the device's side queue holds has run
  // Staged and host operations beside the compute: `run` gets host pointers of `bufs` (the
  // buffers themselves, or their pinned copies: inputs downloaded first) on the thread, and
  // for point-to-point batches what to call once the receives hold their data.
  using Run = std::function<void(std::vector<void*>, std::function<void()>)>;
  Work beside(std::vector<Buf> bufs, std::vector<bool> outputs, Run run, bool p2p_received = false);
  bool free_now(const Slot& s) const;
  friend class Work;
  int take_slot(size_t bytes);
  void land_oldest();
  bool wait_for_upload();  // waits for one landed result's copy to the device; false: none
  void prune_inflight();
  void land(Work::State& s);
  void* device_scratch(size_t slot, size_t bytes);

  comm::ProcessGroup* host_ = nullptr;
  comm::ProcessGroup* device_ = nullptr;
  device::DeviceMemory* mem_ = nullptr;
  CommClock* clock_ = nullptr;
  Options options_;
  Mode mode_ = Mode::kNone;
  std::vector<Slot> slots_;
  size_t pinned_bytes_ = 0;
  std::deque<std::shared_ptr<Work::State>> inflight_;  // staged, oldest first
  std::map<size_t, SumTally> sums_;                    // compute-order sums, by wire bytes
  std::vector<float> wide_;                            // bf16 sums widened, this thread only
  std::vector<float> scratch_in_, scratch_out_;        // host padding, communication thread only
  device::DeviceArray<std::byte> dev_scratch_[2];      // device padding, side queue only
  std::unique_ptr<comm::CommThread> thread_;           // last: stops before what it uses goes
};

const char* to_string(Group::Mode mode);

}  // namespace holmes::parallel
