#include "comm/nccl/nccl_group.hpp"

#include "comm/nccl/nccl_driver.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "comm/errors.hpp"

namespace holmes::comm {

namespace {

using Clock = std::chrono::steady_clock;

ncclRedOp_t to_nccl(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(const std::shared_ptr<Store>& store, GroupSpec spec, std::string net, const NcclDriver& driver)
      : ProcessGroup(std::move(spec)),
        store_(store, "pg/" + spec_.name + "/"),
        net_(std::move(net)),
        api_(driver.nccl),
        cuda_(driver.cuda) {
    connect();
    // The watchdog queries events of this group's GPU: on any other current device the
    // runtime would make a context there (on GPU 0 for every rank of a node).
    if (cuda_.get_device(&device_) != cudaSuccess) device_ = 0;
    watchdog_ = std::thread([this] { watch(); });
  }
  ~NcclGroup() override { close(); }

  std::string transport() const override { return net_.empty() ? "nccl (node-local)" : "nccl " + net_; }

  void all_reduce(std::span<float> data, ReduceOp op, const OpOptions& o) override {
    all_reduce(data.data(), data.size(), DType::kF32, op, o);
  }

  // bf16 natively: half the bytes of fp32 on the wire (tensor-parallel sums of bf16 runs).
  void all_reduce(void* data, size_t count, DType dtype, ReduceOp op, const OpOptions& o) override {
    const ncclDataType_t t = dtype == DType::kBf16 ? ncclBfloat16 : ncclFloat32;
    enqueue("all_reduce", o, [&](cudaStream_t s) {
      return api_->all_reduce(data, data, count, t, to_nccl(op), comm_, s);
    });
  }
  bool sums(DType) const override { return true; }

  void reduce_scatter(std::span<float> out, std::span<const float> in, ReduceOp op, const OpOptions& o) override {
    check_sizes("reduce_scatter", out.size() * size(), in.size(), in.size());
    enqueue("reduce_scatter", o, [&](cudaStream_t s) {
      return api_->reduce_scatter(in.data(), out.data(), out.size(), ncclFloat32, to_nccl(op), comm_, s);
    });
  }

  void all_gather(std::span<float> out, std::span<const float> in, const OpOptions& o) override {
    check_sizes("all_gather", out.size(), in.size(), in.size() * size());
    enqueue("all_gather", o, [&](cudaStream_t s) {
      return api_->all_gather(in.data(), out.data(), in.size(), ncclFloat32, comm_, s);
    });
  }

  void broadcast(std::span<float> data, int root, const OpOptions& o) override {
    if (root < 0 || root >= size())
      throw std::invalid_argument(fmt::format("broadcast on group '{}': root {} out of [0, {})", name(), root, size()));
    enqueue("broadcast", o, [&](cudaStream_t s) {
      return api_->broadcast(data.data(), data.data(), data.size(), ncclFloat32, root, comm_, s);
    });
  }

  // One ncclGroupStart/End around all halves, so paired sends and receives cannot deadlock.
  // NCCL matches by order, not by tag: tags are not sent.
  void send_recv(std::span<const P2POp> ops, const OpOptions& o) override {
    for (const auto& x : ops) check_peer("send_recv", x.peer);
    enqueue("send_recv", o, [&](cudaStream_t s) {
      ncclResult_t r = api_->group_start();
      for (const auto& x : ops) {
        if (r != ncclSuccess) break;
        r = x.kind == P2POp::kSend ? api_->send(x.data.data(), x.data.size(), ncclFloat32, x.peer, comm_, s)
                                   : api_->recv(x.data.data(), x.data.size(), ncclFloat32, x.peer, comm_, s);
      }
      const ncclResult_t end = api_->group_end();
      return r != ncclSuccess ? r : end;
    });
  }

  // Grouped sends and receives, one pair per member (this member's own block too: NCCL copies
  // it), between one ncclGroupStart/End; zero counts post nothing.
  using ProcessGroup::all_to_all_v;
  void all_to_all_v(void* out, std::span<const size_t> out_counts, const void* in, std::span<const size_t> in_counts,
                    DType dtype, const OpOptions& o) override {
    const std::vector<size_t> out_at = block_offsets("all_to_all_v", out_counts);
    const std::vector<size_t> in_at = block_offsets("all_to_all_v", in_counts);
    const ncclDataType_t t = dtype == DType::kBf16 ? ncclBfloat16 : ncclFloat32;
    const size_t es = dtype_bytes(dtype);
    auto* dst = static_cast<std::byte*>(out);
    const auto* src = static_cast<const std::byte*>(in);
    enqueue("all_to_all_v", o, [&](cudaStream_t s) {
      ncclResult_t r = api_->group_start();
      for (int q = 0; q < size() && r == ncclSuccess; ++q) {
        if (in_counts[q] > 0) r = api_->send(src + in_at[q] * es, in_counts[q], t, q, comm_, s);
        if (r == ncclSuccess && out_counts[q] > 0) r = api_->recv(dst + out_at[q] * es, out_counts[q], t, q, comm_, s);
      }
      const ncclResult_t end = api_->group_end();
      return r != ncclSuccess ? r : end;
    });
  }

  // An all-reduce of one float, then a wait (bounded by the time-out) until it completed.
  // Without a stream of the caller's, on the group's own (never the legacy default stream,
  // which would wait for and hold up every other stream of the process).
  void barrier(const OpOptions& o) override {
    OpOptions mine = o;
    if (mine.stream == nullptr) mine.stream = own_stream_;
    enqueue("barrier", mine, [&](cudaStream_t s) {
      return api_->all_reduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, s);
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_.empty() || !failure_.empty(); });
    if (!failure_.empty()) throw error("barrier", failure_);
  }

