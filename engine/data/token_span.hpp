// A read-only run of token ids as a token file stores them: uint16 (llm.c's GPT-2 files,
// nanoGPT), uint32 (llm.c's 32-bit files) or any integer type a Megatron indexed dataset
// declares (uint8, int8, int16, int32, int64). Ids are read as uint32 once the file's range
// check (token_file.hpp: every id in [0, vocab_size)) has passed.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

namespace holmes::data {

enum class TokenType { kUint8, kInt8, kInt16, kUint16, kInt32, kUint32, kInt64 };

constexpr int token_type_bytes(TokenType t) {
  switch (t) {
    case TokenType::kUint8:
    case TokenType::kInt8: return 1;
    case TokenType::kInt16:
    case TokenType::kUint16: return 2;
    case TokenType::kInt32:
    case TokenType::kUint32: return 4;
    case TokenType::kInt64: return 8;
  }
  return 0;
}

class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const void* data, size_t size, TokenType type)
      : p_(static_cast<const std::byte*>(data)), size_(size), type_(type) {}
  TokenSpan(std::span<const uint16_t> s) : TokenSpan(s.data(), s.size(), TokenType::kUint16) {}  // NOLINT: implicit
  TokenSpan(std::span<const uint32_t> s) : TokenSpan(s.data(), s.size(), TokenType::kUint32) {}  // NOLINT
  // Any contiguous range of uint16 or uint32 (a std::vector of tokens, ...).
  template <class R>
    requires std::convertible_to<const R&, std::span<const uint16_t>>
  TokenSpan(const R& r) : TokenSpan(std::span<const uint16_t>(r)) {}  // NOLINT
  template <class R>
    requires std::convertible_to<const R&, std::span<const uint32_t>>
  TokenSpan(const R& r) : TokenSpan(std::span<const uint32_t>(r)) {}  // NOLINT

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  TokenType type() const { return type_; }
  int width_bytes() const { return token_type_bytes(type_); }
  uint32_t operator[](size_t i) const { return static_cast<uint32_t>(at(i)); }
  // The id as stored (negative for a signed file's negative values).
  int64_t at(size_t i) const {
    switch (type_) {
      case TokenType::kUint8: return as<uint8_t>()[i];
      case TokenType::kInt8: return as<int8_t>()[i];
      case TokenType::kInt16: return as<int16_t>()[i];
      case TokenType::kUint16: return as<uint16_t>()[i];
      case TokenType::kInt32: return as<int32_t>()[i];
      case TokenType::kUint32: return as<uint32_t>()[i];
      case TokenType::kInt64: return as<int64_t>()[i];
    }
    return 0;
  }
  TokenSpan subspan(size_t offset, size_t count) const {
    return TokenSpan(p_ + offset * static_cast<size_t>(width_bytes()), count, type_);
  }
  TokenSpan first(size_t n) const { return subspan(0, n); }
  TokenSpan last(size_t n) const { return subspan(size_ - n, n); }
  // The smallest and largest id as stored (0, 0 when empty): one vectorisable pass each.
  int64_t min() const { return reduce([](auto a, auto b) { return b < a ? b : a; }); }
  int64_t max() const { return reduce([](auto a, auto b) { return b > a ? b : a; }); }

 private:
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(p_);
  }
  template <class T, class F>
  int64_t reduce_as(F f) const {
    const T* p = as<T>();
    T top = p[0];
    for (size_t i = 1; i < size_; ++i) top = f(top, p[i]);
    return static_cast<int64_t>(top);
  }
  template <class F>
  int64_t reduce(F f) const {
    if (size_ == 0) return 0;
    switch (type_) {
      case TokenType::kUint8: return reduce_as<uint8_t>(f);
      case TokenType::kInt8: return reduce_as<int8_t>(f);
      case TokenType::kInt16: return reduce_as<int16_t>(f);
      case TokenType::kUint16: return reduce_as<uint16_t>(f);
      case TokenType::kInt32: return reduce_as<int32_t>(f);
      case TokenType::kUint32: return reduce_as<uint32_t>(f);
      case TokenType::kInt64: return reduce_as<int64_t>(f);
    }
    return 0;
  }

  const std::byte* p_ = nullptr;
  size_t size_ = 0;
  TokenType type_ = TokenType::kUint16;
};

}  // namespace holmes::data
