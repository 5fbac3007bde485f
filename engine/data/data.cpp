#include "engine/data/data.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/errors.hpp"
#include "engine/data/prepare.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::data {

namespace {

std::vector<TokenSpan> spans_of(const std::vector<TokenFile>& files) {
  std::vector<TokenSpan> out;
  for (const auto& f : files) out.push_back(f.tokens());
  return out;
}

int64_t total_of(const std::vector<TokenSpan>& spans) {
  int64_t n = 0;
  for (const auto& s : spans) n += static_cast<int64_t>(s.size());
  return n;
}

// The formats the files were read in ("llmc"; "llmc, raw-uint16" when they differ): with
// data.format auto the log says what was detected.
std::string formats_of(const std::vector<TokenFile>& train, const std::vector<TokenFile>& valid) {
  std::vector<std::string> names;
  for (const auto* files : {&train, &valid})
    for (const auto& f : *files)
      if (std::find(names.begin(), names.end(), token_format_name(f.format())) == names.end())
        names.push_back(token_format_name(f.format()));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

void DataSet::split(const std::vector<TokenSpan>& streams, bool hold_out_tail, int seq_len,
                    uint64_t seed) {
  std::vector<TokenSpan> train, valid;
  for (const auto& s : streams) {
    size_t tail = hold_out_tail ? static_cast<size_t>(static_cast<double>(s.size()) * kValidTailFraction) : 0;
    train.push_back(s.first(s.size() - tail));
    if (tail > 0) valid.push_back(s.last(tail));
  }
  if (!hold_out_tail) valid = spans_of(valid_files_);
  train_.emplace(train, seq_len, seed, /*shuffle=*/true);
  train_tokens_ = total_of(train);
  valid_tokens_ = total_of(valid);
  if (!valid.empty()) valid_.emplace(valid, seq_len, seed, /*shuffle=*/false);
}

// Every stamped file must come from one tokenizer; the first file's sidecar holds its files.
void DataSet::find_tokenizer() {
  const TokenFile* first = nullptr;
  const auto name_of = [](const TokenFile& f) {
    const std::string dir = tokenizer_sidecar(f.path());
    const std::string hash = tokenizer::hash_hex(f.tokenizer()->hash);
    return tokenizer::is_saved_tokenizer(dir) ? fmt::format("{} (hash {})", tokenizer::read_saved_info(dir).name, hash)
                                              : fmt::format("the tokenizer of hash {}", hash);
  };
  for (const auto* list : {&files_, &valid_files_})
    for (const TokenFile& f : *list) {
      if (!f.tokenizer()) continue;
      if (!first) {
        first = &f;
        continue;
      }
      if (f.tokenizer()->hash != first->tokenizer()->hash)
        throw UserError(fmt::format("{}: made with {}, but {} with {}: the token files of one run need one "
                                    "tokenizer", f.path(), name_of(f), first->path(), name_of(*first)));
    }
  if (!first) return;
  const std::string dir = tokenizer_sidecar(first->path());
  const bool saved = tokenizer::is_saved_tokenizer(dir);
  tokenizer_ = Tokenizer{*first->tokenizer(), saved ? tokenizer::read_saved_info(dir).name : "unknown",
                         saved ? dir : ""};
}

std::unique_ptr<DataSet> DataSet::open(const spec::JobSpec& spec) {
  std::unique_ptr<DataSet> d(new DataSet());
  const auto& data = spec.data;
  const int T = spec.train.seq_len;
  const int vocab = spec.model.vocab_size;
  if (data.source == spec::DataSource::kSynthetic) {
    if (data.synthetic.tokens < 4 * static_cast<int64_t>(T) / kValidTailFraction)
      throw UserError(fmt::format("data.synthetic.tokens: {} tokens are too few for seq_len {} (need at least {})",
                                  data.synthetic.tokens, T, static_cast<int64_t>(4 * T / kValidTailFraction)));
    if (vocab <= kEndOfText)
      throw UserError(fmt::format("model.vocab_size: {} is too small for the synthetic byte-level data "
                                  "(needs 257: 256 bytes + end-of-text)", vocab));
    auto grammar = make_synthetic_grammar(data.synthetic.seed);
    auto stats = synthetic_stats(grammar);
    d->synthetic_ = generate_synthetic_tokens(grammar, data.synthetic.tokens, data.synthetic.seed);
    d->entropy_floor_ = stats.entropy_rate;
    d->split({TokenSpan(d->synthetic_)}, /*hold_out_tail=*/true, T, spec.job.seed);
    const auto bytes = tokenizer::make_bytes_tokenizer();
    d->tokenizer_ = Tokenizer{{bytes->hash(), bytes->id_count()}, bytes->name(), ""};
    d->description_ = fmt::format("data: {} (seed {}); {} train / {} validation tokens", describe_synthetic(grammar, stats),
                                  data.synthetic.seed, d->train_tokens_, d->valid_tokens_);
  } else if (data.source == spec::DataSource::kFiles) {
    if (data.train.empty())
      throw UserError("data.train: no token files given (data.source is 'files'; list one or more files made by "
                      "`holmes-train prepare-data`, llm.c or nanoGPT)");
    const TokenFormat fmt_ = data.format;
    for (const auto& f : data.train) d->files_.push_back(TokenFile::open(f, fmt_, vocab));
    for (const auto& f : data.valid) d->valid_files_.push_back(TokenFile::open(f, fmt_, vocab));
    d->find_tokenizer();
    d->split(spans_of(d->files_), /*hold_out_tail=*/data.valid.empty(), T, spec.job.seed);
    d->description_ = fmt::format("data: {} train file(s) ({}), {} tokens; validation {} ({} tokens)",
                                  data.train.size(), formats_of(d->files_, d->valid_files_), d->train_tokens_,
                                  data.valid.empty() ? "held-out tail 5%" : "files", d->valid_tokens_);
  } else {
    throw UserError(fmt::format("data.source: unknown source '{}' (accepted: synthetic, files)", data.source));
  }
  if (d->train_->chunk_count() == 0)
    throw UserError(fmt::format("data.train: {} training tokens hold no sequence of seq_len {} (each file needs at "
                                "least {} tokens)", d->train_tokens_, T, 2 * T));
  return d;
}

}  // namespace holmes::data
