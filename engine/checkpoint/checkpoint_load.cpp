// Reassembling tensors from their named slices: read_full_tensor and load_shard_state.
//
// Every piece element has a full-tensor index (the inverse of ParamLayout::shard_offset);
// from there ParamLayout::shard_offset finds it in the loading rank's shard, whatever the
// two plans were. Elements are moved in runs along the last dimension that are contiguous in
// the piece, the full tensor and the destination shard alike.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/checkpoint/checkpoint.hpp"
#include "engine/checkpoint/checkpoint_io.hpp"
#include "model/param_layout.hpp"

namespace holmes::checkpoint {

namespace {

// A quiet NaN with a payload no arithmetic produces: marks elements nothing was loaded into.
constexpr uint32_t kUnfilledBits = 0x7fc0deadu;
float unfilled() { return std::bit_cast<float>(kUnfilledBits); }
bool is_unfilled(float x) { return std::bit_cast<uint32_t>(x) == kUnfilledBits; }

model::ParamTensor piece_tensor(const CheckpointPiece& p) {
  model::ParamTensor t;
  t.name = p.tensor;
  t.shape = p.shard_shape;
  t.full_shape = p.full_shape;
  t.numel = static_cast<size_t>(std::accumulate(p.shard_shape.begin(), p.shard_shape.end(), int64_t{1},
                                                std::multiplies<>()));
  t.split_dim = p.split_dim;
  t.split_parts = p.split_parts;
  t.tp_index = p.tp_index;
  t.tp_count = p.tp_count;
  return t;
}

// Full-tensor index of element `local` (row-major in t.shape) of the shard tensor t.
int64_t full_index_of(const model::ParamTensor& t, int64_t local) {
  int64_t rest = local, full = 0, stride = 1;
  for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) {
    int64_t i = rest % t.shape[d];
    rest /= t.shape[d];
    if (d == t.split_dim) {
      const int64_t local_block = t.shape[d] / t.split_parts, block = t.full_shape[d] / t.split_parts;
      i = (i / local_block) * block + t.tp_index * local_block + i % local_block;
    }
    full += i * stride;
    stride *= t.full_shape[d];
  }
  return full;
}

// Elements along the last dimension that are contiguous in both the shard and the full tensor.
int64_t contiguous_unit(const model::ParamTensor& t) {
  const int last = static_cast<int>(t.shape.size()) - 1;
  return t.split_dim == last ? t.shape[last] / t.split_parts : t.shape[last];
}

// Calls fn(full_index, piece_element, len) for runs of the piece that are contiguous in the
// piece, the full tensor and any layout whose contiguous unit is a multiple of `unit`.
template <class Fn>
void for_each_run(const CheckpointPiece& p, const model::ParamTensor& src, int64_t unit, Fn&& fn) {
  for (int64_t l = p.begin; l < p.end;) {
    const int64_t len = std::min(unit - l % unit, p.end - l);
    fn(full_index_of(src, l), l - p.begin, len);
    l += len;
  }
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// Reads the data of piece p ((end - begin) floats) from its file.
std::vector<float> read_piece(const std::string& path, int fd, const CheckpointPiece& p) {
  std::vector<float> out(static_cast<size_t>(p.end - p.begin));
  const size_t want = out.size() * sizeof(float);
  size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd, reinterpret_cast<char*>(out.data()) + got, want - got,
                              static_cast<off_t>(p.offset + got));
    if (n <= 0) throw UserError(fmt::format("{}: truncated: cannot read {} bytes at offset {}", path, want, p.offset));
    got += static_cast<size_t>(n);
  }
  return out;
}