  void abort() noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    abort_locked("aborted by this rank after a failure elsewhere in it");
  }

 private:
  struct Pending {
    cudaEvent_t done;
    std::string op;
    Clock::time_point enqueued;
    std::chrono::milliseconds timeout;
  };

  CommError error(const char* op, const std::string& detail, int peer = -1) const {
    return CommError(CommError::Where{op, name(), rank(), global_rank_of(rank()), peer,
                                      peer >= 0 ? global_rank_of(peer) : -1},
                     detail);
  }

  // NCCL's words for a result, with its last error message when it has one.
  std::string why(ncclResult_t r) const {
    std::string out = api_->get_error_string(r);
    const char* last = api_->get_last_error(comm_);
    if (last && *last) out += fmt::format(" ({})", last);
    return out;
  }

  void connect() {
    if (net_ != "IB" && net_ != "Socket" && !net_.empty())
      throw std::invalid_argument(fmt::format("make_nccl_group '{}': net '{}' is neither IB, Socket nor empty", name(),
                                              net_));
    ncclUniqueId id;
    if (rank() == 0) {
      if (ncclResult_t r = api_->get_unique_id(&id); r != ncclSuccess)
        throw error("connect", "ncclGetUniqueId failed: " + why(r));
      store_.set("nccl_id", Bytes(id.internal, id.internal + sizeof(id.internal)));
    } else {
      Bytes b;
      try {
        b = store_.get("nccl_id", spec_.timeout);
      } catch (const StoreError& e) {
        throw error("connect", fmt::format("group rank 0 never published the NCCL unique id: {}", e.what()), 0);
      }
      if (b.size() != sizeof(id.internal))
        throw error("connect", fmt::format("the NCCL unique id in the store has {} bytes, expected {}", b.size(),
                                           sizeof(id.internal)), 0);
      std::memcpy(id.internal, b.data(), b.size());
    }
    store_.set(fmt::format("joined/{}", rank()), {'1'});
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // init and operations return at once and can be aborted
    if (!net_.empty()) config.netName = net_.c_str();  // empty: a node-local group, NCCL's own choice
    config.commName = spec_.name.c_str();
    const auto deadline = Clock::now() + spec_.timeout;
    ncclResult_t r = api_->comm_init_rank_config(&comm_, size(), id, rank(), &config);
    if (r == ncclInProgress || r == ncclSuccess) r = poll_ready(deadline);
    if (r == ncclSuccess && cuda_.device_malloc(reinterpret_cast<void**>(&scratch_), sizeof(float)) != cudaSuccess)
      r = ncclUnhandledCudaError;
    if (r == ncclSuccess && cuda_.stream_create(&own_stream_, cudaStreamNonBlocking) != cudaSuccess)
      r = ncclUnhandledCudaError;
    if (r == ncclSuccess) return;
    const std::string what = r == ncclInProgress ? fmt::format("not connected within {} ms", spec_.timeout.count())
                                                 : "ncclCommInitRankConfig failed: " + why(r);
    if (comm_) api_->comm_abort(comm_);
    comm_ = nullptr;
    const std::vector<int> absent = not_joined();
    if (!absent.empty())
      throw error("connect", fmt::format("{}; member(s) [{}] never joined (net {})", what, fmt::join(absent, ","), net_),
                  absent.front());
    throw error("connect", fmt::format("{} (net {}; every member joined)", what, net_));
  }

