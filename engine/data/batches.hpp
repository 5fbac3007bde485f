// Deterministic batches. A token stream (one or more segments) is cut into chunks of T+1
// tokens (inputs = first T, targets = last T). Sample number i of the run is
//     i = step * global_batch + (micro * dp_size + dp_rank) * micro_batch + b
// and maps to one chunk: epoch e = i / N, chunk = perm_e(i mod N), where perm_e is a keyed
// pseudo-random permutation of the N chunks and the chunk grid is shifted by a per-epoch
// offset. So batches depend only on (seed, step, micro, rank), a resumed run reads the same
// ones, and data-parallel ranks read distinct chunks within an epoch.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/data/token_span.hpp"

namespace holmes::data {

// Keyed bijection of [0, n) (4-round Feistel network with cycle walking).
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key);

// Where one micro-batch sits in the run: the inputs of sample_index().
struct BatchCoord {
  int64_t step = 0;
  int micro = 0;       // micro-batch index within the step
  int dp_rank = 0;
  int dp_size = 1;
  int micro_batch = 1;  // B, sequences per micro-batch
  int64_t global_batch = 1;
};

// Sample number of sequence b of the micro-batch at `c`.
int64_t sample_index(const BatchCoord& c, int b);

class BatchSampler {
 public:
  // `segments` must outlive the sampler. shuffle = false reads chunks in order with no
  // offset (validation: the same batches at every evaluation).
  BatchSampler(std::vector<TokenSpan> segments, int seq_len, uint64_t seed, bool shuffle);

  int64_t chunk_count() const { return total_chunks_; }
  int seq_len() const { return seq_len_; }

  // Tokens of chunk for `sample`: inputs[T], targets[T] (targets = inputs shifted by one).
  void fill_sequence(int64_t sample, int32_t* inputs, int32_t* targets) const;
  // A whole micro-batch: inputs, targets are [B, T] row-major, B = c.micro_batch.
  void fill_batch(const BatchCoord& c, int32_t* inputs, int32_t* targets) const;

 private:
  std::vector<TokenSpan> segments_;
  std::vector<int64_t> first_chunk_;  // per segment: index of its first chunk (prefix sums)
  int64_t total_chunks_ = 0;
  int seq_len_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace holmes::data
