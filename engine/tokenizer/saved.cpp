#include "engine/tokenizer/saved.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/errors.hpp"
#include "engine/tokenizer/file_text.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

namespace fs = std::filesystem;

void save_tokenizer(const Tokenizer& t, const std::string& dir) {
  const TokenizerSource& src = t.source();
  if (src.entry.empty()) throw std::logic_error("save_tokenizer: the tokenizer does not say where it was read from");
  // Build the copy beside the target and swap it in: a reader sees the old folder or the new.
  const fs::path target(dir), tmp = fs::path(dir + fmt::format(".tmp-{}", ::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (const auto& f : src.files) fs::copy_file(f, tmp / fs::path(f).filename(), fs::copy_options::overwrite_existing);
  const nlohmann::json d = {{"spec", src.prefix + src.entry}, {"name", t.name()}, {"hash", hash_hex(t.hash())},
                            {"ids", t.id_count()}, {"document_token", t.document_token()}};
  std::ofstream out(tmp / kSavedDescriptor, std::ios::trunc);
  out << d.dump(2) << "\n";
  out.close();
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write {}", tmp.string(), kSavedDescriptor));
  if (fs::exists(target)) {
    if (!is_saved_tokenizer(dir))
      throw std::runtime_error(fmt::format("{}: exists and is not a saved tokenizer; not replacing it", dir));
    fs::remove_all(target);
  }
  fs::rename(tmp, target);
}

bool is_saved_tokenizer(const std::string& dir) { return fs::is_regular_file(fs::path(dir) / kSavedDescriptor); }

SavedInfo read_saved_info(const std::string& dir) {
  const std::string file = (fs::path(dir) / kSavedDescriptor).string();
  const std::string text = read_file_text(file, "saved tokenizer descriptor");
  try {
    const nlohmann::json d = nlohmann::json::parse(text);
    SavedInfo info;
    info.spec = d.at("spec").get<std::string>();
    info.name = d.at("name").get<std::string>();
    info.hash = std::stoull(d.at("hash").get<std::string>(), nullptr, 16);
    info.ids = d.at("ids").get<uint32_t>();
    info.document_token = d.value("document_token", int64_t{-1});
    return info;
  } catch (const std::exception& e) {
    throw UserError(fmt::format("{}: malformed saved tokenizer descriptor ({}); expected spec, name, hash, ids", file,
                                e.what()));
  }
}

std::unique_ptr<Tokenizer> load_saved_tokenizer(const std::string& dir) {
  const SavedInfo info = read_saved_info(dir);
  std::string spec = info.spec;
  if (spec != "bytes") {
    const size_t colon = spec.find(':');
    const bool named = colon != std::string::npos && find_builtin(spec.substr(0, colon));
    const std::string prefix = named ? spec.substr(0, colon + 1) : "", entry = named ? spec.substr(colon + 1) : spec;
    spec = prefix + (entry == "." ? dir : (fs::path(dir) / entry).string());
  }
  auto t = load_tokenizer(spec);
  if (t->hash() != info.hash)
    throw UserError(fmt::format("{}: the tokenizer files hash to {}, but {} records {}: they were changed after they "
                                "were saved", dir, hash_hex(t->hash()), kSavedDescriptor, hash_hex(info.hash)));
  return t;
}

}  // namespace holmes::tokenizer
