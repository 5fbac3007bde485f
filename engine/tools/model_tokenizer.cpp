#include "engine/tools/model_tokenizer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "common/errors.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/tokenizer/bpe_tokenizer.hpp"
#include "engine/tokenizer/hf_export.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::tools {

namespace fs = std::filesystem;

namespace {

std::string find_saved(const std::string& checkpoint) {
  fs::path p = fs::absolute(checkpoint).lexically_normal();
  if (!fs::is_directory(p)) p = p.parent_path();
  if (tokenizer::is_saved_tokenizer(p.string())) return p.string();
  for (int up = 0; up <= 3 && !p.empty(); ++up, p = p.parent_path()) {
    const fs::path t = p / spec::RunPaths::kTokenizer;
    if (tokenizer::is_saved_tokenizer(t.string())) return t.string();
    if (p == p.root_path()) break;
  }
  return "";
}

}  // namespace

ModelTokenizer model_tokenizer(const std::string& checkpoint, const FullModel& m, const std::string& override_spec,
                               bool required) {
  ModelTokenizer out;
  const checkpoint::RunTokenizer& recorded = m.tokenizer;
  if (!override_spec.empty()) {
    out.tokenizer = tokenizer::load_tokenizer(override_spec);
    out.from = "--tokenizer " + override_spec;
  } else if (const std::string dir = find_saved(checkpoint); !dir.empty()) {
    out.tokenizer = tokenizer::load_saved_tokenizer(dir);
    out.from = dir;
  } else if (recorded.hash == 0 && m.config.vocab == static_cast<int>(tokenizer::kBytesIdCount)) {
    out.tokenizer = tokenizer::load_tokenizer("bytes");
    out.from = "bytes (a 257-id model with no tokenizer recorded: the synthetic data's)";
  } else {
    if (!required) return out;
    throw UserError(fmt::format(
        "--checkpoint {}: no tokenizer found: none kept beside it (a 'tokenizer' folder in it or its parent "
        "folders){}; give one: --tokenizer SPEC", checkpoint,
        recorded.hash ? fmt::format(", though it was trained with {} (hash {:016x})", recorded.name, recorded.hash)
                      : ""));
  }
  const tokenizer::Tokenizer& t = *out.tokenizer;
  if (recorded.hash != 0 && t.hash() != recorded.hash)
    throw UserError(fmt::format("{}: this tokenizer is {} (hash {}), but the model at {} was trained with {} (hash "
                                "{:016x}): accepted: the run's own tokenizer", out.from, t.name(),
                                tokenizer::hash_hex(t.hash()), checkpoint, recorded.name, recorded.hash));
  if (t.id_count() > static_cast<uint32_t>(m.config.vocab))
    throw UserError(fmt::format("{}: the tokenizer {} has {} ids, more than the vocabulary of the model at {} ({}): "
                                "not the tokenizer it was trained with", out.from, t.name(), t.id_count(), checkpoint,
                                m.config.vocab));
  return out;
}

std::string export_tokenizer(const ModelTokenizer& mt, const std::string& out_dir) {
  const fs::path dir(out_dir);
  // A previous export's tokenizer files belong to its model, not to this one.
  for (const char* f : {kHfTokenizerFile, kSentencePieceFile}) fs::remove(dir / f);
  if (!mt.tokenizer) return "no tokenizer is kept beside the checkpoint: none written";
  if (const auto* bpe = dynamic_cast<const tokenizer::BpeTokenizer*>(mt.tokenizer.get())) {
    const fs::path tmp = dir / (std::string(".") + kHfTokenizerFile + ".holmes-tmp");  // export.cpp's naming
    std::ofstream(tmp, std::ios::trunc) << tokenizer::hf_tokenizer_json(*bpe);
    fs::rename(tmp, dir / kHfTokenizerFile);
    return fmt::format("{}/{} ({}, {} ids)", out_dir, kHfTokenizerFile, bpe->name(), bpe->id_count());
  }
  const auto& files = mt.tokenizer->source().files;
  if (mt.tokenizer->name().starts_with("sentencepiece") && files.size() == 1) {
    fs::copy_file(files[0], dir / kSentencePieceFile, fs::copy_options::overwrite_existing);
    return fmt::format("{}/{} (SentencePiece, {} ids)", out_dir, kSentencePieceFile, mt.tokenizer->id_count());
  }
  return fmt::format("the {} tokenizer has no Hugging Face file: none written", mt.tokenizer->name());
}

}  // namespace holmes::tools
