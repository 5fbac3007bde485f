#include "engine/data/tokenizer.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/spec/errors.hpp"

namespace holmes::data {

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

namespace {

// The output must not be one of the inputs (it would be overwritten while being the text) and
// must be a file path; every input a readable, non-empty regular file.
void check_prepare_paths(const std::vector<std::string>& inputs, const std::string& out) {
  namespace fs = std::filesystem;
  if (inputs.empty()) throw UserError("prepare-data --input: no input files given");
  std::error_code ec;
  if (fs::is_directory(out, ec))
    throw UserError(fmt::format("prepare-data --out: '{}' is a folder; expected the path of the token file to write",
                                out));
  for (const auto& path : inputs) {
    if (!fs::exists(path, ec))
      throw UserError(fmt::format("prepare-data --input: '{}' does not exist; expected a text file", path));
    if (fs::is_directory(path, ec))
      throw UserError(fmt::format("prepare-data --input: '{}' is a folder; expected text files (e.g. --input "
                                  "{}/*.txt)", path, path));
    if (!fs::is_regular_file(path, ec))
      throw UserError(fmt::format("prepare-data --input: '{}' is not a regular file; expected a text file", path));
    if (fs::exists(out, ec) && fs::equivalent(path, out, ec))
      throw UserError(fmt::format("prepare-data --out: '{}' is also an --input ('{}'); writing it would destroy the "
                                  "text: choose another output path", out, path));
    if (fs::file_size(path, ec) == 0)
      throw UserError(fmt::format("prepare-data --input: '{}' is empty (0 bytes); expected a text file with at least "
                                  "one byte", path));
  }
}

}  // namespace

int64_t prepare_byte_tokens(const std::vector<std::string>& inputs, const std::string& out) {
  check_prepare_paths(inputs, out);
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

}  // namespace holmes::data
