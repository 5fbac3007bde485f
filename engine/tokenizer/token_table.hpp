// The two lookup tables behind byte-level BPE, built once per vocabulary and read by every
// encoding thread without locks:
//   TokenTable: token bytes <-> id (the vocabulary; ids need not be dense);
//   PairTable:  (left id, right id) -> (merge rank, merged id): the merges BPE may apply.
// Both are open-addressing hash tables with power-of-two capacities at most half full, so a
// lookup is one hash and, almost always, one probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace holmes::tokenizer {

inline constexpr uint32_t kNoToken = 0xffffffffu;

// A stable 64-bit hash of a byte string (8 bytes a step; not cryptographic).
uint64_t hash_bytes(std::string_view bytes);

class TokenTable {
 public:
  // Adds `bytes` as token `id`. std::invalid_argument when the bytes or the id are already
  // present, or the bytes are empty.
  void add(std::string_view bytes, uint32_t id);
  // The id of `bytes`, kNoToken when they are not a token.
  uint32_t find(std::string_view bytes) const;
  // The bytes of `id` ("" when `id` is not a token: see has()).
  std::string_view bytes(uint32_t id) const;
  bool has(uint32_t id) const { return id < offsets_.size() && offsets_[id] != kNoToken; }
  // One past the largest id; size() tokens live below it.
  uint32_t id_limit() const { return static_cast<uint32_t>(offsets_.size()); }
  size_t size() const { return count_; }

 private:
  void grow();
  size_t slot_of(std::string_view bytes, uint64_t h) const;

  std::string arena_;              // every token's bytes, back to back
  std::vector<uint32_t> offsets_;  // per id: start in arena_ (kNoToken: no such id)
  std::vector<uint32_t> lengths_;  // per id: byte count
  struct Slot {
    uint32_t tag = 0;         // upper hash bits, to skip most byte comparisons
    uint32_t id = kNoToken;   // kNoToken = empty
  };
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

struct Merge {
  uint32_t rank = kNoToken;  // lower merges first; kNoToken = no merge for this pair
  uint32_t id = kNoToken;    // the merged token
};

class PairTable {
 public:
  // Records that (left, right) merge into `id` at `rank`. A pair given twice keeps the lower
  // rank (a merges list may repeat a pair; the first line wins).
  void add(uint32_t left, uint32_t right, uint32_t rank, uint32_t id);
  Merge find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return {};
    const uint64_t key = (uint64_t{left} << 32) | right;
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.merge;
      if (s.key == kEmpty) return {};
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t mix(uint64_t k) {
    k ^= k >> 31;
    k *= 0x9e3779b97f4a7c15ull;
    return k ^ (k >> 29);
  }
  void grow();
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0, count_ = 0;
};

}  // namespace holmes::tokenizer
