// tiktoken rank files: one token a line, "<base64 of the token's bytes> <rank>", ranks 0..n-1
// (the rank is also the token's id). Llama 3's tokenizer.model has the same format.
#include <fmt/format.h>

#include <array>
#include <charconv>

#include "common/errors.hpp"
#include "engine/tokenizer/file_text.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

namespace {

// Standard base64 (RFC 4648, with padding); nullopt-like empty result plus ok=false on a bad digit.
bool decode_base64(std::string_view in, std::string* out) {
  static const std::array<int8_t, 256> value = [] {
    std::array<int8_t, 256> v{};
    v.fill(-1);
    const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(digits[i])] = static_cast<int8_t>(i);
    return v;
  }();
  out->clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value[static_cast<unsigned char>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return !out->empty();
}

}  // namespace

BpeSpec read_tiktoken_file(const std::string& path, const BuiltinEncoding& enc) {
  const std::string text = read_file_text(path, fmt::format("tiktoken rank file of {}", enc.name));
  BpeSpec spec;
  spec.name = enc.name;
  spec.pattern = enc.pattern;
  spec.specials = enc.specials;
  spec.model.whole_piece_first = true;
  std::string bytes;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    uint32_t rank = 0;
    const std::string_view r = space == std::string_view::npos ? std::string_view{} : line.substr(space + 1);
    const auto [ptr, ec] = std::from_chars(r.data(), r.data() + r.size(), rank);
    if (space == std::string_view::npos || ec != std::errc() || ptr != r.data() + r.size() ||
        !decode_base64(line.substr(0, space), &bytes))
      throw UserError(fmt::format("{}:{}: malformed tiktoken rank line '{}'; expected '<base64 token> <rank>' (is "
                                  "this a tiktoken rank file?)", path, line_no, line.substr(0, 80)));
    try {
      spec.model.tokens.add(bytes, rank);
    } catch (const std::invalid_argument& e) {
      throw UserError(fmt::format("{}:{}: {}; a rank file lists each token and each rank once", path, line_no,
                                  e.what()));
    }
  }
  const TokenTable& t = spec.model.tokens;
  if (t.size() != enc.rank_count || t.id_limit() != enc.rank_count)
    throw UserError(fmt::format("{}: holds {} ranks (largest {}); {} has ranks 0..{}: is it the rank file of another "
                                "encoding? (expected: {})", path, t.size(), t.id_limit() - 1, enc.name,
                                enc.rank_count - 1, enc.files));
  spec.model.add_rank_merges();
  for (const auto& s : enc.specials)
    if (s.text == enc.document_token) spec.document_token = s.id;
  return spec;
}

}  // namespace holmes::tokenizer
