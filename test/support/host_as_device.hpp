// A backend whose memory is host memory that claims to be device memory (is_host() false,
// holds() true for its own allocations), with the CPU kernels: the trainer then takes every
// path a GPU takes (staged collectives, host copies of the shard state) on a machine
// without one, and must give the CPU's results bit for bit.
//
// Its queued copies (download_queued, upload_queued) copy at once, but their host bytes
// count as "unfenced" until a fence made after them is waited for (or synchronize()): a
// group given such a buffer (a send of bytes that on a GPU may not have landed yet, or a
// receive over bytes a copy may still be reading) throws, so a missing fence fails a test.
// Its fences pass only when waited for, or when a later fence of the same queue was (a queue
// runs in order).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/process_group.hpp"
#include "model/backend.hpp"
#include "model/bf16.hpp"
#include "backends/backends.hpp"

namespace holmes::test {

using namespace holmes::backends;

class HostAsDevice final : public device::DeviceMemory {
 public:
  const char* name() const override { return "host-as-device"; }
  void* allocate(size_t bytes) override {
    auto* p = new std::byte[bytes > 0 ? bytes : 1];
    std::lock_guard<std::mutex> lock(mu_);
    blocks_[p] = bytes;
    return p;
  }
  void release(void* p) noexcept override {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.erase(static_cast<std::byte*>(p));
    delete[] static_cast<std::byte*>(p);
  }
  void zero(void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void upload(void* dst, const void* host, size_t bytes) override { std::memcpy(dst, host, bytes); }
  void download(void* host, const void* src, size_t bytes) override { std::memcpy(host, src, bytes); }
  void synchronize() override {
    std::lock_guard<std::mutex> lock(mu_);
    queued_.clear();
  }
  void download_queued(void* pinned, const void* src, size_t bytes) override {
    std::memcpy(pinned, src, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back({static_cast<const std::byte*>(pinned), bytes, true, ++seq_});
  }
  void upload_queued(void* dst, const void* pinned, size_t bytes) override {
    std::memcpy(dst, pinned, bytes);
    std::lock_guard<std::mutex> lock(mu_);
    queued_.push_back({static_cast<const std::byte*>(pinned), bytes, false, ++seq_});
  }
  std::shared_ptr<device::QueueFence> fence_on(void* queue) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++fences_;
    return std::make_shared<Fence>(*this, seq_, queue);
  }
  // Timed fences say 0.25 ms passed between any two: a span of queued communication.
  std::shared_ptr<device::QueueFence> timed_fence_on(void* queue) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++timed_fences_;
    return std::make_shared<Fence>(*this, seq_, queue, true);
  }
  long timed_fences() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timed_fences_;
  }
  static constexpr double kSpanMs = 0.25;
  // Fences of `from` that queue `to` was made to wait for (QueueFence::hold).
  long holds(void* from, void* to) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = holds_.find({from, to});
    return it == holds_.end() ? 0 : it->second;
  }
  // True when host bytes [p, p + bytes) overlap a queued copy no waited fence covers: the
  // target of a download, or the source of an upload.
  bool unfenced(const void* p, size_t bytes, bool download_target) const {
    const auto* b = static_cast<const std::byte*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    for (const Queued& q : queued_)
      if (q.download == download_target && b < q.host + q.bytes && q.host < b + bytes) return true;
    return false;
  }
  long fences_made() const { return fences_; }
  // Stand-in queues (never dereferenced): the compute queue and the side queue, so tests can
  // tell which one an operation was given; order() counts its calls.
  void* stream() const override { return const_cast<char*>(&compute_queue_); }
  void* side_stream() override { return &side_queue_; }
  void order(void* from, void* to) override {
    if (from == stream() && to == &side_queue_) ++to_side_;
    if (from == &side_queue_ && to == stream()) ++to_compute_;
  }
  long orders_to_side() const { return to_side_; }
  long orders_to_compute() const { return to_compute_; }
  bool holds(const void* p) const override {
    const auto* b = static_cast<const std::byte*>(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.upper_bound(const_cast<std::byte*>(b));
    if (it == blocks_.begin()) return false;
    --it;
    return b >= it->first && b < it->first + std::max<size_t>(it->second, 1);
  }

 private:
  struct Queued {
    const std::byte* host;
    size_t bytes;
    bool download;
    long seq;
  };
  class Fence final : public device::QueueFence {
   public:
    Fence(HostAsDevice& mem, long seq, void* queue, bool timed = false)
        : mem_(mem), seq_(seq), queue_(queue), timed_(timed) {}
    double ms_since(device::QueueFence& /*start*/) override { return timed_ ? kSpanMs : 0; }
    void wait() override {
      std::lock_guard<std::mutex> lock(mem_.mu_);
      std::erase_if(mem_.queued_, [&](const Queued& q) { return q.seq <= seq_; });
      long& upto = mem_.waited_[queue_];
      upto = std::max(upto, seq_);
      passed_ = true;
    }
    bool done() override {
      std::lock_guard<std::mutex> lock(mem_.mu_);
      auto it = mem_.waited_.find(queue_);
      return passed_ || (it != mem_.waited_.end() && it->second >= seq_);
    }
    void hold(void* queue) override {
      std::lock_guard<std::mutex> lock(mem_.mu_);
      ++mem_.holds_[{queue_, queue}];
    }

   private:
    HostAsDevice& mem_;
    long seq_;
    void* queue_;
    bool timed_;
    std::atomic<bool> passed_{false};
  };

  mutable std::mutex mu_;
  std::vector<Queued> queued_;
  long seq_ = 0, fences_ = 0, timed_fences_ = 0;
  std::map<std::pair<void*, void*>, long> holds_;
  std::map<void*, long> waited_;  // per queue: the newest fence waited for
  std::map<std::byte*, size_t> blocks_;
  char compute_queue_ = 0, side_queue_ = 0;
  long to_side_ = 0, to_compute_ = 0;
};