// Whether piece p can hold elements of dst's tensor-parallel slice: both split the same
// dimension into the same blocks, so compare the rows each takes of a block (absolute rows,
// so a vocabulary padded differently under another tp still compares right). Saves a rank
// from reading the slices of every other TP rank on resume.
bool overlaps_tp_slice(const CheckpointPiece& p, const model::ParamTensor& dst) {
  if (p.split_dim < 0 || dst.split_dim < 0 || p.split_dim != dst.split_dim || p.split_parts != dst.split_parts)
    return true;
  const auto d = static_cast<size_t>(p.split_dim);
  if (d >= p.full_shape.size() || d >= dst.full_shape.size()) return true;
  const int64_t p_rows = p.full_shape[d] / p.split_parts / p.tp_count;
  const int64_t d_rows = dst.full_shape[d] / dst.split_parts / dst.tp_count;
  const int64_t p_lo = p.tp_index * p_rows, d_lo = dst.tp_index * d_rows;
  return p_lo < d_lo + d_rows && d_lo < p_lo + p_rows;
}

// Calls fn(piece, data) for every piece of the checkpoint that `want` accepts, file by file;
// through `read` when given, else from info.dir's files.
template <class Want, class Fn>
void for_each_piece(const CheckpointInfo& info, Want&& want, Fn&& fn, const PieceReader* read = nullptr) {
  for (const auto& f : info.files) {
    if (read != nullptr) {
      for (const auto& p : f.pieces)
        if (want(p)) fn(p, (*read)(f, p));
      continue;
    }
    const std::string path = info.dir + "/" + f.name;
    int fd = -1;
    for (const auto& p : f.pieces) {
      if (!want(p)) continue;
      if (fd < 0 && (fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC)) < 0)
        throw UserError(fmt::format("{}: cannot open the shard file", path));
      try {
        fn(p, read_piece(path, fd, p));
      } catch (...) {
        ::close(fd);
        throw;
      }
    }
    if (fd >= 0) ::close(fd);
  }
}

// The owned ranges of a shard as a map from flat-buffer offsets to packed moment indices.
class OwnedMap {
 public:
  explicit OwnedMap(const std::vector<std::pair<size_t, size_t>>& owned) : owned_(owned) {
    size_t n = 0;
    for (const auto& r : owned) prefix_.push_back(n), n += r.second - r.first;
  }
  // Copies src[0, len) to the packed positions of the owned offsets among [off, off + len).
  void scatter(float* packed, size_t off, const float* src, size_t len) const {
    auto it = std::upper_bound(owned_.begin(), owned_.end(), off,
                               [](size_t v, const std::pair<size_t, size_t>& r) { return v < r.second; });
    for (; it != owned_.end() && it->first < off + len; ++it) {
      const size_t b = std::max(off, it->first), e = std::min(off + len, it->second);
      std::copy_n(src + (b - off), e - b, packed + prefix_[it - owned_.begin()] + (b - it->first));
    }
  }
  // Flat-buffer offset of packed index k.
  size_t offset_of(size_t k) const {
    const auto i = std::upper_bound(prefix_.begin(), prefix_.end(), k) - prefix_.begin() - 1;
    return owned_[i].first + (k - prefix_[i]);
  }

 private:
  const std::vector<std::pair<size_t, size_t>>& owned_;
  std::vector<size_t> prefix_;
};

void check_model(const CheckpointInfo& info, const model::GptConfig& job) {
  // Architecture and every size, named as the job spec names them (model.arch, model.kv_heads, ...).
  const std::string diffs = info.model.differences(job);
  if (!diffs.empty())
    throw UserError(fmt::format("{}/manifest.json: the checkpoint holds another model shape: {}; a checkpoint loads "
                                "only into a job of the same model", info.dir, diffs));
}

// Full shapes must agree except in the padded vocabulary rows (dimension 0) of the embedding
// and an untied head.
void check_piece_shape(const CheckpointInfo& info, const CheckpointPiece& p, const model::ParamTensor& dst) {
  bool ok = p.full_shape.size() == dst.full_shape.size();
  for (size_t d = 0; ok && d < p.full_shape.size(); ++d)
    ok = p.full_shape[d] == dst.full_shape[d] || (d == 0 && dst.vocab_rows);
  if (!ok)
    throw UserError(fmt::format("{}/manifest.json: tensor '{}' has full shape [{}], this job's is [{}]", info.dir,
                                p.tensor, fmt::join(p.full_shape, ", "), fmt::join(dst.full_shape, ", ")));
}

