#include "engine/data/synthetic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/rng.hpp"
#include "engine/data/token_file.hpp"

namespace holmes::data {

namespace {

constexpr int kWords = 96;            // word states (plus one end-of-text state)
constexpr int kMinLetters = 2, kMaxLetters = 7;
constexpr int kMinFanout = 2, kMaxFanout = 4;
constexpr double kFinalWordShare = 0.15;  // words that end a sentence (".\n" instead of " ")
constexpr double kDocumentEnd = 0.02;      // chance that a sentence-final word ends the document

std::vector<uint16_t> random_word(Rng& rng, bool final_word) {
  int letters = kMinLetters + static_cast<int>(rng.below(kMaxLetters - kMinLetters + 1));
  std::vector<uint16_t> w;
  for (int i = 0; i < letters; ++i) w.push_back(static_cast<uint16_t>('a' + rng.below(26)));
  if (final_word) {
    w.push_back('.');
    w.push_back('\n');
  } else {
    w.push_back(' ');
  }
  return w;
}

// `k` distinct successors out of [0, kWords) with Dirichlet(1) weights scaled to `mass`.
void add_successors(Rng& rng, int k, double mass, std::vector<SyntheticGrammar::Edge>* out) {
  std::vector<int> picked;
  while (static_cast<int>(picked.size()) < k) {
    int s = static_cast<int>(rng.below(kWords));
    if (std::find(picked.begin(), picked.end(), s) == picked.end()) picked.push_back(s);
  }
  std::vector<double> w(k);
  double sum = 0;
  for (auto& x : w) sum += (x = -std::log(1.0 - rng.uniform()));
  for (int i = 0; i < k; ++i) out->push_back({picked[i], mass * w[i] / sum});
}

double entropy_of(const std::vector<SyntheticGrammar::Edge>& edges) {
  double h = 0;
  for (const auto& e : edges)
    if (e.p > 0) h -= e.p * std::log(e.p);
  return h;
}

}  // namespace

SyntheticGrammar make_synthetic_grammar(uint64_t seed) {
  Rng rng(hash_words(seed, 0x5e7a11ULL));
  SyntheticGrammar g;
  std::set<std::vector<uint16_t>> seen;
  while (static_cast<int>(g.emission.size()) < kWords) {
    bool final_word = rng.uniform() < kFinalWordShare;
    auto w = random_word(rng, final_word);
    if (seen.insert(w).second) g.emission.push_back(std::move(w));  // distinct strings keep it decodable
  }
  g.start = kWords;
  g.emission.push_back({kEndOfText});
  g.next.resize(g.emission.size());
  for (int s = 0; s < kWords; ++s) {
    bool final_word = g.emission[s].back() == '\n';
    double eot = final_word ? kDocumentEnd * (1.0 / kFinalWordShare) : 0.0;
    int k = kMinFanout + static_cast<int>(rng.below(kMaxFanout - kMinFanout + 1));
    add_successors(rng, k, 1.0 - eot, &g.next[s]);
    if (eot > 0) g.next[s].push_back({g.start, eot});
  }
  add_successors(rng, 2 * kMaxFanout, 1.0, &g.next[g.start]);  // how documents begin
  return g;
}

SyntheticStats synthetic_stats(const SyntheticGrammar& g) {
  const size_t n = g.emission.size();
  // Power iteration on the lazy chain (P + I) / 2: same stationary distribution, aperiodic.
  std::vector<double> pi(n, 1.0 / static_cast<double>(n)), nxt(n);
  for (int it = 0; it < 100000; ++it) {
    for (size_t s = 0; s < n; ++s) nxt[s] = 0.5 * pi[s];
    for (size_t s = 0; s < n; ++s)
      for (const auto& e : g.next[s]) nxt[e.to] += 0.5 * pi[s] * e.p;
    double diff = 0;
    for (size_t s = 0; s < n; ++s) diff += std::fabs(nxt[s] - pi[s]);
    pi.swap(nxt);
    if (diff < 1e-15) break;
  }
  SyntheticStats st;
  double h_state = 0;
  std::vector<double> unigram(512, 0.0);
  for (size_t s = 0; s < n; ++s) {
    h_state += pi[s] * entropy_of(g.next[s]);
    st.mean_emission += pi[s] * static_cast<double>(g.emission[s].size());
    for (uint16_t t : g.emission[s]) unigram[t] += pi[s];
  }
  st.entropy_rate = h_state / st.mean_emission;
  for (double u : unigram)
    if (u > 0) st.unigram_entropy -= (u / st.mean_emission) * std::log(u / st.mean_emission);
  return st;
}

std::vector<uint16_t> generate_synthetic_tokens(const SyntheticGrammar& g, int64_t count, uint64_t seed) {
  Rng rng(hash_words(seed, 0xda7aULL));
  std::vector<uint16_t> out;
  out.reserve(static_cast<size_t>(count));
  int state = g.start;
  while (static_cast<int64_t>(out.size()) < count) {
    double u = rng.uniform(), acc = 0;
    const auto& edges = g.next[state];
    int to = edges.back().to;  // rounding guard: u beyond the summed p falls on the last edge
    for (const auto& e : edges) {
      acc += e.p;
      if (u < acc) {
        to = e.to;
        break;
      }
    }
    state = to;
    for (uint16_t t : g.emission[state]) {
      if (static_cast<int64_t>(out.size()) == count) break;
      out.push_back(t);
    }
  }
  return out;
}

std::string describe_synthetic(const SyntheticGrammar& g, const SyntheticStats& s) {
  return fmt::format(
      "synthetic word grammar: {} words + end-of-text, {:.2f} tokens per word; entropy floor {:.4f} nats/token "
      "(the best loss any model can reach), unigram entropy {:.3f} nats/token",
      g.emission.size() - 1, s.mean_emission, s.entropy_rate, s.unigram_entropy);
}

}  // namespace holmes::data
