#include "comm/process_group.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace holmes::comm {

const char* to_string(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "max"; }


void ProcessGroup::all_reduce(void* data, size_t count, DType dtype, ReduceOp op, const OpOptions& o) {
  if (dtype != DType::kF32)
    throw std::invalid_argument(fmt::format("all_reduce on group '{}' ({}): {} elements are not summed here",
                                            name(), transport(), dtype_name(dtype)));
  all_reduce(std::span<float>(static_cast<float*>(data), count), op, o);
}

int GroupSpec::group_rank() const {
  std::set<int> seen(global_ranks.begin(), global_ranks.end());
  if (seen.size() != global_ranks.size())
    throw std::invalid_argument(fmt::format("group '{}': duplicate ranks in [{}]", name, fmt::join(global_ranks, ",")));
  auto it = std::find(global_ranks.begin(), global_ranks.end(), global_rank);
  if (it == global_ranks.end())
    throw std::invalid_argument(fmt::format("group '{}': global rank {} is not a member of [{}]", name, global_rank,
                                            fmt::join(global_ranks, ",")));
  return static_cast<int>(it - global_ranks.begin());
}

ProcessGroup::ProcessGroup(GroupSpec spec) : spec_(std::move(spec)), rank_(spec_.group_rank()) {}

void ProcessGroup::check_sizes(const char* op, size_t out, size_t in, size_t expected_out) const {
  if (out != expected_out)
    throw std::invalid_argument(fmt::format("{} on group '{}' (size {}): output has {} elements, input {}; expected "
                                            "output {}",
                                            op, name(), size(), out, in, expected_out));
}

void ProcessGroup::send(std::span<const float> data, int peer, uint32_t tag, const OpOptions& o) {
  // The span is only read for a send; P2POp holds a mutable span to keep one type.
  P2POp op{P2POp::kSend, {const_cast<float*>(data.data()), data.size()}, peer, tag};
  send_recv({&op, 1}, o);
}

void ProcessGroup::recv(std::span<float> data, int peer, uint32_t tag, const OpOptions& o) {
  P2POp op{P2POp::kRecv, data, peer, tag};
  send_recv({&op, 1}, o);
}

void ProcessGroup::all_to_all(std::span<float> out, std::span<const float> in, const OpOptions& o) {
  const size_t p = static_cast<size_t>(size());
  if (in.size() % p != 0 || out.size() != in.size())
    throw std::invalid_argument(fmt::format("all_to_all on group '{}' (size {}): input {} and output {} elements; "
                                            "expected equal sizes, a multiple of the group size",
                                            name(), p, in.size(), out.size()));
  const std::vector<size_t> counts(p, in.size() / p);
  all_to_all_v(out.data(), counts, in.data(), counts, DType::kF32, o);
}

void ProcessGroup::all_to_all_v(std::span<float> out, std::span<const size_t> out_counts, std::span<const float> in,
                                std::span<const size_t> in_counts, const OpOptions& o) {
  const size_t want_out = block_offsets("all_to_all_v", out_counts).back();
  const size_t want_in = block_offsets("all_to_all_v", in_counts).back();
  if (want_out != out.size() || want_in != in.size())
    throw std::invalid_argument(fmt::format("all_to_all_v on group '{}': input {} and output {} elements, the counts "
                                            "add up to {} and {}", name(), in.size(), out.size(), want_in, want_out));
  all_to_all_v(out.data(), out_counts, in.data(), in_counts, DType::kF32, o);
}

std::vector<size_t> ProcessGroup::block_offsets(const char* op, std::span<const size_t> counts) const {
  if (counts.size() != static_cast<size_t>(size()))
    throw std::invalid_argument(fmt::format("{} on group '{}': {} counts for a group of {} members", op, name(),
                                            counts.size(), size()));
  std::vector<size_t> at(counts.size() + 1, 0);
  for (size_t q = 0; q < counts.size(); ++q) at[q + 1] = at[q] + counts[q];
  return at;
}

void ProcessGroup::check_peer(const char* op, int peer) const {
  if (peer < 0 || peer >= size() || peer == rank_)
    throw std::invalid_argument(fmt::format("{} on group '{}': peer {} is not another member (size {}, rank {})", op,
                                            name(), peer, size(), rank_));
}

}  // namespace holmes::comm
