// Fake ShardStates for checkpoint tests: the value of every element is a function of
// (tensor name, full-tensor index, kind), placed with ParamLayout::shard_offset, so a load
// under any plan can be checked element by element.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint.hpp"
#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"
#include "model/gpt2/gpt2.hpp"

namespace holmes::test {

using namespace holmes::checkpoint;

// Exact in float: < 2^24 with a 1/4 step.
inline float fake_value(const std::string& name, int64_t full_index, TensorKind kind) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<float>(h % 997) + 0.25f * static_cast<float>(full_index % 20000) +
         10000.0f * static_cast<float>(static_cast<int>(kind));
}

inline int64_t full_numel(const model::ParamTensor& t) {
  int64_t n = 1;
  for (auto d : t.full_shape) n *= d;
  return n;
}

// One rank's shard with its buffers.
struct FakeShard {
  model::GptConfig config;
  std::unique_ptr<model::ParamLayout> layout;
  std::vector<float> params, m, v;
  std::vector<std::pair<size_t, size_t>> owned;
  std::vector<int64_t> full_of;  // flat-buffer offset -> full-tensor index

  FakeShard(const model::GptConfig& global, int tp, int tp_rank, int first, int layers, int dp, int dp_rank)
      : config(global.shard(tp, tp_rank, first, layers)), layout(std::make_unique<model::ParamLayout>(config)) {
    params.assign(layout->size(), 0.0f);
    full_of.assign(layout->size(), -1);
    for (const auto& t : layout->tensors())
      for (int64_t f = 0; f < full_numel(t); ++f)
        if (int64_t o = model::ParamLayout::shard_offset(t, f); o >= 0) full_of[static_cast<size_t>(o)] = f;
    // A distributed optimizer's ownership: this dp rank's share of every 1000-float bucket.
    const size_t bucket = 1000;
    for (size_t b = 0; b < layout->size(); b += bucket) {
      const size_t len = std::min(bucket, layout->size() - b), share = (len + dp - 1) / dp;
      const size_t lo = b + std::min(len, share * dp_rank), hi = b + std::min(len, share * (dp_rank + 1));
      if (lo < hi) owned.emplace_back(lo, hi);
    }
    size_t n = 0;
    for (const auto& r : owned) n += r.second - r.first;
    m.assign(n, 0.0f);
    v.assign(n, 0.0f);
  }

  const model::ParamTensor& tensor_at(size_t off) const {
    for (const auto& t : layout->tensors())
      if (off >= t.offset && off < t.offset + t.numel) return t;
    throw std::out_of_range("offset");
  }

  // Fills params and owned moments with fake_value.
  void fill() {
    for (size_t o = 0; o < params.size(); ++o) params[o] = fake_value(tensor_at(o).name, full_of[o], TensorKind::kParam);
    size_t k = 0;
    for (const auto& [b, e] : owned)
      for (size_t o = b; o < e; ++o, ++k) {
        m[k] = fake_value(tensor_at(o).name, full_of[o], TensorKind::kExpAvg);
        v[k] = fake_value(tensor_at(o).name, full_of[o], TensorKind::kExpAvgSq);
      }
  }

  ShardState state() {
    return {.layout = layout.get(), .config = &config, .params = params.data(), .owned = owned, .exp_avg = m.data(),
            .exp_avg_sq = v.data()};
  }

  // Elements that differ from fake_value (wte rows at or beyond `loaded_vocab_rows` must be 0).
  size_t mismatches(bool moments, int64_t loaded_vocab_rows = 1 << 30) const {
    auto expect = [&](size_t o, TensorKind kind) {
      const auto& t = tensor_at(o);
      if (t.name == "wte" && full_of[o] / t.full_shape[1] >= loaded_vocab_rows) return 0.0f;
      return fake_value(t.name, full_of[o], kind);
    };
    size_t bad = 0;
    for (size_t o = 0; o < params.size(); ++o) bad += params[o] != expect(o, TensorKind::kParam);
    if (!moments) return bad;
    size_t k = 0;
    for (const auto& [b, e] : owned)
      for (size_t o = b; o < e; ++o, ++k)
        bad += (m[k] != expect(o, TensorKind::kExpAvg)) + (v[k] != expect(o, TensorKind::kExpAvgSq));
    return bad;
  }
};

inline std::filesystem::path temp_root() {
  return std::filesystem::temp_directory_path() / ("holmes_ckpt_test_" + std::to_string(::getpid()));
}
// Removes this process's scratch folders when the test binary exits.
struct TempRootCleanup {
  ~TempRootCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(temp_root(), ec);
  }
};
inline const TempRootCleanup temp_root_cleanup;

inline std::string temp_dir(const std::string& name) {
  auto d = temp_root() / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline model::GptConfig small_model() {
  auto g = model::gpt2::config(4, 32, 4, 100, 8);  // L4 C32 NH4 V100 (Vp 128 for tp <= 2, 256 for tp 4)
  g.finalize();
  return g;
}

inline SaveContext save_context(const model::GptConfig& g, int64_t step, int rank = 0, int world = 1) {
  SaveContext c;
  c.rank = rank;
  c.world = world;
  c.step = step;
  c.tokens_seen = step * 64;
  c.seed = 7;
  c.model = g;
  c.job_spec_text = "model:\n  layers: 4   # \"quoted\"\n";
  c.plan_text = "tp1 x pp1 x dp1";
  c.plan_hash = 0xfeedbeefcafe1234ull;
  return c;
}

}  // namespace holmes::test
