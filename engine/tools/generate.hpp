// Text generation from a trained model: greedy, temperature and top-k sampling, seeded.
// No KV cache: every new token re-runs the forward pass over the last max_seq_len tokens,
// which is fine for the small models the CPU backend trains.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/gpt.hpp"

namespace holmes::tools {

struct SampleOptions {
  int max_new_tokens = 256;
  float temperature = 0.8f;  // 0 = greedy (arg-max)
  int top_k = 0;             // 0 = the whole vocabulary
  uint64_t seed = 1;
  int stop_token = -1;       // stop after emitting this token (e.g. end-of-text); -1 = never
};

// Picks the next token from logits (V real tokens) per the options; `draw` is uniform [0,1).
int pick_token(const float* logits, int V, const SampleOptions& o, double draw);

// Continues `prompt` (non-empty) and returns the new tokens only. The model must hold the
// whole network (tp = 1, one stage) and be built with max_B >= 1, max_T >= 1. `on_token`,
// when set, sees each token as it is produced (for streaming output).
std::vector<int> generate(model::Gpt& gpt, const std::vector<int>& prompt, const SampleOptions& o,
                          const std::function<void(int)>& on_token = {});

}  // namespace holmes::tools
