#include "engine/tokenizer/load.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::tokenizer {

namespace {

namespace fs = std::filesystem;

std::string accepted() {
  return fmt::format("accepted: 'bytes'; NAME:PATH with NAME one of {}; or a tokenizer.json, a vocab.json / "
                     "encoder.json with merges.txt / vocab.bpe beside it, a NAME.tiktoken rank file, a SentencePiece "
                     ".model, or a folder holding one of them", builtin_names());
}

std::unique_ptr<Tokenizer> make_bpe(BpeSpec spec, const std::string& path) {
  try {
    return std::make_unique<BpeTokenizer>(std::move(spec));
  } catch (const std::invalid_argument& e) {
    throw UserError(fmt::format("{}: {}", path, e.what()));
  }
}

std::unique_ptr<Tokenizer> with_source(std::unique_ptr<Tokenizer> t, std::string prefix,
                                       std::vector<std::string> files, std::string entry) {
  t->set_source({std::move(prefix), std::move(files), std::move(entry)});
  return t;
}

// The file beside `path` called `name`; UserError when it is missing.
std::string partner(const fs::path& path, const char* name, const char* role) {
  const fs::path p = path.parent_path() / name;
  if (!fs::exists(p))
    throw UserError(fmt::format("{}: {} needs its {} beside it, and {} does not exist", path.string(), role, name,
                                p.string()));
  return p.string();
}

// True when the file starts like a tiktoken rank file ("<base64> <digits>\n").
bool looks_like_rank_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line.size() > 200) return false;
  const size_t space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size()) return false;
  for (size_t i = space + 1; i < line.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(line[i])) && !(line[i] == '\r' && i + 1 == line.size())) return false;
  return true;
}

std::unique_ptr<Tokenizer> load_builtin(const BuiltinEncoding& enc, const std::string& path) {
  std::error_code ec;
  if (enc.name == "gpt2" && fs::is_directory(path, ec)) {
    for (const auto& [vocab, merges] : {std::pair{"encoder.json", "vocab.bpe"}, std::pair{"vocab.json", "merges.txt"}})
      if (fs::exists(fs::path(path) / vocab)) {
        const std::string v = (fs::path(path) / vocab).string(), m = partner(fs::path(path) / vocab, merges,
                                                                             "the GPT-2 vocabulary");
        return with_source(make_bpe(read_gpt2_as_tiktoken(v, m), path), "gpt2:", {v, m}, ".");
      }
    throw UserError(fmt::format("{}: holds neither encoder.json + vocab.bpe nor vocab.json + merges.txt (gpt2 reads "
                                "GPT-2's files or gpt2.tiktoken)", path));
  }
  return with_source(make_bpe(read_tiktoken_file(path, enc), path), enc.name + ":", {path},
                     fs::path(path).filename().string());
}

std::unique_ptr<Tokenizer> load_file(const fs::path& p) {
  const std::string path = p.string(), name = p.filename().string(), ext = p.extension().string();
  if (name == "vocab.json" || name == "encoder.json" || name == "merges.txt" || name == "vocab.bpe") {
    const bool hf_names = name == "vocab.json" || name == "merges.txt";
    const bool is_vocab = name == "vocab.json" || name == "encoder.json";
    const std::string vocab = is_vocab ? path : partner(p, hf_names ? "vocab.json" : "encoder.json",
                                                        "the GPT-2 merges file");
    const std::string merges = is_vocab ? partner(p, hf_names ? "merges.txt" : "vocab.bpe", "the GPT-2 vocabulary")
                                        : path;
    return with_source(make_bpe(read_gpt2_files(vocab, merges), path), "", {vocab, merges},
                       fs::path(vocab).filename().string());
  }
  if (ext == ".json") return with_source(make_bpe(read_hf_tokenizer_json(path), path), "", {path}, name);
  if (ext == ".tiktoken") {
    const BuiltinEncoding* enc = find_builtin(p.stem().string());
    if (!enc)
      throw UserError(fmt::format("{}: a tiktoken rank file needs its encoding's split pattern and special tokens; "
                                  "name the encoding: --tokenizer NAME:{} with NAME one of {}", path, path,
                                  builtin_names()));
    return load_builtin(*enc, path);
  }
  if (ext == ".model") {
    if (looks_like_rank_file(path)) return load_builtin(*find_builtin("llama3"), path);
    return with_source(load_sentencepiece(path), "", {path}, name);
  }
  throw UserError(fmt::format("{}: not a tokenizer file holmes-train recognises by its name; {}", path, accepted()));
}

std::unique_ptr<Tokenizer> load_folder(const fs::path& dir) {
  for (const char* name : {"tokenizer.json", "vocab.json", "encoder.json", "tokenizer.model"})
    if (fs::exists(dir / name)) return load_file(dir / name);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tiktoken" && find_builtin(e.path().stem().string())) return load_file(e.path());
  throw UserError(fmt::format("{}: the folder holds no tokenizer.json, vocab.json, encoder.json, tokenizer.model or "
                              "NAME.tiktoken", dir.string()));
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec) {
  if (spec == "bytes") return with_source(make_bytes_tokenizer(), "", {}, "bytes");
  const size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    if (const BuiltinEncoding* enc = find_builtin(spec.substr(0, colon))) {
      const std::string path = spec.substr(colon + 1);
      if (path.empty()) throw UserError(fmt::format("--tokenizer {}: no file after '{}:'; {}", spec, enc->name, accepted()));
      if (!fs::exists(path))
        throw UserError(fmt::format("{}: the {} files do not exist (expected: {})", path, enc->name, enc->files));
      return load_builtin(*enc, path);
    }
  }
  if (const BuiltinEncoding* enc = find_builtin(spec))
    throw UserError(fmt::format("--tokenizer {}: holmes-train ships no vocabulary files; point to them: --tokenizer "
                                "{}:PATH ({})", spec, spec, enc->files));
  std::error_code ec;
  const fs::path p(spec);
  if (!fs::exists(p, ec))
    throw UserError(fmt::format("--tokenizer {}: no such file or folder, and not a built-in name; {}", spec, accepted()));
  if (fs::is_directory(p, ec)) return load_folder(p);
  return load_file(p);
}

}  // namespace holmes::tokenizer
