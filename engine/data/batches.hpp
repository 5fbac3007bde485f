// Deterministic batches from one source. A token stream (one or more segments) is cut into
// chunks of T+1 tokens (inputs = first T, targets = last T). Sequence i of the source maps
// to one chunk: epoch e = i / N, chunk = perm_e(i mod N), where perm_e is a keyed
// pseudo-random permutation of the N chunks and the chunk grid is shifted by a per-epoch
// offset, so an epoch reads every chunk once. Which sequences a step reads is the run's
// stream position (sample_index; mixture.hpp spreads them over several sources), so batches
// depend only on (seed, position, micro-batch, rank) and a resumed run reads the same ones.
//
// Document masking (docs/training.md): a segment knows where its documents start (a
// Megatron index's boundaries, or each occurrence of the document token); a sequence then
// also gets each token's position in its document (0 at a document's first token, and at
// the sequence's first token), and with mask_document_start the targets that start a
// document become -1 (not trained on).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset.hpp"
#include "engine/data/token_span.hpp"

namespace holmes::data {

// Keyed bijection of [0, n) (4-round Feistel network with cycle walking).
uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key);

// Where the run's sequence stream stood at a step: the step `origin_step` began at stream
// index `origin_sequence` (0, 0 for a fresh run; a resumed run's come from its checkpoint),
// and every step since read global_batch sequences.
struct StreamOrigin {
  int64_t step = 0, sequence = 0;
};

// Where one micro-batch sits in the run: the inputs of sample_index().
struct BatchCoord {
  int64_t step = 0;
  int micro = 0;       // micro-batch index within the step
  int dp_rank = 0;
  int dp_size = 1;
  int micro_batch = 1;  // B, sequences per micro-batch
  int64_t global_batch = 1;
  StreamOrigin origin;
};

// Stream index of sequence b of the micro-batch at `c`: the step's global batch is the
// global_batch sequences after origin.sequence + (step - origin.step) * global_batch, split
// over micro-batches and data-parallel ranks in order.
int64_t sample_index(const BatchCoord& c, int b);

// Where documents start in one segment.
struct DocumentStarts {
  const IndexedIndex* index = nullptr;  // a Megatron dataset's boundaries, the segment at token `base` of it
  int64_t base = 0;
  int64_t token = -1;  // no index: each occurrence of this id starts a document (-1: none known)
};

struct SequenceOptions {
  bool positions = false;            // fill positions (document_mask)
  bool mask_document_start = false;  // targets that start a document become -1
};

class BatchSampler {
 public:
  // `segments` must outlive the sampler. shuffle = false reads chunks in order with no
  // offset (validation: the same batches at every evaluation). `docs` (one per segment) is
  // needed when `options` asks for positions or masking.
  BatchSampler(std::vector<TokenSpan> segments, int seq_len, uint64_t seed, bool shuffle,
               std::vector<DocumentStarts> docs = {}, SequenceOptions options = {});

  int64_t chunk_count() const { return total_chunks_; }
  int seq_len() const { return seq_len_; }
  const SequenceOptions& options() const { return options_; }

  // Where sequence `sample` reads its T+1 tokens: the segment and the offset in it.
  struct Place {
    size_t segment = 0;
    int64_t offset = 0;
  };
  Place place(int64_t sample) const;
  // Tokens of the chunk for `sample`: inputs[T], targets[T] (targets = inputs shifted by one,
  // -1 where masked); positions[T] when given (options().positions).
  void fill_sequence(int64_t sample, int32_t* inputs, int32_t* targets, int32_t* positions = nullptr) const;
  // A whole micro-batch: inputs, targets, positions are [B, T] row-major, B = c.micro_batch.
  void fill_batch(const BatchCoord& c, int32_t* inputs, int32_t* targets, int32_t* positions = nullptr) const;
  // Targets of sequence `sample` that are trained on (T, less the masked ones).
  int counted_targets(int64_t sample) const;

 private:
  // Offsets r in [1, T] inside the sequence at `at` where a document starts, ascending.
  void document_starts(const Place& at, const TokenSpan& tokens, std::vector<int>* starts) const;

  std::vector<TokenSpan> segments_;
  std::vector<DocumentStarts> docs_;
  std::vector<int64_t> first_chunk_;  // per segment: index of its first chunk (prefix sums)
  int64_t total_chunks_ = 0;
  int seq_len_;
  uint64_t seed_;
  bool shuffle_;
  SequenceOptions options_;
};

}  // namespace holmes::data