  // Waits for a non-blocking call's communicator state to leave ncclInProgress.
  ncclResult_t poll_ready(Clock::time_point deadline) {
    for (int attempt = 0;; ++attempt) {
      ncclResult_t state = ncclSuccess;
      if (ncclResult_t r = api_->comm_get_async_error(comm_, &state); r != ncclSuccess) return r;
      if (state != ncclInProgress || Clock::now() > deadline) return state;
      const auto pause = poll_pause(attempt);
      if (pause.count() == 0) std::this_thread::yield();
      else std::this_thread::sleep_for(pause);
    }
  }

  std::vector<int> not_joined() {
    std::vector<std::string> keys;
    for (int q = 0; q < size(); ++q) keys.push_back(fmt::format("joined/{}", q));
    std::vector<int> out;
    try {
      for (const auto& k : store_.missing(keys)) out.push_back(std::stoi(k.substr(k.rfind('/') + 1)));
    } catch (const std::exception&) {  // the store is gone: nothing more to say
    }
    return out;
  }

  // Enqueues `call` on the stream of `o` and hands the operation to the watchdog.
  template <class Call>
  void enqueue(const char* op, const OpOptions& o, Call call) {
    const auto timeout = timeout_of(o);
    const auto enqueued = Clock::now();
    const auto deadline = enqueued + timeout;
    auto stream = static_cast<cudaStream_t>(o.stream);
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.empty()) throw error(op, "group is broken by an earlier failure: " + failure_);
    ncclResult_t r = call(stream);
    if (r == ncclInProgress) r = poll_ready(deadline);
    if (r != ncclSuccess) {
      const std::string what = r == ncclInProgress ? fmt::format("not enqueued within {} ms", timeout.count())
                                                   : fmt::format("NCCL refused it: {}", why(r));
      abort_locked(fmt::format("{} #{}: {}", op, ops_, what));
      throw error(op, failure_);
    }
    cudaEvent_t done = nullptr;
    cudaError_t e = cuda_.event_create(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cuda_.event_record(done, stream);
    if (e != cudaSuccess) {
      if (done) cuda_.event_destroy(done);
      abort_locked(fmt::format("{} #{}: cannot record its completion event: {}", op, ops_, cuda_.error_string(e)));
      throw error(op, failure_);
    }
    pending_.push_back(Pending{done, fmt::format("{} #{}", op, ops_++), enqueued, timeout});
    cv_.notify_all();
  }

  // Called with mu_ held: records the failure and aborts the communicator, which makes the
  // NCCL kernels of every pending operation return.
  void abort_locked(const std::string& what) {
    if (failure_.empty()) failure_ = what;
    if (comm_) api_->comm_abort(comm_);
    comm_ = nullptr;
    for (auto& p : pending_) cuda_.event_destroy(p.done);
    pending_.clear();
    cv_.notify_all();
  }

