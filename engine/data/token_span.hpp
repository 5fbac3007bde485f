// A read-only run of token ids as a token file stores them: uint16 (llm.c's GPT-2 files,
// nanoGPT) or uint32 (llm.c's 32-bit files, for vocabularies over 65536 ids).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace holmes::data {

class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(std::span<const uint16_t> s) : p16_(s.data()), size_(s.size()) {}  // NOLINT: implicit by design
  TokenSpan(std::span<const uint32_t> s) : p32_(s.data()), size_(s.size()) {}  // NOLINT
  // Any contiguous range of uint16 or uint32 (a std::vector of tokens, ...).
  template <class R>
    requires std::convertible_to<const R&, std::span<const uint16_t>>
  TokenSpan(const R& r) : TokenSpan(std::span<const uint16_t>(r)) {}  // NOLINT
  template <class R>
    requires std::convertible_to<const R&, std::span<const uint32_t>>
  TokenSpan(const R& r) : TokenSpan(std::span<const uint32_t>(r)) {}  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int width_bytes() const { return p32_ ? 4 : 2; }
  uint32_t operator[](size_t i) const { return p32_ ? p32_[i] : p16_[i]; }
  TokenSpan subspan(size_t offset, size_t count) const {
    TokenSpan s = *this;
    if (p32_) s.p32_ += offset;
    else s.p16_ += offset;
    s.size_ = count;
    return s;
  }
  TokenSpan first(size_t n) const { return subspan(0, n); }
  TokenSpan last(size_t n) const { return subspan(size_ - n, n); }
  // The largest id (0 when empty): one vectorisable pass.
  uint32_t max() const {
    uint32_t top = 0;
    if (p32_)
      for (size_t i = 0; i < size_; ++i) top = p32_[i] > top ? p32_[i] : top;
    else
      for (size_t i = 0; i < size_; ++i) top = p16_[i] > top ? p16_[i] : top;
    return top;
  }

 private:
  const uint16_t* p16_ = nullptr;
  const uint32_t* p32_ = nullptr;
  size_t size_ = 0;
};

}  // namespace holmes::data
