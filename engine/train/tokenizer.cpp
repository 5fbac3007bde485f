#include "engine/train/tokenizer.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "engine/spec/errors.hpp"

namespace holmes::train {

void encode_bytes(std::string_view text, std::vector<uint16_t>* out) {
  out->reserve(out->size() + text.size());
  for (char c : text) out->push_back(static_cast<unsigned char>(c));
}

std::string decode_bytes(std::span<const int32_t> tokens, std::string_view eot_text) {
  std::string s;
  for (int32_t t : tokens) {
    if (t >= 0 && t < 256)
      s.push_back(static_cast<char>(t));
    else if (t == kEndOfText)
      s.append(eot_text);
    else
      s.append("\xEF\xBF\xBD");
  }
  return s;
}

int64_t prepare_byte_tokens(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) throw UserError("prepare-data --input: no input files given");
  std::vector<uint16_t> tokens;
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UserError(fmt::format("{}: cannot read the input text file: {}", path, std::strerror(errno)));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw UserError(fmt::format("{}: reading the input text file failed", path));
    tokens.push_back(kEndOfText);
    encode_bytes(text, &tokens);
  }
  write_llmc_tokens(out, tokens);
  return static_cast<int64_t>(tokens.size());
}

}  // namespace holmes::train
