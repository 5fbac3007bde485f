#include "engine/data/data.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/errors.hpp"
#include "common/rng.hpp"
#include "engine/data/prepare.hpp"
#include "engine/data/synthetic.hpp"
#include "engine/tokenizer/load.hpp"
#include "engine/tokenizer/saved.hpp"

namespace holmes::data {

// One source's token streams: its files (or the synthetic stream) as whole spans, with each
// file's Megatron index (nullptr for the other formats).
struct DataSet::Opened {
  std::string name;
  double weight = 1;
  std::vector<TokenFile> files;
  std::vector<TokenSpan> spans;
  std::vector<const IndexedIndex*> indexes;
  std::vector<std::string> paths;
  int64_t tokens() const {
    int64_t n = 0;
    for (const auto& s : spans) n += static_cast<int64_t>(s.size());
    return n;
  }
};

DataSet::~DataSet() {
  if (trace_) std::fclose(trace_);
}

namespace {

// The formats the files were read in ("llmc"; "llmc, megatron" when they differ).
std::string formats_of(const std::vector<TokenFile>& files) {
  std::vector<std::string> names;
  for (const auto& f : files)
    if (std::find(names.begin(), names.end(), token_format_name(f.format())) == names.end())
      names.push_back(token_format_name(f.format()));
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

// Every stamped file must come from one tokenizer; the first file's sidecar holds its files.
void DataSet::find_tokenizer() {
  const TokenFile* first = nullptr;
  const auto name_of = [](const TokenFile& f) {
    const std::string dir = tokenizer_sidecar(f.path());
    const std::string hash = tokenizer::hash_hex(f.tokenizer()->hash);
    return tokenizer::is_saved_tokenizer(dir) ? fmt::format("{} (hash {})", tokenizer::read_saved_info(dir).name, hash)
                                              : fmt::format("the tokenizer of hash {}", hash);
  };
  for (const auto* list : {&train_files_, &valid_files_})
    for (const auto& source : *list)
      for (const TokenFile& f : source->files) {
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
  const auto info = saved ? tokenizer::read_saved_info(dir) : tokenizer::SavedInfo{};
  tokenizer_ = Tokenizer{*first->tokenizer(), saved ? info.name : "unknown", saved ? dir : "", info.document_token};
}

int64_t DataSet::document_token(const spec::JobSpec& spec) const {
  if (spec.data.document_token >= 0) return spec.data.document_token;
  if (spec.data.source == spec::DataSource::kSynthetic) return kEndOfText;
  return tokenizer_ ? tokenizer_->document_token : -1;
}

void DataSet::open_files(const spec::JobSpec& spec) {
  const int vocab = spec.model.vocab_size;
  for (const auto* list : {&spec.data.train, &spec.data.valid})
    for (const spec::DataSourceSpec& s : *list) {
      auto o = std::make_unique<Opened>();
      o->name = s.name;
      o->weight = s.weight;
      o->paths = s.paths;
      for (const auto& path : s.paths) {
        o->files.push_back(TokenFile::open(path, spec.data.format, vocab));
        o->spans.push_back(o->files.back().tokens());
        o->indexes.push_back(o->files.back().index());
      }
      (list == &spec.data.train ? train_files_ : valid_files_).push_back(std::move(o));
    }
}

void DataSet::build(const spec::JobSpec& spec) {
  const int T = spec.train.seq_len;
  const uint64_t seed = spec.job.seed;
  const SequenceOptions opts{spec.data.document_mask, spec.data.mask_document_start};
  const bool documents = opts.positions || opts.mask_document_start;
  const int64_t doc_token = documents ? document_token(spec) : -1;
  // Where documents start in file k of `o`, its span starting at token `base`.
  auto starts = [&](const Opened& o, size_t k, int64_t base) {
    if (documents && !o.indexes[k] && doc_token < 0)
      throw UserError(fmt::format("data.document_mask: {} does not say where its documents start: it is no Megatron "
                                  "dataset and has no tokenizer folder beside it naming the document token (an llm.c "
                                  "or nanoGPT file?); set data.document_token (GPT-2's <|endoftext|> is 50256)",
                                  o.paths.at(k)));
    return DocumentStarts{o.indexes[k], base, o.indexes[k] ? -1 : doc_token};
  };
  const bool hold_out = spec.data.valid.empty();
  std::vector<SequenceStream::Source> train;
  for (size_t s = 0; s < train_files_.size(); ++s) {
    const Opened& o = *train_files_[s];
    std::vector<TokenSpan> tr, va;
    std::vector<DocumentStarts> tr_docs, va_docs;
    for (size_t k = 0; k < o.spans.size(); ++k) {
      const TokenSpan& whole = o.spans[k];
      const size_t tail = hold_out ? static_cast<size_t>(static_cast<double>(whole.size()) * kValidTailFraction) : 0;
      tr.push_back(whole.first(whole.size() - tail));
      tr_docs.push_back(starts(o, k, 0));
      if (tail > 0) {
        va.push_back(whole.last(tail));
        va_docs.push_back(starts(o, k, static_cast<int64_t>(whole.size() - tail)));
      }
    }
    // Source 0 keeps the job seed: a one-source run reads what it read before mixtures existed.
    const uint64_t source_seed = s == 0 ? seed : hash_words(seed, s, 0x6d6978u);
    for (const auto& x : tr) train_tokens_ += static_cast<int64_t>(x.size());
    for (const auto& x : va) valid_tokens_ += static_cast<int64_t>(x.size());
    BatchSampler sampler(tr, T, source_seed, /*shuffle=*/true, tr_docs, opts);
    if (sampler.chunk_count() == 0)
      throw UserError(fmt::format("data.train: source '{}' ({} training tokens) holds no sequence of seq_len {} (each "
                                  "file needs at least {} tokens)", o.name, o.tokens(), T, 2 * T));
    train.push_back({o.name, o.weight, std::move(sampler)});
    BatchSampler held(va, T, source_seed, /*shuffle=*/false, va_docs, opts);
    if (held.chunk_count() > 0) valid_.push_back({o.name, o.weight, std::move(held)});
  }
  for (const auto& v : valid_files_) {
    std::vector<DocumentStarts> docs;
    for (size_t k = 0; k < v->spans.size(); ++k) docs.push_back(starts(*v, k, 0));
    for (const auto& x : v->spans) valid_tokens_ += static_cast<int64_t>(x.size());
    BatchSampler sampler(v->spans, T, seed, /*shuffle=*/false, docs, opts);
    if (sampler.chunk_count() > 0) valid_.push_back({v->name, v->weight, std::move(sampler)});
  }
  train_.emplace(std::move(train));
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
    auto o = std::make_unique<Opened>();
    o->name = "synthetic";
    o->spans = {TokenSpan(d->synthetic_)};
    o->indexes = {nullptr};
    o->paths = {"the synthetic data"};
    d->train_files_.push_back(std::move(o));
    const auto bytes = tokenizer::make_bytes_tokenizer();
    d->tokenizer_ = Tokenizer{{bytes->hash(), bytes->id_count()}, bytes->name(), "", kEndOfText};
    spec::JobSpec held = spec;
    held.data.valid.clear();  // the synthetic data always holds out its tail
    d->build(held);
    d->description_ = fmt::format("data: {} (seed {}); {} train / {} validation tokens",
                                  describe_synthetic(grammar, stats), data.synthetic.seed, d->train_tokens_,
                                  d->valid_tokens_);
  } else if (data.source == spec::DataSource::kFiles) {
    if (data.train.empty())
      throw UserError("data.train: no token files given (data.source is 'files'; list one or more files made by "
                      "`holmes-train prepare-data`, llm.c, nanoGPT or Megatron-LM's preprocessing)");
    d->open_files(spec);
    d->find_tokenizer();
    d->build(spec);
    std::vector<TokenFile> none;
    const auto formats = [&](const Opened& o) { return formats_of(o.files); };
    const std::string valid = data.valid.empty() ? "held-out tail 5%" : "files";
    if (d->train_files_.size() == 1) {
      d->description_ = fmt::format("data: {} train file(s) ({}), {} tokens; validation {} ({} tokens)",
                                    data.train[0].paths.size(), formats(*d->train_files_[0]), d->train_tokens_, valid,
                                    d->valid_tokens_);
    } else {
      std::vector<std::string> parts;
      double sum = 0;
      for (const auto& o : d->train_files_) sum += o->weight;
      for (const auto& o : d->train_files_)
        parts.push_back(fmt::format("{} {:.1f}% ({} file(s), {}, {} tokens)", o->name, 100 * o->weight / sum,
                                    o->files.size(), formats(*o), o->tokens()));
      d->description_ = fmt::format("data: a mixture of {} sources by token weight: {}; validation {} ({} tokens, "
                                    "{} source(s))", d->train_files_.size(), fmt::join(parts, ", "), valid,
                                    d->valid_tokens_, d->valid_.size());
    }
  } else {
    throw UserError(fmt::format("data.source: unknown source '{}' (accepted: synthetic, files)", data.source));
  }
  if (data.document_mask || data.mask_document_start)
    d->description_ += fmt::format("\ndocuments: {}{}", data.document_mask ? "masked (attention block-causal over the "
                                   "documents of a sequence, positions restart at each)" : "not masked",
                                   data.mask_document_start ? "; the loss of each document's first token left out"
                                                            : "");
  // Test hook (docs/training.md): every training sequence this process reads, appended to
  // DIR/trace-PID.txt as "STREAM_INDEX SOURCE SEGMENT OFFSET".
  if (const char* dir = std::getenv("HOLMES_TEST_DATA_TRACE"); dir && *dir) {
    const std::string path = fmt::format("{}/trace-{}.txt", dir, ::getpid());
    d->trace_ = std::fopen(path.c_str(), "a");
    if (!d->trace_)
      throw UserError(fmt::format("HOLMES_TEST_DATA_TRACE: cannot write {}: {}", path, std::strerror(errno)));
    d->train_->set_trace(d->trace_);
  }
  return d;
}

}  // namespace holmes::data
