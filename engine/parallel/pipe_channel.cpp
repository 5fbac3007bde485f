#include "engine/parallel/pipe_channel.hpp"

#include <fmt/format.h>

#include <chrono>
#include <stdexcept>

namespace holmes::parallel {

namespace {

bool ready(const std::shared_future<void>& f) {
  return !f.valid() || f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

const char* to_string(PipeChannel::Mode mode) {
  switch (mode) {
    case PipeChannel::Mode::kDeviceGroup: return "enqueued on the device group";
    case PipeChannel::Mode::kHost: return "communication thread";
    case PipeChannel::Mode::kStaged: return "communication thread, pinned host staging";
  }
  return "?";
}

PipeChannel::PipeChannel(comm::ProcessGroup& pp, bool device_group, device::DeviceMemory& mem, CommClock& clock,
                         int max_pinned)
    : pp_(pp), mem_(mem), clock_(clock),
      mode_(device_group ? Mode::kDeviceGroup : mem.is_host() ? Mode::kHost : Mode::kStaged),
      max_pinned_(std::max(max_pinned, 2)) {}

PipeChannel::~PipeChannel() {
  abandon();
  // Queued copies may still target pinned memory: let them land before it goes.
  if (!pinned_.empty()) {
    try {
      mem_.synchronize();
    } catch (...) {  // a dead device: nothing is copying any more
    }
  }
  for (Pinned& p : pinned_) mem_.release_pinned(p.host);
}

comm::CommThread& PipeChannel::thread() {
  if (!thread_) {
    thread_ = std::make_unique<comm::CommThread>();
    thread_->submit([this] { mem_.bind_thread(); });  // a failure comes with the first drain
  }
  return *thread_;
}

bool PipeChannel::free_now(const Pinned& p) const {
  return !p.awaiting && ready(p.transfer) && (p.upload == nullptr || p.upload->done());
}

int PipeChannel::take_pinned(size_t floats) {
  for (size_t i = 0; i < pinned_.size(); ++i)
    if (pinned_[i].floats >= floats && free_now(pinned_[i])) return static_cast<int>(i);
  if (static_cast<int>(pinned_.size()) < max_pinned_) {
    Pinned p;
    p.host = static_cast<float*>(mem_.allocate_pinned(floats * sizeof(float)));
    p.floats = floats;
    pinned_.push_back(std::move(p));
    return static_cast<int>(pinned_.size()) - 1;
  }
  // All taken: wait for the oldest use of one that is not holding a receive nobody read yet
  // (the transfers run in post order, so the first such buffer comes free first). Blocking
  // here is never worse than the synchronous stage, which waited for every transfer.
  for (size_t i = 0; i < pinned_.size(); ++i) {
    Pinned& p = pinned_[i];
    if (p.awaiting) continue;
    if (p.transfer.valid()) clock_.time([&] { p.transfer.wait(); });
    if (p.upload) p.upload->wait();
    p.transfer = {};
    p.upload.reset();
    if (p.floats < floats) {
      mem_.release_pinned(p.host);
      p.host = nullptr;
      p.host = static_cast<float*>(mem_.allocate_pinned(floats * sizeof(float)));
      p.floats = floats;
    }
    return static_cast<int>(i);
  }
  throw std::logic_error(fmt::format("PipeChannel: all {} pinned buffers hold receives nobody awaited",
                                     pinned_.size()));
}

std::shared_future<void> PipeChannel::post(std::span<const comm::P2POp> ops) {
  if (ops.empty()) return {};
  for (const comm::P2POp& op : ops)
    if (op.kind == comm::P2POp::kRecv && pending_.count(op.data.data()))
      throw std::logic_error("PipeChannel: a second receive into a buffer whose receive was not awaited");
  if (mode_ == Mode::kDeviceGroup) {
    clock_.time_queued(mem_, mem_.stream(), [&] { pp_.send_recv(ops); });
    return {};
  }
  std::vector<comm::P2POp> copy(ops.begin(), ops.end());
  // The receives are handed on as soon as they landed, while the sends of the same batch may
  // still be on the wire (a slow cross-island link): `received` is ready then.
  auto landed = std::make_shared<std::promise<void>>();
  const std::shared_future<void> received = landed->get_future().share();
  auto run = [this, landed](const std::vector<comm::P2POp>& batch, const std::shared_ptr<device::QueueFence>& fence) {
    bool told = false;
    try {
      if (fence) fence->wait();
      pp_.send_recv(batch, {.on_received = [&] {
                              told = true;
                              landed->set_value();
                            }});
    } catch (...) {
      if (!told) landed->set_exception(std::current_exception());
      throw;
    }
    if (!told) landed->set_value();  // a batch of sends only
  };
  if (mode_ == Mode::kHost) {
    std::shared_future<void> done = thread().submit([run, copy] { run(copy, nullptr); });
    for (const comm::P2POp& op : ops)
      if (op.kind == comm::P2POp::kRecv) pending_[op.data.data()] = {received, -1, op.data.size()};
    return done;
  }
  // Staged: swap every buffer for a pinned one; the sends' bytes are copied there on the
  // compute stream, after the kernels that wrote them.
  std::vector<int> used(ops.size());
  bool sends = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    used[i] = take_pinned(ops[i].data.size());
    Pinned& p = pinned_[used[i]];
    p.awaiting = true;  // taken: the next op of this post must get another
    copy[i].data = {p.host, ops[i].data.size()};
    if (ops[i].kind == comm::P2POp::kSend) {
      mem_.download_queued(p.host, ops[i].data.data(), ops[i].data.size_bytes());
      sends = true;
    }
  }
  std::shared_ptr<device::QueueFence> copied = sends ? mem_.fence() : nullptr;
  std::shared_future<void> done = thread().submit([run, copy, copied] { run(copy, copied); });
  for (size_t i = 0; i < ops.size(); ++i) {
    Pinned& p = pinned_[used[i]];
    p.awaiting = ops[i].kind == comm::P2POp::kRecv;
    // A receive's pinned buffer is free for another transfer once it landed and was uploaded.
    p.transfer = p.awaiting ? received : done;
    p.upload.reset();
    if (p.awaiting) {
      pending_[ops[i].data.data()] = {received, used[i], ops[i].data.size()};
    }
  }
  return {};  // the device buffers of sends: later writes queue after the copies
}

void PipeChannel::await(const float* data) {
  auto it = pending_.find(data);
  if (it == pending_.end()) return;
  const Pending pending = it->second;
  pending_.erase(it);
  clock_.time([&] { pending.done.wait(); });
  if (pending.pinned >= 0) pinned_[pending.pinned].awaiting = false;
  pending.done.get();  // rethrows the transfer's failure
  if (pending.pinned < 0) return;
  Pinned& p = pinned_[pending.pinned];
  mem_.upload_queued(const_cast<float*>(data), p.host, pending.floats * sizeof(float));
  p.upload = mem_.fence();
}

void PipeChannel::drain() {
  if (thread_) clock_.time([&] { thread_->drain(); });
  if (!pending_.empty())
    throw std::logic_error(fmt::format("PipeChannel: {} receives were never awaited", pending_.size()));
}

void PipeChannel::abandon() noexcept {
  try {
    if (thread_) thread_->cancel();
  } catch (...) {  // cancel only waits; nothing left to undo
  }
  pending_.clear();
  for (Pinned& p : pinned_) {
    p.awaiting = false;
    p.transfer = {};
  }
}

}  // namespace holmes::parallel
