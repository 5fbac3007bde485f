#include "engine/data/mixture.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace holmes::data {

Mixture::Mixture(std::vector<double> weights) {
  if (weights.empty() || weights.size() > 65535)
    throw std::invalid_argument("Mixture: between 1 and 65535 sources");
  double sum = 0;
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) throw std::invalid_argument("Mixture: weights must be positive");
    sum += w;
  }
  const size_t n = weights.size();
  // Largest remainder: floor(share) each, the leftover places to the largest fractions
  // (ties to the earlier source).
  std::vector<double> exact(n);
  count_.resize(n);
  int64_t given = 0;
  for (size_t s = 0; s < n; ++s) {
    exact[s] = weights[s] / sum * static_cast<double>(kBlock);
    count_[s] = static_cast<int64_t>(std::floor(exact[s]));
    given += count_[s];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return exact[a] - static_cast<double>(count_[a]) > exact[b] - static_cast<double>(count_[b]);
  });
  for (size_t k = 0; given < kBlock; ++k, ++given) ++count_[order[k % n]];
  // Each place to the source furthest below its share of the places so far: its deficit
  // (k + 1) c_s / kBlock - taken_s is largest (ties to the earlier source). Deficits stay in
  // (-1, 1) and are integers at the block's end, so every source gets exactly c_s places.
  source_.resize(static_cast<size_t>(kBlock));
  rank_.resize(static_cast<size_t>(kBlock));
  std::vector<int64_t> taken(n, 0);
  for (int64_t k = 0; k < kBlock; ++k) {
    size_t best = 0;
    int64_t best_num = INT64_MIN;  // deficit x kBlock, exact in integers
    for (size_t s = 0; s < n; ++s) {
      const int64_t num = (k + 1) * count_[s] - taken[s] * kBlock;
      if (num > best_num) best = s, best_num = num;
    }
    source_[static_cast<size_t>(k)] = static_cast<uint16_t>(best);
    rank_[static_cast<size_t>(k)] = static_cast<uint32_t>(taken[best]++);
  }
}

Mixture::Pick Mixture::pick(int64_t i) const {
  const int64_t block = i / kBlock;
  const size_t k = static_cast<size_t>(i % kBlock);
  const int s = source_[k];
  return {s, block * count_[static_cast<size_t>(s)] + rank_[k]};
}

namespace {

std::vector<double> weights_of(const std::vector<SequenceStream::Source>& sources) {
  std::vector<double> w;
  for (const auto& s : sources) w.push_back(s.weight);
  return w;
}

}  // namespace

SequenceStream::SequenceStream(std::vector<Source> sources)
    : sources_(std::move(sources)), mixture_(weights_of(sources_)) {}

void SequenceStream::fill_sequence(int64_t i, int32_t* inputs, int32_t* targets, int32_t* positions) const {
  const Mixture::Pick p = mixture_.pick(i);
  const BatchSampler& s = sources_[static_cast<size_t>(p.source)].sampler;
  if (trace_) {
    const BatchSampler::Place at = s.place(p.index);
    std::fprintf(trace_, "%lld %d %zu %lld\n", static_cast<long long>(i), p.source, at.segment,
                 static_cast<long long>(at.offset));
  }
  s.fill_sequence(p.index, inputs, targets, positions);
}

void SequenceStream::fill_batch(const BatchCoord& c, int32_t* inputs, int32_t* targets, int32_t* positions) const {
  const int T = seq_len();
  for (int b = 0; b < c.micro_batch; ++b) {
    const size_t row = static_cast<size_t>(b) * T;
    fill_sequence(sample_index(c, b), inputs + row, targets + row, positions ? positions + row : nullptr);
  }
  if (trace_) std::fflush(trace_);
}

int64_t SequenceStream::counted_targets(int64_t first, int64_t count) const {
  if (!options().mask_document_start) return count * seq_len();
  int64_t n = 0;
  for (int64_t i = first; i < first + count; ++i) {
    const Mixture::Pick p = mixture_.pick(i);
    n += sources_[static_cast<size_t>(p.source)].sampler.counted_targets(p.index);
  }
  return n;
}

}  // namespace holmes::data