  // The watchdog: completes pending operations in order, aborts on a time-out or an
  // asynchronous error. Polls every 2 ms (operations are milliseconds long or more). An
  // operation's time-out runs from when the device could start it: its enqueue, or the
  // completion of the one before it (the host may be a whole step ahead of the GPU).
  void watch() {
    cuda_.set_device(device_);
    std::unique_lock<std::mutex> lock(mu_);
    Clock::time_point previous_done = Clock::now();
    while (!stop_) {
      if (comm_) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t asked = api_->comm_get_async_error(comm_, &state);
        if (asked != ncclSuccess)
          abort_locked(fmt::format("cannot ask NCCL for the communicator's state: {}", why(asked)));
        else if (state != ncclSuccess && state != ncclInProgress)
          abort_locked(fmt::format("asynchronous NCCL error: {}", why(state)));
      }
      while (!pending_.empty()) {
        Pending& p = pending_.front();
        const cudaError_t q = cuda_.event_query(p.done);
        if (q == cudaErrorNotReady) {
          if (Clock::now() > std::max(p.enqueued, previous_done) + p.timeout)
            abort_locked(fmt::format("{} did not complete within {} ms (a member is missing, dead or stuck)", p.op,
                                     p.timeout.count()));
          break;
        }
        if (q != cudaSuccess) {
          abort_locked(fmt::format("{}: CUDA error {}", p.op, cuda_.error_string(q)));
          break;
        }
        cuda_.event_destroy(p.done);
        pending_.pop_front();
        previous_done = Clock::now();
        cv_.notify_all();
      }
      cv_.wait_for(lock, std::chrono::milliseconds(2));
    }
  }

  // Waits for the pending operations (bounded by their deadlines, which the watchdog
  // enforces), stops the watchdog, then finalizes the communicator or aborts it.
  void close() noexcept {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return pending_.empty() || !failure_.empty(); });
      stop_ = true;
    }
    cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    if (comm_) {
      ncclResult_t r = api_->comm_finalize(comm_);
      if (r == ncclInProgress || r == ncclSuccess) r = poll_ready(Clock::now() + spec_.timeout);
      if (r == ncclSuccess) api_->comm_destroy(comm_);
      else api_->comm_abort(comm_);
      comm_ = nullptr;
    }
    if (scratch_) cuda_.device_free(scratch_);
    if (own_stream_) cuda_.stream_destroy(own_stream_);
  }

  PrefixStore store_;
  std::string net_;
  const NcclApi* api_;
  CudaCalls cuda_;
  ncclComm_t comm_ = nullptr;
  float* scratch_ = nullptr;  // [1] on the device, for barrier
  cudaStream_t own_stream_ = nullptr;  // barrier's when the caller gives none
  int device_ = 0;            // the GPU current when the group was made
  std::mutex mu_;             // guards everything below and every call on comm_
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::string failure_;  // non-empty once the group is broken
  uint64_t ops_ = 0;
  bool stop_ = false;
  std::thread watchdog_;
};

}  // namespace

std::chrono::microseconds poll_pause(int attempt) {
  if (attempt < kSpinPolls) return std::chrono::microseconds(0);
  const int doublings = std::min(attempt - kSpinPolls, 10);  // 10 us x 2^10 > 10 ms
  return std::min(std::chrono::microseconds(10) * (1 << doublings), std::chrono::microseconds(10'000));
}

NcclDriver nccl_driver() {
  NcclDriver d;
  d.nccl = &nccl();
  d.cuda = CudaCalls{&::cudaEventCreateWithFlags, &::cudaEventRecord, &::cudaEventQuery, &::cudaEventDestroy,
                     static_cast<cudaError_t (*)(void**, size_t)>(&::cudaMalloc), &::cudaFree, &::cudaGetErrorString,
                     &::cudaGetDevice, &::cudaSetDevice, &::cudaStreamCreateWithFlags, &::cudaStreamDestroy};
  return d;
}

std::unique_ptr<ProcessGroup> make_nccl_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const std::string& net, const NcclDriver& driver) {
  return std::make_unique<NcclGroup>(store, std::move(spec), net, driver);
}

std::unique_ptr<ProcessGroup> make_nccl_group(const std::shared_ptr<Store>& store, GroupSpec spec,
                                              const std::string& net) {
  if (net != "IB" && net != "Socket" && !net.empty())  // before loading anything
    throw std::invalid_argument(fmt::format("make_nccl_group '{}': net '{}' is neither IB, Socket nor empty",
                                            spec.name, net));
  return make_nccl_group(store, std::move(spec), net, nccl_driver());
}

}  // namespace holmes::comm
