// Shared pieces of the whole-model tests: tiny configs, a batch, a perturbed init and an
// in-process tensor-parallel "all-reduce" between threads.
#pragma once

#include <barrier>
#include <random>
#include <vector>

#include "model/bf16.hpp"
#include "model/gpt.hpp"
#include "model/tp_comm.hpp"

namespace holmes::model::test {

struct Batch {
  std::vector<int> tokens, targets;
};

inline Batch make_batch(int B, int T, int V, uint32_t seed) {
  std::mt19937 gen(seed);
  Batch b;
  for (int i = 0; i < B * T; ++i) {
    b.tokens.push_back(static_cast<int>(gen() % V));
    b.targets.push_back(static_cast<int>(gen() % V));
  }
  return b;
}

// Init, then add N(0, 0.1) noise (same for every sharding: it is keyed by the full index)
// so LayerNorm weights, biases and deep layers all carry non-trivial gradients.
inline void init_generic(Gpt& gpt, uint64_t seed) {
  gpt.init_weights(seed);
  for (const ParamTensor& t : gpt.layout().tensors()) {
    int64_t full = 1;
    for (int64_t d : t.full_shape) full *= d;
    const int64_t real_rows = t.vocab_rows ? gpt.config().vocab : t.full_shape.front();
    std::mt19937 gen(static_cast<uint32_t>(seed + t.name.size() * 131 + (t.layer + 2) * 7919));
    std::normal_distribution<float> dist(0.0f, 0.1f);
    for (int64_t i = 0; i < full; ++i) {
      const float noise = dist(gen);
      const int64_t off = ParamLayout::shard_offset(t, i);
      if (off >= 0 && i / t.full_shape.back() < real_rows) gpt.params()[off] += noise;
    }
  }
}

// All ranks of a TP group run in threads of one process; every collective meets at a
// barrier, sums (or maxes) the peers' buffers in rank order, and meets again before the
// buffers are overwritten.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), bar(n), ptrs(n, nullptr) {}
  int size;
  std::barrier<> bar;
  std::vector<float*> ptrs;
};

class ThreadComm final : public TensorParallelComm {
 public:
  ThreadComm(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int size() const override { return g_.size; }
  int rank() const override { return rank_; }
  void all_reduce_sum(float* data, size_t count) override { reduce(data, count, false); }
  void all_reduce_max(float* data, size_t count) override { reduce(data, count, true); }
  // bf16 shards: widened, summed as fp32 and rounded once, as the trainer's host groups do.
  void all_reduce_sum_bf16(void* data, size_t count) override {
    auto* h = static_cast<bf16*>(data);
    std::vector<float> wide(count);
    for (size_t i = 0; i < count; ++i) wide[i] = bf16_to_float(h[i]);
    reduce(wide.data(), count, false);
    for (size_t i = 0; i < count; ++i) h[i] = float_to_bf16(wide[i]);
  }

 private:
  void reduce(float* data, size_t count, bool is_max) {
    g_.ptrs[rank_] = data;
    g_.bar.arrive_and_wait();
    tmp_.assign(data, data + count);
    for (size_t i = 0; i < count; ++i) {
      float acc = g_.ptrs[0][i];
      for (int r = 1; r < g_.size; ++r) acc = is_max ? std::max(acc, g_.ptrs[r][i]) : acc + g_.ptrs[r][i];
      tmp_[i] = acc;
    }
    g_.bar.arrive_and_wait();
    std::copy(tmp_.begin(), tmp_.end(), data);
  }
  ThreadGroup& g_;
  int rank_;
  std::vector<float> tmp_;
};

}  // namespace holmes::model::test