// A group between the trainer and a real group that takes one kind of memory only, and
// records what it was given:
// - HostOnlyGroup refuses device buffers: it proves that every buffer of the model was
//   staged (a missed one throws, naming the op);
// - DeviceOnlyGroup refuses host buffers (as an NCCL group does), so the trainer's host
//   buffers (loss and norm sums) must go to the host groups.
// Each records the queue every kind of operation was given and counts the buffers it took.
template <bool kDevice>
class MemoryCheckedGroup final : public comm::ProcessGroup {
 public:
  MemoryCheckedGroup(std::unique_ptr<comm::ProcessGroup> inner, const device::DeviceMemory& mem)
      : ProcessGroup(inner->spec()), inner_(std::move(inner)), mem_(mem) {}
  std::string transport() const override { return (kDevice ? "device-only " : "") + inner_->transport(); }
  void all_reduce(std::span<float> d, comm::ReduceOp op, const comm::OpOptions& o = {}) override {
    check("all_reduce", o, {d.data()});
    inner_->all_reduce(d, op, o);
  }
  // As NCCL, the device kind sums bf16 itself (here: widened, summed, rounded once).
  void all_reduce(void* data, size_t count, comm::DType dtype, comm::ReduceOp op,
                  const comm::OpOptions& o = {}) override {
    if (dtype == comm::DType::kF32) return all_reduce(std::span<float>(static_cast<float*>(data), count), op, o);
    if (!kDevice) return ProcessGroup::all_reduce(data, count, dtype, op, o);  // refuses, as Gloo does
    check("all_reduce", o, {data});
    auto* h = static_cast<model::bf16*>(data);
    std::vector<float> wide(count);
    for (size_t i = 0; i < count; ++i) wide[i] = model::bf16_to_float(h[i]);
    inner_->all_reduce(std::span<float>(wide), op, o);
    for (size_t i = 0; i < count; ++i) h[i] = model::float_to_bf16(wide[i]);
  }
  bool sums(comm::DType dtype) const override { return kDevice || dtype == comm::DType::kF32; }
  void reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                      const comm::OpOptions& o = {}) override {
    check("reduce_scatter", o, {out.data(), in.data()});
    inner_->reduce_scatter(out, in, op, o);
  }
  void all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o = {}) override {
    check("all_gather", o, {out.data(), in.data()});
    inner_->all_gather(out, in, o);
  }
  void broadcast(std::span<float> d, int root, const comm::OpOptions& o = {}) override {
    check("broadcast", o, {d.data()});
    inner_->broadcast(d, root, o);
  }
  void send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o = {}) override {
    std::vector<const void*> buffers;
    for (const auto& op : ops) buffers.push_back(op.data.data());
    check("send_recv", o, buffers);
    // Host bytes a queued copy still writes (a send) or reads (a receive) on a real device.
    if (const auto* fake = dynamic_cast<const HostAsDevice*>(&mem_))
      for (const auto& op : ops)
        if (fake->unfenced(op.data.data(), op.data.size_bytes(), op.kind == comm::P2POp::kSend))
          throw std::logic_error(std::string("send_recv on group ") + name() + ": a " +
                                 (op.kind == comm::P2POp::kSend ? "send of bytes a queued download has not landed"
                                                                : "receive into bytes a queued upload still reads") +
                                 " (no fence waited for)");
    inner_->send_recv(ops, o);
  }
  using comm::ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    comm::DType dtype, const comm::OpOptions& o = {}) override {
    check("all_to_all_v", o, {out, in});
    inner_->all_to_all_v(out, out_counts, in, in_counts, dtype, o);
  }
  void barrier(const comm::OpOptions& o = {}) override { inner_->barrier(o); }

  long calls() const { return calls_; }  // buffers taken (send_recv: one per half)
  void* last_stream() const { return last_stream_; }
  // The queues each kind of operation was given ("reduce_scatter", ...), and how often.
  const std::map<std::string, std::set<void*>>& streams() const { return streams_; }
  long count(const std::string& op) const {
    auto it = counts_.find(op);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  void check(const char* op, const comm::OpOptions& o, std::span<const void* const> buffers) {
    last_stream_ = o.stream;
    streams_[op].insert(o.stream);
    ++counts_[op];
    for (const void* p : buffers) {
      if (kDevice && p != nullptr && !mem_.holds(p))
        throw std::logic_error(std::string("a host buffer reached device group ") + name() + " in " + op);
      if (!kDevice && mem_.holds(p))
        throw std::logic_error(std::string("a device buffer reached host group ") + name() + " in " + op);
      ++calls_;
    }
  }
  void check(const char* op, const comm::OpOptions& o, std::initializer_list<const void*> buffers) {
    check(op, o, std::span<const void* const>(buffers.begin(), buffers.size()));
  }
  std::unique_ptr<comm::ProcessGroup> inner_;
  const device::DeviceMemory& mem_;
  long calls_ = 0;
  void* last_stream_ = nullptr;
  std::map<std::string, std::set<void*>> streams_;
  std::map<std::string, long> counts_;
};
using HostOnlyGroup = MemoryCheckedGroup<false>;
using DeviceOnlyGroup = MemoryCheckedGroup<true>;

inline model::Backend host_as_device_backend() {
  model::Backend b = holmes::backends::make_backend(holmes::backends::Device::kCpu);
  b.memory = std::make_unique<HostAsDevice>();
  return b;
}

}  // namespace holmes::test
