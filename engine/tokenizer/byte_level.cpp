#include "engine/tokenizer/byte_level.hpp"

#include <array>

namespace holmes::tokenizer {

namespace {

bool stands_for_itself(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

struct Alphabet {
  std::array<uint32_t, 256> code{};  // byte -> code point
  std::array<int, 324> byte{};       // code point -> byte (-1: not in the alphabet)
  std::array<unsigned char, 256> order{};
  Alphabet() {
    byte.fill(-1);
    int shifted = 0, k = 0;
    for (int b = 0; b < 256; ++b)
      if (stands_for_itself(b)) order[k++] = static_cast<unsigned char>(b);
    for (int b = 0; b < 256; ++b)
      if (!stands_for_itself(b)) order[k++] = static_cast<unsigned char>(b);
    for (int b = 0; b < 256; ++b) {
      code[b] = stands_for_itself(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + shifted++);
      byte[code[b]] = b;
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::optional<std::string> bytes_from_byte_level(std::string_view text) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xc0) == 0x80) {
      cp = ((c & 0x1fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3fu);
      i += 2;
    } else {
      return std::nullopt;  // the alphabet ends at U+0143: two bytes at most
    }
    if (cp >= a.byte.size() || a.byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(a.byte[cp]);
  }
  return out;
}

std::string byte_level_from_bytes(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char ch : bytes) {
    const uint32_t cp = a.code[static_cast<unsigned char>(ch)];
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  return out;
}

unsigned char byte_level_order(int i) { return alphabet().order[static_cast<size_t>(i)]; }

}  // namespace holmes::tokenizer
