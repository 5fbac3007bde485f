#include "engine/parallel/staged_group.hpp"

namespace holmes::parallel {

StagedGroup::StagedGroup(comm::ProcessGroup& inner, device::DeviceMemory& memory, comm::ProcessGroup* device,
                         void* stream)
    : ProcessGroup(inner.spec()), inner_(inner), mem_(memory), device_(device), stream_(stream) {}

std::string StagedGroup::transport() const {
  if (device_ != nullptr) return device_->transport() + " (host buffers: " + inner_.transport() + ")";
  return inner_.transport() + ", staged through host memory";
}

comm::ProcessGroup* StagedGroup::on_device(std::initializer_list<const void*> buffers) {
  return on_device(std::span<const void* const>(buffers.begin(), buffers.size()));
}

comm::ProcessGroup* StagedGroup::on_device(std::span<const void* const> buffers) {
  if (device_ == nullptr) return nullptr;
  for (const void* p : buffers)
    if (p != nullptr && !held(p)) return nullptr;
  ++device_ops_;
  return device_;
}

comm::OpOptions StagedGroup::with_stream(const comm::OpOptions& o) const {
  comm::OpOptions d = o;
  if (d.stream == nullptr) d.stream = stream_;
  return d;
}

std::span<float> StagedGroup::host_view(std::span<float> data, size_t slot, bool read) {
  if (!held(data.data())) return data;
  staged_now_ = true;
  if (bufs_.size() <= slot) bufs_.resize(slot + 1);
  std::vector<float>& b = bufs_[slot];
  if (b.size() < data.size()) b.resize(data.size());
  if (read && !data.empty()) mem_.download(b.data(), data.data(), data.size_bytes());
  return {b.data(), data.size()};
}

void StagedGroup::write_back(std::span<float> data, size_t slot) {
  if (held(data.data()) && !data.empty()) mem_.upload(data.data(), bufs_[slot].data(), data.size_bytes());
}

void StagedGroup::all_reduce(std::span<float> data, comm::ReduceOp op, const comm::OpOptions& o) {
  if (auto* d = on_device({data.data()})) return d->all_reduce(data, op, with_stream(o));
  staged_now_ = false;
  inner_.all_reduce(host_view(data, 0, true), op, o);
  write_back(data, 0);
  staged_ops_ += staged_now_;
}

void StagedGroup::reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                                 const comm::OpOptions& o) {
  if (auto* d = on_device({out.data(), in.data()})) return d->reduce_scatter(out, in, op, with_stream(o));
  staged_now_ = false;
  // `in` is only read: staging it never writes back.
  std::span<float> in_host = host_view({const_cast<float*>(in.data()), in.size()}, 0, true);
  inner_.reduce_scatter(host_view(out, 1, false), in_host, op, o);
  write_back(out, 1);
  staged_ops_ += staged_now_;
}

void StagedGroup::all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o) {
  if (auto* d = on_device({out.data(), in.data()})) return d->all_gather(out, in, with_stream(o));
  staged_now_ = false;
  std::span<float> in_host = host_view({const_cast<float*>(in.data()), in.size()}, 0, true);
  inner_.all_gather(host_view(out, 1, false), in_host, o);
  write_back(out, 1);
  staged_ops_ += staged_now_;
}

void StagedGroup::broadcast(std::span<float> data, int root, const comm::OpOptions& o) {
  if (auto* d = on_device({data.data()})) return d->broadcast(data, root, with_stream(o));
  staged_now_ = false;
  inner_.broadcast(host_view(data, 0, true), root, o);
  write_back(data, 0);
  staged_ops_ += staged_now_;
}

void StagedGroup::send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o) {
  if (device_ != nullptr) {
    std::vector<const void*> buffers;  // empty halves do not count
    for (const comm::P2POp& op : ops) buffers.push_back(op.data.empty() ? nullptr : op.data.data());
    if (auto* d = on_device(buffers)) return d->send_recv(ops, with_stream(o));
  }
  staged_now_ = false;
  std::vector<comm::P2POp> host_ops(ops.begin(), ops.end());
  for (size_t i = 0; i < ops.size(); ++i)
    host_ops[i].data = host_view(ops[i].data, i, ops[i].kind == comm::P2POp::kSend);
  if (!staged_now_) return inner_.send_recv(host_ops, o);  // host buffers: on_received as the inner group
  // Staged receives hold their data only once copied back: on_received after that.
  comm::OpOptions inner = o;
  inner.on_received = nullptr;
  inner_.send_recv(host_ops, inner);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == comm::P2POp::kRecv) write_back(ops[i].data, i);
  staged_ops_ += staged_now_;
  if (o.on_received) o.on_received();
}

void StagedGroup::barrier(const comm::OpOptions& o) { inner_.barrier(o); }

}  // namespace holmes::parallel
