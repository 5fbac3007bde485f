#include "engine/tokenizer/file_text.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.hpp"

namespace holmes::tokenizer {

std::string read_file_text(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw UserError(fmt::format("{}: the {} does not exist", path, what));
  if (fs::is_directory(st)) throw UserError(fmt::format("{}: is a folder; expected the {}", path, what));
  if (!fs::is_regular_file(st)) throw UserError(fmt::format("{}: is not a regular file; expected the {}", path, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot read the {}: {}", path, what, std::strerror(errno)));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw UserError(fmt::format("{}: reading the {} failed", path, what));
  std::string text = std::move(s).str();
  if (text.empty()) throw UserError(fmt::format("{}: the {} is empty (0 bytes)", path, what));
  return text;
}

}  // namespace holmes::tokenizer
