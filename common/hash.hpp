// One stable hash for the whole project (std::hash is not stable across builds): FNV-1a,
// 64 bit. Used for plan hashes, spec and topology digests, derived ports and job tokens, and
// the per-tensor seeds of weight initialisation.
#pragma once

#include <cstdint>
#include <string_view>

namespace holmes {

constexpr uint64_t kFnv1aOffset = 14695981039346656037ull;

// Chain with `h` = an earlier result to hash several pieces as one.
constexpr uint64_t fnv1a(std::string_view text, uint64_t h = kFnv1aOffset) {
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

}  // namespace holmes