// Vocabulary rows beyond the checkpoint's padded vocabulary are padding: zero, like a fresh init.
void zero_extra_vocab_rows(const CheckpointInfo& info, ShardState& s, const OwnedMap& owned, bool moments) {
  for (const auto& t : s.layout->tensors()) {
    if (!t.vocab_rows) continue;
    const int64_t C = t.shape[1];
    const std::vector<float> zeros(static_cast<size_t>(C), 0.0f);
    for (int64_t i = 0; i < t.shape[0]; ++i) {
      if (full_index_of(t, i * C) / C < info.model.padded_vocab) continue;
      const size_t off = t.offset + static_cast<size_t>(i * C);
      std::fill_n(s.params + off, C, 0.0f);
      if (!moments) continue;
      owned.scatter(s.exp_avg, off, zeros.data(), zeros.size());
      owned.scatter(s.exp_avg_sq, off, zeros.data(), zeros.size());
    }
  }
}

// Every element of the shard (params) and of its owned moments must have been loaded.
void check_filled(const CheckpointInfo& info, const ShardState& s, const OwnedMap& owned, bool moments) {
  auto fail = [&](size_t off, const char* kind) {
    for (const auto& t : s.layout->tensors())
      if (off >= t.offset && off < t.offset + t.numel)
        throw UserError(fmt::format("{}: the checkpoint has no value for element {} of '{}' ({}) of this rank's shard: "
                                    "it is incomplete", info.dir, off - t.offset, t.name, kind));
  };
  const float* p = std::find_if(s.params, s.params + s.layout->size(), is_unfilled);
  if (p != s.params + s.layout->size()) fail(static_cast<size_t>(p - s.params), "param");
  if (!moments) return;
  const size_t n = s.owned_size();
  for (const auto& [buf, kind] : {std::pair{s.exp_avg, "exp_avg"}, std::pair{s.exp_avg_sq, "exp_avg_sq"}}) {
    const float* q = std::find_if(buf, buf + n, is_unfilled);
    if (q != buf + n) fail(owned.offset_of(static_cast<size_t>(q - buf)), kind);
  }
}

// Whether piece p holds elements of state s's shard that a load reads.
bool wanted_in(const CheckpointPiece& p, const ShardState& s, bool with_optimizer) {
  const model::ParamTensor* dst = s.layout->find(p.tensor);
  return dst != nullptr && (p.kind == TensorKind::kParam || with_optimizer) && overlaps_tp_slice(p, *dst);
}

void load_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                 bool with_optimizer, const PieceReader* read);

}  // namespace

void load_shard_state(const CheckpointInfo& info, const model::GptConfig& job_model, ShardState& s,
                      bool with_optimizer) {
  load_shard_states(info, job_model, std::span<ShardState>(&s, 1), with_optimizer);
}

void load_shard_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                       bool with_optimizer) {
  load_states(info, job_model, states, with_optimizer, nullptr);
}

void load_shard_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                       bool with_optimizer, const PieceReader& read) {
  load_states(info, job_model, states, with_optimizer, &read);
}

std::vector<size_t> files_to_read(const CheckpointInfo& info, std::span<const ShardState> states, bool with_optimizer) {
  std::vector<size_t> out;
  for (size_t i = 0; i < info.files.size(); ++i) {
    const auto& pieces = info.files[i].pieces;
    if (std::any_of(pieces.begin(), pieces.end(), [&](const CheckpointPiece& p) {
          return std::any_of(states.begin(), states.end(),
                             [&](const ShardState& s) { return wanted_in(p, s, with_optimizer); });
        }))
      out.push_back(i);
  }
  return out;
}

PieceReader image_reader(std::shared_ptr<const std::map<int, ShardImage>> images) {
  return [images = std::move(images)](const CheckpointFile& f, const CheckpointPiece& p) {
    const auto it = images->find(f.rank);
    if (it == images->end())
      throw std::runtime_error(fmt::format("the shard of rank {} is not held here", f.rank));
    const std::vector<float>& payload = it->second.payload;
    const uint64_t at = (p.offset - kHeaderBytes) / sizeof(float);
    const auto n = static_cast<uint64_t>(p.end - p.begin);
    if (p.offset < kHeaderBytes || at + n > payload.size())
      throw std::runtime_error(fmt::format("piece {} of rank {}'s shard lies outside its {} floats", p.tensor, f.rank,
                                           payload.size()));
    return std::vector<float>(payload.begin() + static_cast<std::ptrdiff_t>(at),
                              payload.begin() + static_cast<std::ptrdiff_t>(at + n));
  };
}

