#include "engine/parallel/group.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "engine/parallel/cpu_clock.hpp"
#include "model/bf16.hpp"

namespace holmes::parallel {

// One operation beside the compute, as its Work and the group's pinned slots see it.
struct Work::State {
  Group* group = nullptr;
  std::shared_future<void> results;   // the thread wrote the results (a batch's receives)
  std::shared_future<void> finished;  // the thread's part ended (inputs no longer read)
  std::shared_future<void> inputs;    // Work::inputs_free
  std::shared_ptr<device::QueueFence> fence;  // device: the end of the operation on the side queue
  struct Upload {
    void* device;
    const void* host;
    size_t bytes;
  };
  std::vector<Upload> uploads;                   // staged: results to copy to the device
  std::shared_ptr<device::QueueFence> uploaded;  // after those copies
  bool landed = false;
};

namespace {

bool ready(const std::shared_future<void>& f) {
  return !f.valid() || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

void Work::land() {
  if (s_ && !s_->landed) s_->group->land(*s_);
}

bool Work::ready() const { return !s_ || s_->landed || parallel::ready(s_->results); }

std::shared_future<void> Work::inputs_free() const { return s_ ? s_->inputs : std::shared_future<void>{}; }

const char* to_string(Group::Mode mode) {
  switch (mode) {
    case Group::Mode::kNone: return "one member";
    case Group::Mode::kHost: return "host memory, communication thread";
    case Group::Mode::kDevice: return "device group";
    case Group::Mode::kStaged: return "staged through pinned host memory";
  }
  return "?";
}

Group::Group(comm::ProcessGroup& host, comm::ProcessGroup* device, device::DeviceMemory& mem, CommClock& clock,
             Options options)
    : host_(&host), device_(device), mem_(&mem), clock_(&clock), options_(options),
      mode_(device != nullptr ? Mode::kDevice : mem.is_host() ? Mode::kHost : Mode::kStaged) {
  if (device != nullptr && (device->size() != host.size() || device->rank() != host.rank()))
    throw std::invalid_argument(fmt::format("Group '{}': the device group is rank {} of {}, the host group {} of {}",
                                            host.name(), device->rank(), device->size(), host.rank(), host.size()));
}

Group::~Group() {
  abandon();
  for (Slot& s : slots_) mem_->release_pinned(s.host);
}

const std::string& Group::name() const {
  static const std::string none = "(one member)";
  return host_ ? host_->name() : none;
}

std::string Group::transport() const {
  switch (mode_) {
    case Mode::kNone: return "none";
    case Mode::kHost: return host_->transport();
    case Mode::kDevice: return device_->transport() + " (host buffers: " + host_->transport() + ")";
    case Mode::kStaged: return host_->transport() + ", staged through pinned host memory";
  }
  return "?";
}

bool Group::on_device(const void* p) const { return p != nullptr && mem_->holds(p); }

comm::CommThread& Group::thread() {
  if (!thread_) {
    thread_ = std::make_unique<comm::CommThread>();
    // Its copies and kernels act on this rank's GPU, not device 0 (a failure comes with the first drain).
    thread_->submit([mem = mem_] { mem->bind_thread(); });
  }
  return *thread_;
}

// ---- in the compute order ----

void Group::host_all_reduce(Buf data, comm::ReduceOp op) {
  if (data.dtype == comm::DType::kF32) return host_->all_reduce({static_cast<float*>(data.data), data.count}, op);
  // bf16 through a group that sums floats: widened (exactly), summed in fp32, rounded once.
  auto* h = static_cast<model::bf16*>(data.data);
  wide_.resize(data.count);
  for (size_t i = 0; i < data.count; ++i) wide_[i] = model::bf16_to_float(h[i]);
  host_->all_reduce(std::span<float>(wide_.data(), data.count), op);
  for (size_t i = 0; i < data.count; ++i) h[i] = model::float_to_bf16(wide_[i]);
}

void Group::all_reduce(Buf data, comm::ReduceOp op) {
  if (mode_ == Mode::kNone || data.count == 0) return;
  if (on_device(data.data) && mode_ == Mode::kDevice) {
    if (!device_->sums(data.dtype))
      throw std::logic_error(fmt::format("Group '{}': device group {} does not sum {}", name(), device_->transport(),
                                         dtype_name(data.dtype)));
    void* queue = mem_->stream();
    clock_->time_queued(*mem_, queue, [&] { device_->all_reduce(data.data, data.count, data.dtype, op, {.stream = queue}); });
    return;
  }
  if (thread_) clock_->time([&] { thread_->drain(); });  // the host group is this thread's again
  const double thread0 = thread_cpu_s(), process0 = process_cpu_ms();
  const double seconds = on_device(data.data) ? clock_->time([&] { staged_all_reduce(data, op); })
                                              : clock_->time([&] { host_all_reduce(data, op); });
  SumTally& t = sums_[data.count * sizeof(float)];  // the host group sums fp32
  ++t.calls;
  t.seconds += seconds;
  t.thread_cpu_s += thread_cpu_s() - thread0;
  t.process_cpu_s += 1e-3 * (process_cpu_ms() - process0);
}

void Group::staged_all_reduce(Buf data, comm::ReduceOp op) {
  auto st = std::make_shared<Work::State>();
  st->group = this;
  const int k = take_slot(data.bytes());
  Slot& s = slots_[k];
  s.owner = st;
  s.output = true;
  mem_->download_queued(s.host, data.data, data.bytes());
  if (auto copied = mem_->fence()) copied->wait();  // the kernels that wrote `data` ran
  host_all_reduce({s.host, data.count, data.dtype}, op);
  mem_->upload_queued(data.data, s.host, data.bytes());
  st->uploaded = mem_->fence();  // the slot is free again once the copy passed
  st->landed = true;
}

// ---- beside the compute ----

void Group::check_beside(const char* op, std::initializer_list<Buf> bufs) const {
  if (mode_ == Mode::kNone) throw std::logic_error(fmt::format("Group: {} on a group of one member", op));
  for (const Buf& b : bufs) {
    if (b.dtype != comm::DType::kF32)
      throw std::invalid_argument(fmt::format("Group '{}': {} of {} elements (fp32 only)", name(), op,
                                              dtype_name(b.dtype)));
    if (mode_ != Mode::kHost && !on_device(b.data) && b.count > 0)
      throw std::logic_error(fmt::format("Group '{}': {} of a host buffer on a {} group (backend memory only)", name(),
                                         op, to_string(mode_)));
  }
}

Work Group::all_reduce_beside(Buf data, comm::ReduceOp op) {
  check_beside("all_reduce_beside", {data});
  if (mode_ == Mode::kDevice) {
    void* side = mem_->side_stream();
    mem_->order(mem_->stream(), side);  // after the kernels that wrote `data`
    device_->all_reduce(data.data, data.count, data.dtype, op, {.stream = side});
    return side_queued(side);
  }
  // Staged: `data` is read (downloaded now) and written (uploaded when landed), two slots;
  // on host memory both are `data` itself. The host group sums as all_reduce's does.
  const size_t n = data.count;
  return beside({data, data}, {false, true}, [this, n, op](std::vector<void*> p, auto) {
    if (p[1] != p[0]) std::memcpy(p[1], p[0], n * sizeof(float));
    host_->all_reduce({static_cast<float*>(p[1]), n}, op);
  });
}

Work Group::reduce_scatter(Buf out, Buf in, comm::ReduceOp op) {
  check_beside("reduce_scatter", {out, in});
  const size_t chunk = out.count, n = in.count, padded = chunk * static_cast<size_t>(size());
  if (n > padded)
    throw std::invalid_argument(fmt::format("Group '{}': reduce_scatter of {} elements into chunks of {} x {}", name(),
                                            n, chunk, size()));
  if (mode_ == Mode::kDevice) return device_reduce_scatter(out, in, op);
  return beside({in, out}, {false, true}, [this, chunk, n, padded, op](std::vector<void*> p, auto) {
    const float* src = static_cast<const float*>(p[0]);
    if (n != padded) {  // zero tail up to chunk x size
      scratch_in_.assign(padded, 0.0f);
      std::memcpy(scratch_in_.data(), src, n * sizeof(float));
      src = scratch_in_.data();
    }
    host_->reduce_scatter({static_cast<float*>(p[1]), chunk}, {src, padded}, op);
  });
}

Work Group::all_gather(Buf out, Buf in) {
  check_beside("all_gather", {out, in});
  const size_t members = static_cast<size_t>(size());
  const size_t chunk = (out.count + members - 1) / members, whole = chunk * members, n = in.count;
  if (n > chunk)
    throw std::invalid_argument(fmt::format("Group '{}': all_gather of {} elements into chunks of {}", name(), n, chunk));
  if (mode_ == Mode::kDevice) return device_all_gather(out, in);
  const size_t out_n = out.count;
  return beside({in, out}, {false, true}, [this, chunk, whole, n, out_n](std::vector<void*> p, auto) {
    // Always a copy: `in` may lie inside `out` (a rank's own part of a bucket), and a group's
    // all-gather may not be given overlapping buffers.
    scratch_in_.assign(chunk, 0.0f);
    std::memcpy(scratch_in_.data(), p[0], n * sizeof(float));
    const float* src = scratch_in_.data();
    float* dst = static_cast<float*>(p[1]);
    if (out_n != whole) {
      scratch_out_.resize(whole);
      dst = scratch_out_.data();
    }
    host_->all_gather({dst, whole}, {src, chunk});
    if (dst != p[1]) std::memcpy(p[1], dst, out_n * sizeof(float));
  });
}

Work Group::send_recv(std::span<const Transfer> ops) {
  if (ops.empty()) return {};
  if (mode_ == Mode::kNone) throw std::logic_error("Group: send_recv on a group of one member");
  std::vector<Buf> bufs;
  std::vector<bool> outputs;
  std::vector<comm::P2POp> p2p;
  for (const Transfer& t : ops) {
    if (t.buf.bytes() % sizeof(float) != 0)
      throw std::invalid_argument(fmt::format("Group '{}': a transfer of {} bytes (whole 4-byte words only)", name(),
                                              t.buf.bytes()));
    bufs.push_back(t.buf);
    outputs.push_back(t.kind == Transfer::kRecv);
    p2p.push_back({t.kind == Transfer::kSend ? comm::P2POp::kSend : comm::P2POp::kRecv,
                   {static_cast<float*>(t.buf.data), t.buf.bytes() / sizeof(float)}, t.peer, t.tag});
  }
  if (mode_ == Mode::kDevice) {
    // On the compute queue, which orders it with the kernels that write and read the buffers.
    void* queue = mem_->stream();
    clock_->time_queued(*mem_, queue, [&] { device_->send_recv(p2p, {.stream = queue}); });
    return {};
  }
  return beside(std::move(bufs), std::move(outputs),
                [this, p2p](std::vector<void*> p, std::function<void()> on_received) {
                  std::vector<comm::P2POp> batch = p2p;
                  for (size_t i = 0; i < batch.size(); ++i) batch[i].data = {static_cast<float*>(p[i]), batch[i].data.size()};
                  host_->send_recv(batch, {.on_received = std::move(on_received)});
                },
                /*p2p_received=*/true);
}

Work Group::run_host(std::function<void(comm::ProcessGroup&)> fn) {
  if (mode_ == Mode::kNone) throw std::logic_error("Group: run_host on a group of one member");
  return beside({}, {}, [this, fn = std::move(fn)](std::vector<void*>, std::function<void()>) { fn(*host_); });
}

Work Group::beside(std::vector<Buf> bufs, std::vector<bool> outputs, Run run, bool p2p_received) {
  prune_inflight();
  auto st = std::make_shared<Work::State>();
  st->group = this;
  std::vector<void*> ptrs(bufs.size());
  bool downloads = false;
  for (size_t i = 0; i < bufs.size(); ++i) {
    ptrs[i] = bufs[i].data;
    if (mode_ != Mode::kStaged || !on_device(bufs[i].data) || bufs[i].count == 0) continue;
    const int k = take_slot(bufs[i].bytes());
    Slot& s = slots_[k];
    s.owner = st;
    s.output = outputs[i];
    ptrs[i] = s.host;
    if (outputs[i]) {
      st->uploads.push_back({bufs[i].data, s.host, bufs[i].bytes()});
    } else {  // after the kernels that wrote it, on the compute queue; the device buffer is free at once
      mem_->download_queued(s.host, bufs[i].data, bufs[i].bytes());
      downloads = true;
    }
  }
  std::shared_ptr<device::QueueFence> copied = downloads ? mem_->fence() : nullptr;
  if (p2p_received) {
    // The receives are handed on as soon as they landed, while sends of the same batch may
    // still be on the wire (a slow cross-island link).
    auto received = std::make_shared<std::promise<void>>();
    st->results = received->get_future().share();
    st->finished = thread().submit([run, ptrs, copied, received] {
      bool told = false;
      try {
        if (copied) copied->wait();
        run(ptrs, [&] {
          told = true;
          received->set_value();
        });
      } catch (...) {
        if (!told) received->set_exception(std::current_exception());
        throw;
      }
      if (!told) received->set_value();  // a batch of sends only
    });
  } else {
    st->finished = thread().submit([run, ptrs, copied] {
      if (copied) copied->wait();
      run(ptrs, {});
    });
    st->results = st->finished;
  }
  if (mode_ == Mode::kHost) st->inputs = st->finished;  // the thread reads the caller's buffers
  else inflight_.push_back(st);
  Work w;
  w.s_ = std::move(st);
  return w;
}

Work Group::device_reduce_scatter(Buf out, Buf in, comm::ReduceOp op) {
  const size_t chunk = out.count, n = in.count, padded = chunk * static_cast<size_t>(size());
  void* side = mem_->side_stream();
  mem_->order(mem_->stream(), side);  // after the gradients the compute queue has made so far
  const float* src = static_cast<const float*>(in.data);
  if (n != padded) {
    auto* s = static_cast<float*>(device_scratch(0, padded * sizeof(float)));
    mem_->copy_on(side, s, src, n * sizeof(float));
    mem_->zero_on(side, s + n, (padded - n) * sizeof(float));
    src = s;
  }
  device_->reduce_scatter({static_cast<float*>(out.data), chunk}, {src, padded}, op, {.stream = side});
  return side_queued(side);
}

Work Group::device_all_gather(Buf out, Buf in) {
  const size_t members = static_cast<size_t>(size());
  const size_t chunk = (out.count + members - 1) / members, whole = chunk * members, n = in.count;
  void* side = mem_->side_stream();
  mem_->order(mem_->stream(), side);  // after the update that wrote the owned parameters
  auto* src = static_cast<float*>(device_scratch(0, chunk * sizeof(float)));
  mem_->copy_on(side, src, in.data, n * sizeof(float));
  if (n < chunk) mem_->zero_on(side, src + n, (chunk - n) * sizeof(float));
  auto* dst = out.count == whole ? static_cast<float*>(out.data)
                                 : static_cast<float*>(device_scratch(1, whole * sizeof(float)));
  device_->all_gather({dst, whole}, {src, chunk}, {.stream = side});
  if (dst != out.data) mem_->copy_on(side, out.data, dst, out.count * sizeof(float));
  return side_queued(side);
}

Work Group::side_queued(void* side) {
  Work w;
  w.s_ = std::make_shared<Work::State>();
  w.s_->group = this;
  w.s_->fence = mem_->fence_on(side);
  return w;
}

void* Group::device_scratch(size_t k, size_t bytes) {
  device::DeviceArray<std::byte>& a = dev_scratch_[k];
  if (a.size() < bytes) {
    mem_->synchronize();  // the side queue may still use the smaller one
    a = device::DeviceArray<std::byte>(*mem_, bytes);
  }
  return a.data();
}

// ---- landing, pinned slots ----

void Group::land(Work::State& s) {
  if (s.landed) return;
  if (s.fence) {
    // The compute queue waits (timed by the device), the host does not.
    void* queue = mem_->stream();
    clock_->time_queued(*mem_, queue, [&] { s.fence->hold(queue); });
  }
  if (s.results.valid()) {
    clock_->time([&] { s.results.wait(); });
    s.results.get();  // rethrows the operation's failure
  }
  for (const auto& u : s.uploads) mem_->upload_queued(u.device, u.host, u.bytes);
  if (!s.uploads.empty()) s.uploaded = mem_->fence();
  s.landed = true;
}

bool Group::free_now(const Slot& s) const {
  if (!s.owner) return true;
  const Work::State& o = *s.owner;
  if (s.output) return o.landed && ready(o.finished) && (!o.uploaded || o.uploaded->done());
  // The thread no longer reads the downloaded input (an operation still being posted has no
  // future yet: its slots are taken).
  return o.finished.valid() && ready(o.finished);
}

void Group::land_oldest() {
  std::shared_ptr<Work::State> oldest = inflight_.front();
  inflight_.pop_front();
  if (oldest->finished.valid()) clock_->time([&] { oldest->finished.wait(); });
  land(*oldest);  // its results go to the device early: nothing reads them before its own landing
  if (oldest->uploaded) oldest->uploaded->wait();
}

int Group::take_slot(size_t bytes) {
  for (;;) {
    int best = -1;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].bytes >= bytes && free_now(slots_[i]) && (best < 0 || slots_[i].bytes < slots_[best].bytes))
        best = static_cast<int>(i);
    if (best >= 0) {
      slots_[best].owner.reset();
      return best;
    }
    // Free slots too small to use make room for a new one.
    for (size_t i = slots_.size(); i-- > 0 && pinned_bytes_ + bytes > options_.max_pinned_bytes;)
      if (free_now(slots_[i])) {
        mem_->release_pinned(slots_[i].host);
        pinned_bytes_ -= slots_[i].bytes;
        slots_.erase(slots_.begin() + static_cast<long>(i));
      }
    if (pinned_bytes_ + bytes <= options_.max_pinned_bytes || (inflight_.empty() && !wait_for_upload())) {
      slots_.push_back({mem_->allocate_pinned(bytes), bytes, nullptr, false});
      pinned_bytes_ += bytes;
      return static_cast<int>(slots_.size()) - 1;
    }
    if (!inflight_.empty()) land_oldest();
  }
}

bool Group::wait_for_upload() {
  for (Slot& s : slots_)
    if (s.owner && s.output && s.owner->landed && s.owner->uploaded && !s.owner->uploaded->done()) {
      s.owner->uploaded->wait();
      return true;
    }
  return false;
}

void Group::prune_inflight() {
  while (!inflight_.empty() && inflight_.front()->landed && ready(inflight_.front()->finished)) inflight_.pop_front();
}

void Group::drain() {
  if (thread_) clock_->time([&] { thread_->drain(); });
}

void Group::abandon() noexcept {
  if (mode_ == Mode::kNone) return;
  try {
    if (thread_) thread_->cancel();
  } catch (...) {  // cancel only waits; nothing left to undo
  }
  inflight_.clear();
  if (!slots_.empty()) {
    try {
      mem_->synchronize();  // queued copies may still read or write pinned memory
    } catch (...) {         // a dead device: nothing is copying any more
    }
  }
  for (Slot& s : slots_) s.owner.reset();
}

}  // namespace holmes::parallel
