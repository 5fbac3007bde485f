// A rank's trainable state as checkpoints see it: its flat parameter buffer and the AdamW
// moments of the ranges it owns. The trainer hands it out (StepRunner::shard_state); the
// checkpoint code reads and fills it.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/param_layout.hpp"

namespace holmes::checkpoint {

// One rank's trainable state, as checkpoints see it.
//
// `params` is the rank's whole shard buffer ([layout->size()], model/param_layout.hpp order).
// The rank OWNS the optimizer state of the flat-buffer ranges in `owned` (sorted, disjoint;
// one range [0, size) without a distributed optimizer, 1/dp of every gradient bucket with
// one). exp_avg / exp_avg_sq hold the AdamW moments of those ranges packed one after the
// other: element i of owned range k is at (sum of the lengths of ranges < k) + (i - begin).
// A checkpoint writes params and moments of the owned ranges only (DP ranks together cover
// the shard once); a load fills ALL of params and the moments of the owned ranges.
struct ShardState {
  const model::ParamLayout* layout = nullptr;
  const model::GptConfig* config = nullptr;  // this rank's shard config (tp, stage layers)
  float* params = nullptr;
  std::vector<std::pair<size_t, size_t>> owned;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
  // false: another rank writes the same owned ranges (an elastic sync replica > 0 holds replica
  // 0's state): a checkpoint writes nothing of this state, a load fills it as above.
  bool writes = true;
  size_t owned_size() const {
    size_t n = 0;
    for (const auto& r : owned) n += r.second - r.first;
    return n;
  }
};

}  // namespace holmes::checkpoint
