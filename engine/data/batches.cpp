#include "engine/data/batches.hpp"

#include <algorithm>
#include <stdexcept>

#include "common/rng.hpp"

namespace holmes::data {

uint64_t permute_index(uint64_t i, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 2;
  while ((1ULL << bits) < n) bits += 2;  // even width so both halves are equal
  const int half = bits / 2;
  const uint64_t mask = (1ULL << half) - 1;
  uint64_t x = i;
  do {  // cycle walking: re-encrypt until inside [0, n); a bijection of [0, n) results
    uint64_t l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t f = hash_words(key, round, r) & mask;
      uint64_t nl = r;
      r = l ^ f;
      l = nl;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

int64_t sample_index(const BatchCoord& c, int b) {
  return c.origin.sequence + (c.step - c.origin.step) * c.global_batch +
         (static_cast<int64_t>(c.micro) * c.dp_size + c.dp_rank) * c.micro_batch + b;
}

BatchSampler::BatchSampler(std::vector<TokenSpan> segments, int seq_len, uint64_t seed, bool shuffle,
                           std::vector<DocumentStarts> docs, SequenceOptions options)
    : segments_(std::move(segments)), docs_(std::move(docs)), seq_len_(seq_len), seed_(seed), shuffle_(shuffle),
      options_(options) {
  if (seq_len_ <= 0) throw std::invalid_argument("BatchSampler: seq_len must be positive");
  if ((options_.positions || options_.mask_document_start) && docs_.size() != segments_.size())
    throw std::invalid_argument("BatchSampler: document masking needs the document starts of every segment");
  // A segment of len tokens holds (len - T) / T chunks of T+1 tokens for any grid offset < T.
  for (const auto& s : segments_) {
    first_chunk_.push_back(total_chunks_);
    int64_t len = static_cast<int64_t>(s.size());
    if (len >= 2 * static_cast<int64_t>(seq_len_)) total_chunks_ += (len - seq_len_) / seq_len_;
  }
}

BatchSampler::Place BatchSampler::place(int64_t sample) const {
  if (total_chunks_ == 0) throw std::logic_error("BatchSampler: no chunks (stream shorter than 2 * seq_len)");
  const uint64_t n = static_cast<uint64_t>(total_chunks_);
  const uint64_t epoch = static_cast<uint64_t>(sample) / n;
  uint64_t chunk = static_cast<uint64_t>(sample) % n;
  int64_t offset = 0;
  if (shuffle_) {
    chunk = permute_index(chunk, n, hash_words(seed_, epoch, 0xc4u));
    offset = static_cast<int64_t>(hash_words(seed_, epoch, 0x0ffu) % static_cast<uint64_t>(seq_len_));
  }
  // Segment holding the chunk: the last one whose first chunk is <= chunk (empty segments
  // share their start with the next one, so the last of equals is the non-empty one).
  auto it = std::upper_bound(first_chunk_.begin(), first_chunk_.end(), static_cast<int64_t>(chunk));
  const size_t seg = static_cast<size_t>(it - first_chunk_.begin()) - 1;
  const int64_t local = static_cast<int64_t>(chunk) - first_chunk_[seg];
  return {seg, offset + local * seq_len_};
}

void BatchSampler::document_starts(const Place& at, const TokenSpan& p, std::vector<int>* starts) const {
  starts->clear();
  const DocumentStarts& d = docs_[at.segment];
  if (d.index) {
    // The first document starting after the sequence's first token, then those up to its last.
    const int64_t first = d.base + at.offset;
    uint64_t lo = 0, hi = d.index->documents_count();
    while (lo < hi) {
      const uint64_t mid = (lo + hi) / 2;
      if (d.index->document_start(mid) <= first) lo = mid + 1;
      else hi = mid;
    }
    for (uint64_t k = lo; k < d.index->documents_count(); ++k) {
      const int64_t r = d.index->document_start(k) - first;
      if (r > seq_len_) break;
      if (starts->empty() || starts->back() != r) starts->push_back(static_cast<int>(r));  // empty documents
    }
  } else if (d.token >= 0) {
    for (int r = 1; r <= seq_len_; ++r)
      if (p.at(static_cast<size_t>(r)) == d.token) starts->push_back(r);
  }
}

void BatchSampler::fill_sequence(int64_t sample, int32_t* inputs, int32_t* targets, int32_t* positions) const {
  const Place at = place(sample);
  const TokenSpan p = segments_[at.segment].subspan(static_cast<size_t>(at.offset), static_cast<size_t>(seq_len_) + 1);
  for (int t = 0; t < seq_len_; ++t) {
    inputs[t] = static_cast<int32_t>(p[t]);
    targets[t] = static_cast<int32_t>(p[t + 1]);
  }
  if (!positions && !options_.mask_document_start) return;
  thread_local std::vector<int> starts;
  document_starts(at, p, &starts);
  if (positions) {
    size_t next = 0;
    int begin = 0;
    for (int t = 0; t < seq_len_; ++t) {
      if (next < starts.size() && starts[next] == t) begin = t, ++next;
      positions[t] = t - begin;
    }
  }
  if (options_.mask_document_start)
    for (int r : starts) targets[r - 1] = -1;
}

void BatchSampler::fill_batch(const BatchCoord& c, int32_t* inputs, int32_t* targets, int32_t* positions) const {
  for (int b = 0; b < c.micro_batch; ++b) {
    const size_t row = static_cast<size_t>(b) * seq_len_;
    fill_sequence(sample_index(c, b), inputs + row, targets + row, positions ? positions + row : nullptr);
  }
}

int BatchSampler::counted_targets(int64_t sample) const {
  if (!options_.mask_document_start) return seq_len_;
  const Place at = place(sample);
  const TokenSpan p = segments_[at.segment].subspan(static_cast<size_t>(at.offset), static_cast<size_t>(seq_len_) + 1);
  thread_local std::vector<int> starts;
  document_starts(at, p, &starts);
  return seq_len_ - static_cast<int>(starts.size());
}

}  // namespace holmes::data