namespace {

void load_states(const CheckpointInfo& info, const model::GptConfig& job_model, std::span<ShardState> states,
                 bool with_optimizer, const PieceReader* read) {
  check_model(info, job_model);
  std::vector<OwnedMap> owned;
  owned.reserve(states.size());
  for (ShardState& s : states) {
    owned.emplace_back(s.owned);
    std::fill_n(s.params, s.layout->size(), unfilled());
    if (with_optimizer) {
      std::fill_n(s.exp_avg, s.owned_size(), unfilled());
      std::fill_n(s.exp_avg_sq, s.owned_size(), unfilled());
    }
  }
  auto want_in = [&](const CheckpointPiece& p, const ShardState& s) { return wanted_in(p, s, with_optimizer); };
  auto want = [&](const CheckpointPiece& p) {
    return std::any_of(states.begin(), states.end(), [&](const ShardState& s) { return want_in(p, s); });
  };
  for_each_piece(info, want, [&](const CheckpointPiece& p, const std::vector<float>& data) {
    for (size_t k = 0; k < states.size(); ++k) {  // the chunk(s) holding the tensor
      ShardState& s = states[k];
      if (!want_in(p, s)) continue;
      const model::ParamTensor& dst = *s.layout->find(p.tensor);  // a tied copy of wte loads from wte
      check_piece_shape(info, p, dst);
      const auto src = piece_tensor(p);
      const int64_t dst_full = numel_of(dst.full_shape);
      float* moments = p.kind == TensorKind::kExpAvg ? s.exp_avg : s.exp_avg_sq;
      for_each_run(p, src, std::gcd(contiguous_unit(src), contiguous_unit(dst)), [&](int64_t f, int64_t at, int64_t len) {
        if (f >= dst_full) return;  // a padding row beyond this job's padded vocabulary
        const int64_t o = model::ParamLayout::shard_offset(dst, f);
        if (o < 0) return;  // another TP rank's slice
        if (p.kind == TensorKind::kParam) std::copy_n(data.data() + at, len, s.params + o);
        else owned[k].scatter(moments, static_cast<size_t>(o), data.data() + at, static_cast<size_t>(len));
      });
    }
  }, read);
  for (size_t k = 0; k < states.size(); ++k) {
    zero_extra_vocab_rows(info, states[k], owned[k], with_optimizer);
    check_filled(info, states[k], owned[k], with_optimizer);
  }
}

}  // namespace

std::vector<float> read_full_tensor(const CheckpointInfo& info, const std::string& name, TensorKind kind) {
  std::vector<float> full;
  for_each_piece(
      info, [&](const CheckpointPiece& p) { return p.tensor == name && p.kind == kind; },
      [&](const CheckpointPiece& p, const std::vector<float>& data) {
        if (full.empty()) full.assign(static_cast<size_t>(numel_of(p.full_shape)), unfilled());
        if (static_cast<size_t>(numel_of(p.full_shape)) != full.size())
          throw UserError(fmt::format("{}: pieces of '{}' disagree on its full shape", info.dir, name));
        const auto src = piece_tensor(p);
        for_each_run(p, src, contiguous_unit(src), [&](int64_t f, int64_t at, int64_t len) {
          std::copy_n(data.data() + at, len, full.data() + f);
        });
      });
  if (full.empty())
    throw UserError(fmt::format("{}: the checkpoint has no tensor '{}' ({})", info.dir, name, tensor_kind_name(kind)));
  const auto missing = std::count_if(full.begin(), full.end(), is_unfilled);
  if (missing > 0)
    throw UserError(fmt::format("{}: the checkpoint lacks {} of the {} elements of '{}' ({}): it is incomplete",
                                info.dir, missing, full.size(), name, tensor_kind_name(kind)));
  return full;
}

}  // namespace holmes::checkpoint
