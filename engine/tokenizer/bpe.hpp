// Byte-level BPE on one piece of text (one match of the split pattern). Every byte starts as
// its own token; then, repeatedly, the adjacent pair with the lowest merge rank is merged,
// the leftmost among equal ranks, until no adjacent pair has a merge. That is tiktoken's rule
// (rank = the merged token's rank) and Hugging Face's BPE model (rank = the line of the pair
// in `merges`), expressed through one PairTable. `whole_piece_first` adds tiktoken's (and
// HF's ignore_merges) shortcut: a piece that is itself a token is that token.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/token_table.hpp"

namespace holmes::tokenizer {

struct BpeModel {
  TokenTable tokens;
  PairTable pairs;
  std::array<uint32_t, 256> byte_ids{};  // the token of each single byte
  bool whole_piece_first = false;

  // Fills byte_ids; std::invalid_argument naming the first byte the vocabulary lacks.
  void index_bytes();
  // tiktoken: every token of two or more bytes is the merge of each way to cut it into two
  // tokens, at the token's own rank (= its id).
  void add_rank_merges();
};

// Work buffers of one encoding thread (reused between pieces; never shared).
struct BpeScratch {
  std::vector<uint32_t> ids, ranks;
  std::vector<uint32_t> next, prev;
  struct Candidate {
    uint32_t rank, left, left_id, right_id;
  };
  std::vector<Candidate> heap;
};

// Appends the tokens of `piece` (non-empty) to `out`. Short pieces use a linear scan per
// merge (fast for words), long ones a heap (n log n, so a million spaces stay cheap); both
// give the same tokens (tested against each other).
void bpe_encode_piece(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out);

// The two algorithms, for tests.
void bpe_merge_linear(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out);
void bpe_merge_heap(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out);

}  // namespace holmes::tokenizer
