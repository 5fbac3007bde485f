#include "engine/tools/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "common/rng.hpp"

namespace holmes::tools {

int pick_token(const float* logits, int V, const SampleOptions& o, double draw) {
  if (o.temperature <= 0.0f) return static_cast<int>(std::max_element(logits, logits + V) - logits);
  std::vector<int> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  int k = (o.top_k > 0 && o.top_k < V) ? o.top_k : V;
  // Keep the k largest logits; ties broken by lower id so the choice is deterministic.
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const double top = logits[idx[0]];
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int i = 0; i < k; ++i) sum += (p[i] = std::exp((logits[idx[i]] - top) / o.temperature));
  double target = draw * sum, acc = 0;
  for (int i = 0; i < k; ++i) {
    acc += p[i];
    if (target < acc) return idx[i];
  }
  return idx[k - 1];
}

std::vector<int> generate(model::Gpt& gpt, const std::vector<int>& prompt, const SampleOptions& o,
                          const std::function<void(int)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt holds no tokens");
  const auto& cfg = gpt.config();
  const int window = cfg.max_seq_len, V = cfg.vocab, Vl = cfg.local_vocab();
  Rng rng(hash_words(o.seed, 0x5a3b1e));
  std::vector<int> seq = prompt, out;
  std::vector<float> last(static_cast<size_t>(Vl));
  for (int i = 0; i < o.max_new_tokens; ++i) {
    const int T = std::min<int>(window, static_cast<int>(seq.size()));
    const int* ctx = seq.data() + seq.size() - T;
    gpt.forward(ctx, nullptr, 1, T);
    // (1,T,Vl): the last position's row, read from the backend.
    gpt.read_logits(static_cast<size_t>(T - 1), last);
    int tok = pick_token(last.data(), V, o, rng.uniform());
    seq.push_back(tok);
    out.push_back(tok);
    if (on_token) on_token(tok);
    if (tok == o.stop_token) break;
  }
  return out;
}

}  // namespace holmes::tools
