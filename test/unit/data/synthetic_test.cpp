// The synthetic source: deterministic, decodable, and its stated entropy rate equals the
// measured average surprisal of a long generated stream under the true grammar.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

#include "engine/data/synthetic.hpp"
#include "engine/data/token_file.hpp"

using namespace holmes::data;

namespace {

// Parses `toks` back into states (the emission code is prefix-free) and returns the mean
// -log p per token of the transitions taken, skipping the cut-off last state.
double measured_rate(const SyntheticGrammar& g, const std::vector<uint16_t>& toks) {
  std::map<std::vector<uint16_t>, int> code;
  for (size_t s = 0; s < g.emission.size(); ++s) code[g.emission[s]] = static_cast<int>(s);
  int state = g.start;
  double nll = 0;
  size_t used = 0;
  std::vector<uint16_t> cur;
  for (size_t i = 0; i < toks.size(); ++i) {
    cur.push_back(toks[i]);
    auto it = code.find(cur);
    if (it == code.end()) continue;
    double p = 0;
    for (const auto& e : g.next[state])
      if (e.to == it->second) p += e.p;
    REQUIRE(p > 0);  // every step is a transition the grammar allows
    nll -= std::log(p);
    used = i + 1;
    state = it->second;
    cur.clear();
  }
  return nll / static_cast<double>(used);
}

}  // namespace

TEST_CASE("synthetic grammar is deterministic per seed", "[train]") {
  auto a = generate_synthetic_tokens(make_synthetic_grammar(3), 5000, 9);
  auto b = generate_synthetic_tokens(make_synthetic_grammar(3), 5000, 9);
  auto c = generate_synthetic_tokens(make_synthetic_grammar(4), 5000, 9);
  CHECK(a.size() == 5000);
  CHECK(a == b);
  CHECK(a != c);
  for (uint16_t t : a) REQUIRE(t <= kEndOfText);
}

TEST_CASE("stated entropy rate matches the measured surprisal", "[train]") {
  for (uint64_t seed : {7u, 11u}) {
    auto g = make_synthetic_grammar(seed);
    auto st = synthetic_stats(g);
    CHECK(st.entropy_rate > 0.05);
    CHECK(st.entropy_rate < st.unigram_entropy);  // structure exists for a model to learn
    auto toks = generate_synthetic_tokens(g, 400000, seed);
    CHECK(measured_rate(g, toks) == Approx(st.entropy_rate).epsilon(0.03));
    // Mean emission length agrees with the stream: count end-of-word separators.
    double seps = 0;
    for (uint16_t t : toks) seps += (t == ' ' || t == '\n' || t == kEndOfText);
    CHECK(static_cast<double>(toks.size()) / seps == Approx(st.mean_emission).epsilon(0.03));
  }
}
