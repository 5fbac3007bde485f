#include "engine/train/run_tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/errors.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::train {

namespace fs = std::filesystem;

checkpoint::RunTokenizer run_tokenizer_of(const data::DataSet& data) {
  const auto& t = data.tokenizer();
  if (!t) return {};
  return {t->stamp.hash, t->name, t->stamp.ids};
}

void check_resume_tokenizer(const std::optional<checkpoint::CheckpointInfo>& resume, const data::DataSet& data) {
  if (!resume || resume->tokenizer.hash == 0 || !data.tokenizer()) return;
  const auto& mine = *data.tokenizer();
  if (mine.stamp.hash != resume->tokenizer.hash)
    throw UserError(fmt::format("{}: the checkpoint was trained on tokens of {} (hash {:016x}, {} ids), but this job's "
                                "data (data.train) was made with {} (hash {:016x}, {} ids): the model would read ids "
                                "that mean other text. Accepted: data made with the checkpoint's tokenizer",
                                resume->dir, resume->tokenizer.name, resume->tokenizer.hash, resume->tokenizer.ids,
                                mine.name, mine.stamp.hash, mine.stamp.ids));
}

void keep_run_tokenizer(const spec::JobSpec& spec, const data::DataSet& data) {
  const auto& t = data.tokenizer();
  if (!t) {
    fmt::print("tokenizer: the token files name none (made by another tool); sample and eval --text will need "
               "--tokenizer\n");
    return;
  }
  if (t->folder.empty() && t->name != "bytes") {
    fmt::print("tokenizer: {} (hash {}) has no files beside the token files; sample and eval --text will need "
               "--tokenizer\n", t->name, tokenizer::hash_hex(t->stamp.hash));
    return;
  }
  const auto tok = t->folder.empty() ? tokenizer::load_tokenizer("bytes") : tokenizer::load_saved_tokenizer(t->folder);
  if (tok->hash() != t->stamp.hash)
    throw UserError(fmt::format("{}: this tokenizer (hash {}) is not the one the token files were made with (hash {})",
                                t->folder, tokenizer::hash_hex(tok->hash()), tokenizer::hash_hex(t->stamp.hash)));
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  tokenizer::save_tokenizer(*tok, paths.tokenizer);
  // Checkpoints outside the output folder carry a copy, so a checkpoint folder alone decodes.
  const fs::path ckpt = fs::weakly_canonical(paths.checkpoints);
  const fs::path outdir = fs::weakly_canonical(paths.output_dir);
  if (std::mismatch(outdir.begin(), outdir.end(), ckpt.begin(), ckpt.end()).first != outdir.end())
    tokenizer::save_tokenizer(*tok, (fs::path(paths.checkpoints) / spec::RunPaths::kTokenizer).string());
  fmt::print("tokenizer: {}; kept in {}\n", tok->describe(), paths.tokenizer);
}

}  // namespace holmes::train
