#include "engine/train/staged_group.hpp"

namespace holmes::train {

StagedGroup::StagedGroup(comm::ProcessGroup& inner, model::DeviceMemory& memory)
    : ProcessGroup(inner.spec()), inner_(inner), mem_(memory) {}

std::string StagedGroup::transport() const { return inner_.transport() + ", staged through host memory"; }

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
  staged_now_ = false;
  inner_.all_reduce(host_view(data, 0, true), op, o);
  write_back(data, 0);
  staged_ops_ += staged_now_;
}

void StagedGroup::reduce_scatter(std::span<float> out, std::span<const float> in, comm::ReduceOp op,
                                 const comm::OpOptions& o) {
  staged_now_ = false;
  // `in` is only read: staging it never writes back.
  std::span<float> in_host = host_view({const_cast<float*>(in.data()), in.size()}, 0, true);
  inner_.reduce_scatter(host_view(out, 1, false), in_host, op, o);
  write_back(out, 1);
  staged_ops_ += staged_now_;
}

void StagedGroup::all_gather(std::span<float> out, std::span<const float> in, const comm::OpOptions& o) {
  staged_now_ = false;
  std::span<float> in_host = host_view({const_cast<float*>(in.data()), in.size()}, 0, true);
  inner_.all_gather(host_view(out, 1, false), in_host, o);
  write_back(out, 1);
  staged_ops_ += staged_now_;
}

void StagedGroup::broadcast(std::span<float> data, int root, const comm::OpOptions& o) {
  staged_now_ = false;
  inner_.broadcast(host_view(data, 0, true), root, o);
  write_back(data, 0);
  staged_ops_ += staged_now_;
}

void StagedGroup::send_recv(std::span<const comm::P2POp> ops, const comm::OpOptions& o) {
  staged_now_ = false;
  std::vector<comm::P2POp> host_ops(ops.begin(), ops.end());
  for (size_t i = 0; i < ops.size(); ++i)
    host_ops[i].data = host_view(ops[i].data, i, ops[i].kind == comm::P2POp::kSend);
  inner_.send_recv(host_ops, o);
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].kind == comm::P2POp::kRecv) write_back(ops[i].data, i);
  staged_ops_ += staged_now_;
}

void StagedGroup::barrier(const comm::OpOptions& o) { inner_.barrier(o); }

}  // namespace holmes::train
