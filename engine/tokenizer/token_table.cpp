#include "engine/tokenizer/token_table.hpp"

#include <cstring>
#include <stdexcept>

namespace holmes::tokenizer {

namespace {

inline uint64_t mix64(uint64_t a, uint64_t b) {
  const __uint128_t p = static_cast<__uint128_t>(a ^ 0xa0761d6478bd642full) * (b ^ 0xe7037ed1a0b428dbull);
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

inline uint64_t load_partial(const char* p, size_t n) {  // n in [0, 8]
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}

}  // namespace

uint64_t hash_bytes(std::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  uint64_t h = 0x243f6a8885a308d3ull ^ n;
  while (n > 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    h = mix64(h, v);
    p += 8;
    n -= 8;
  }
  return mix64(h, load_partial(p, n) ^ (uint64_t{n} << 59));
}

size_t TokenTable::slot_of(std::string_view bytes, uint64_t h) const {
  const size_t mask = slots_.size() - 1;
  const uint32_t tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id == kNoToken) return i;
    if (s.tag == tag && lengths_[s.id] == bytes.size() &&
        std::memcmp(arena_.data() + offsets_[s.id], bytes.data(), bytes.size()) == 0)
      return i;
  }
}

uint32_t TokenTable::find(std::string_view bytes) const {
  if (slots_.empty()) return kNoToken;
  return slots_[slot_of(bytes, hash_bytes(bytes))].id;
}

std::string_view TokenTable::bytes(uint32_t id) const {
  if (!has(id)) return {};
  return {arena_.data() + offsets_[id], lengths_[id]};
}

void TokenTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  for (const Slot& s : old)
    if (s.id != kNoToken) {
      const std::string_view b = bytes(s.id);
      slots_[slot_of(b, hash_bytes(b))] = s;
    }
}

void TokenTable::add(std::string_view b, uint32_t id) {
  if (b.empty()) throw std::invalid_argument("empty token");
  if (id == kNoToken) throw std::invalid_argument("token id out of range");
  if (has(id)) throw std::invalid_argument("id " + std::to_string(id) + " given twice");
  if (2 * (count_ + 1) > slots_.size()) grow();
  const uint64_t h = hash_bytes(b);
  const size_t slot = slot_of(b, h);
  if (slots_[slot].id != kNoToken)
    throw std::invalid_argument("the same bytes are tokens " + std::to_string(slots_[slot].id) + " and " +
                                std::to_string(id));
  if (id >= offsets_.size()) {
    offsets_.resize(id + 1, kNoToken);
    lengths_.resize(id + 1, 0);
  }
  offsets_[id] = static_cast<uint32_t>(arena_.size());
  lengths_[id] = static_cast<uint32_t>(b.size());
  arena_.append(b);
  slots_[slot] = {static_cast<uint32_t>(h >> 32), id};
  ++count_;
}

void PairTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
  mask_ = slots_.size() - 1;
  for (const Slot& s : old)
    if (s.key != kEmpty) {
      size_t i = mix(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
}

void PairTable::add(uint32_t left, uint32_t right, uint32_t rank, uint32_t id) {
  if (2 * (count_ + 1) > slots_.size()) grow();
  const uint64_t key = (uint64_t{left} << 32) | right;
  size_t i = mix(key) & mask_;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  Slot& s = slots_[i];
  if (s.key == key) {
    if (rank < s.merge.rank) s.merge = {rank, id};
    return;
  }
  s = {key, {rank, id}};
  ++count_;
}

}  // namespace holmes::tokenizer
