// A weighted mixture of sources as one sequence stream (Megatron-LM's blended datasets,
// torchtitan's weighted datasets): stream index i -> (source, the source's own index).
//
// The stream is cut into blocks of kBlock sequences. Each block gives source s exactly c_s
// of its places, c_s the weight's share of kBlock by largest remainder (so the counts are
// exact at every block's end and off by less than one sequence per source inside one), in
// the order Megatron's blending picks: each place goes to the source furthest below its
// share so far. So i maps to (s, b * c_s + k) for block b and the k-th place of s in the
// block: O(1) for any i, the same on every rank, at every resume and under every plan; a
// source's own index runs 0, 1, 2, ... without gaps, and it walks its epochs on its own
// (batches.hpp). Weights count tokens: every sequence holds seq_len + 1 of them.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/data/batches.hpp"

namespace holmes::data {

class Mixture {
 public:
  static constexpr int64_t kBlock = int64_t{1} << 16;
  // weights > 0 (normalised here). std::invalid_argument when empty or not positive.
  explicit Mixture(std::vector<double> weights);
  struct Pick {
    int source = 0;
    int64_t index = 0;  // the source's own sequence index
  };
  Pick pick(int64_t i) const;
  int64_t per_block(int source) const { return count_[static_cast<size_t>(source)]; }

 private:
  std::vector<int64_t> count_;     // c_s
  std::vector<uint16_t> source_;   // [kBlock]: which source each place of a block goes to
  std::vector<uint32_t> rank_;     // [kBlock]: how many places of that source come before it
};

// The sequences a run reads: its sources (one BatchSampler each, with a name and weight) as
// one stream through a Mixture. One source is read straight: stream index = its index.
class SequenceStream {
 public:
  struct Source {
    std::string name;
    double weight = 1;
    BatchSampler sampler;
  };
  explicit SequenceStream(std::vector<Source> sources);

  int seq_len() const { return sources_.front().sampler.seq_len(); }
  size_t source_count() const { return sources_.size(); }
  const Source& source(size_t s) const { return sources_[s]; }
  // Whether sequences carry positions / masked targets (the sources agree).
  const SequenceOptions& options() const { return sources_.front().sampler.options(); }

  Mixture::Pick pick(int64_t i) const { return mixture_.pick(i); }
  void fill_sequence(int64_t i, int32_t* inputs, int32_t* targets, int32_t* positions = nullptr) const;
  // As BatchSampler::fill_batch, over the stream.
  void fill_batch(const BatchCoord& c, int32_t* inputs, int32_t* targets, int32_t* positions = nullptr) const;
  // Targets trained on in the stream's sequences [first, first + count).
  int64_t counted_targets(int64_t first, int64_t count) const;

  // Test hook (HOLMES_TEST_DATA_TRACE, data.cpp): every sequence fill_batch reads is appended
  // to `trace` as "STREAM_INDEX SOURCE SEGMENT OFFSET".
  void set_trace(std::FILE* trace) { trace_ = trace; }

 private:
  std::vector<Source> sources_;
  Mixture mixture_;
  std::FILE* trace_ = nullptr;
};

}  // namespace holmes::data
