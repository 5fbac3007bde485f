// Initialisation that does not depend on the sharding: every element is drawn from a
// counter-based generator keyed by (seed, tensor name, index in the full tensor), with the
// distribution the architecture's init_rule gives each tensor.
#include <cmath>

#include "common/hash.hpp"
#include "model/gpt.hpp"

namespace holmes::model {
namespace {

uint64_t mix64(uint64_t x) {  // SplitMix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Standard normal from one 64-bit key (Box-Muller on two 32-bit uniforms in (0, 1)).
float normal_at(uint64_t key) {
  const uint64_t r = mix64(key);
  const double u1 = (static_cast<double>(r >> 32) + 0.5) * 0x1.0p-32;
  const double u2 = (static_cast<double>(r & 0xffffffffULL) + 0.5) * 0x1.0p-32;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace

void Gpt::init_weights(uint64_t seed) {
  // Computed on the host (a pure function of seed, name and index), then uploaded once.
  std::vector<float> host(layout_.size(), 0.0f);
  for (const ParamTensor& t : layout_.tensors()) {
    float* dst = host.data();
    const InitRule rule = arch_.init_rule(cfg_, t);
    if (rule.kind != InitRule::kNormal) {
      std::fill(dst + t.offset, dst + t.offset + t.numel, rule.kind == InitRule::kOne ? 1.0f : 0.0f);
      continue;
    }
    const float std_dev = rule.std;
    const uint64_t key = mix64(seed ^ fnv1a(t.name));
    int64_t full = 1;
    for (int64_t d : t.full_shape) full *= d;
    const int64_t cols = t.full_shape.back();
    // Padded vocabulary rows stay 0: no token looks them up and their logits are masked.
    const int64_t real_rows = t.vocab_rows ? cfg_.vocab : t.full_shape.front();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < full; ++i) {
      // Unsplit tensors map one to one; only TP-split ones need the index arithmetic.
      const int64_t off = t.tp_count == 1 ? static_cast<int64_t>(t.offset) + i : ParamLayout::shard_offset(t, i);
      if (off < 0) continue;
      dst[off] = (i / cols) < real_rows ? std_dev * normal_at(key + static_cast<uint64_t>(i)) : 0.0f;
    }
  }
  params_.upload(host);
  params_updated();
}

}  // namespace holmes::model
