#include "engine/tokenizer/bpe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace holmes::tokenizer {

void BpeModel::index_bytes() {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_ids[b] = tokens.find(std::string_view(&c, 1));
    if (byte_ids[b] == kNoToken)
      throw std::invalid_argument(fmt::format("the vocabulary has no token for the byte 0x{:02x}; a byte-level BPE "
                                              "vocabulary holds all 256 single bytes", b));
  }
}

void BpeModel::add_rank_merges() {
  for (uint32_t id = 0; id < tokens.id_limit(); ++id) {
    const std::string_view t = tokens.bytes(id);
    for (size_t cut = 1; cut < t.size(); ++cut) {
      const uint32_t a = tokens.find(t.substr(0, cut)), b = tokens.find(t.substr(cut));
      if (a != kNoToken && b != kNoToken) pairs.add(a, b, id, id);
    }
  }
}

namespace {

constexpr size_t kLinearLimit = 96;  // pieces up to this many bytes merge by linear scans

}  // namespace

void bpe_merge_linear(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out) {
  // ids[i]: symbol i; ranks[i]: rank of the pair (ids[i], ids[i+1]), kNoToken = none.
  auto& ids = s.ids;
  auto& ranks = s.ranks;
  const size_t n = piece.size();
  ids.resize(n);
  for (size_t i = 0; i < n; ++i) ids[i] = m.byte_ids[static_cast<unsigned char>(piece[i])];
  ranks.resize(n);
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = m.pairs.find(ids[i], ids[i + 1]).rank;
  ranks[n - 1] = kNoToken;
  size_t len = n;
  while (len > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < len; ++i)
      if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost of equal ranks wins
    if (ranks[best] == kNoToken) break;
    ids[best] = m.pairs.find(ids[best], ids[best + 1]).id;
    std::copy(ids.begin() + best + 2, ids.begin() + len, ids.begin() + best + 1);
    std::copy(ranks.begin() + best + 2, ranks.begin() + len, ranks.begin() + best + 1);
    --len;
    ranks[len - 1] = kNoToken;
    if (best + 1 < len) ranks[best] = m.pairs.find(ids[best], ids[best + 1]).rank;
    if (best > 0) ranks[best - 1] = m.pairs.find(ids[best - 1], ids[best]).rank;
  }
  out->insert(out->end(), ids.begin(), ids.begin() + len);
}

void bpe_merge_heap(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out) {
  // Symbols form a linked list over the byte positions; a merge keeps the left symbol and
  // unlinks the right one. Candidates are (rank, left position) in a min-heap; one that no
  // longer matches the list (a side was merged since) is dropped when popped.
  const uint32_t n = static_cast<uint32_t>(piece.size());
  constexpr uint32_t kEnd = kNoToken;
  auto& ids = s.ids;
  auto& next = s.next;
  auto& prev = s.prev;
  auto& heap = s.heap;
  ids.resize(n);
  next.resize(n);
  prev.resize(n);
  heap.clear();
  const auto later = [](const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  const auto push = [&](uint32_t left) {
    const uint32_t right = next[left];
    if (right == kEnd) return;
    const Merge mg = m.pairs.find(ids[left], ids[right]);
    if (mg.rank == kNoToken) return;
    heap.push_back({mg.rank, left, ids[left], ids[right]});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (uint32_t i = 0; i < n; ++i) {
    ids[i] = m.byte_ids[static_cast<unsigned char>(piece[i])];
    next[i] = i + 1 < n ? i + 1 : kEnd;
    prev[i] = i > 0 ? i - 1 : kEnd;
  }
  for (uint32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Candidate c = heap.back();
    heap.pop_back();
    const uint32_t right = next[c.left];
    // Stale: the left symbol was unlinked (its id is then never read again: prev/next skip
    // it) or either side changed. Unlinked symbols get id kNoToken so they never match.
    if (right == kEnd || ids[c.left] != c.left_id || ids[right] != c.right_id) continue;
    ids[c.left] = m.pairs.find(c.left_id, c.right_id).id;
    ids[right] = kNoToken;
    next[c.left] = next[right];
    if (next[right] != kEnd) prev[next[right]] = c.left;
    push(c.left);
    if (prev[c.left] != kEnd) push(prev[c.left]);
  }
  for (uint32_t i = 0; i != kEnd; i = next[i]) out->push_back(ids[i]);
}

void bpe_encode_piece(const BpeModel& m, std::string_view piece, BpeScratch& s, std::vector<uint32_t>* out) {
  if (piece.size() == 1) {
    out->push_back(m.byte_ids[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (m.whole_piece_first) {
    const uint32_t id = m.tokens.find(piece);
    if (id != kNoToken) {
      out->push_back(id);
      return;
    }
  }
  if (piece.size() <= kLinearLimit)
    bpe_merge_linear(m, piece, s, out);
  else
    bpe_merge_heap(m, piece, s, out);
}

}  // namespace holmes::tokenizer
