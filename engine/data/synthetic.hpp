// The embedded default data: a byte-level text stream generated from a seeded random
// "word grammar" whose entropy rate is known exactly, so the log can show how close the
// model gets to the best possible loss.
//
// The grammar is a first-order Markov chain over states. Each state emits a fixed token
// string: a word of 2..7 lowercase letters followed by a space (or by ".\n" for sentence-
// final words), or the end-of-text token 256 that separates documents. Every state moves
// to a few successors with random probabilities. Because no emission is a prefix of
// another (separators only at the end), the byte stream determines the state sequence, so
// the entropy rate per token is exactly  H = sum_s pi_s H(P_s) / sum_s pi_s |e_s|  with pi
// the stationary distribution, H(P_s) the entropy of state s's successor distribution and
// |e_s| its emission length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace holmes::data {

struct SyntheticGrammar {
  struct Edge {
    int to = 0;
    double p = 0;
  };
  std::vector<std::vector<uint16_t>> emission;  // per state: its token string
  std::vector<std::vector<Edge>> next;          // per state: successors, p summing to 1
  int start = 0;                                // the end-of-text state; streams begin after it
};

struct SyntheticStats {
  double entropy_rate = 0;      // nats per token, of the stationary process
  double mean_emission = 0;     // tokens per state visit
  double unigram_entropy = 0;   // nats per token with no context (what a bigram-free model sees)
};

// The grammar for `seed` (same seed, same grammar on every machine).
SyntheticGrammar make_synthetic_grammar(uint64_t seed);

// Exact entropy rate and related numbers (stationary distribution by power iteration).
SyntheticStats synthetic_stats(const SyntheticGrammar& g);

// `count` tokens of the stream, starting right after an end-of-text.
std::vector<uint16_t> generate_synthetic_tokens(const SyntheticGrammar& g, int64_t count, uint64_t seed);

// A few lines describing the source, for the training log.
std::string describe_synthetic(const SyntheticGrammar& g, const SyntheticStats& s);

}  // namespace holmes::data
