// SentencePiece models (Llama 2, Mistral 7B tokenizer.model) through libsentencepiece: the
// library normalizes, adds its dummy prefix and segments; this adapter only maps ids and
// handles control tokens (<s>, </s>), which libsentencepiece never produces from text: with
// allow_special their spelling in the text becomes the control token.
#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <stdexcept>

#include "common/errors.hpp"
#include "common/hash.hpp"
#include "engine/tokenizer/bpe_tokenizer.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

namespace {

class SentencePieceTokenizer;

class SentencePieceEncoder final : public Encoder {
 public:
  SentencePieceEncoder(const sentencepiece::SentencePieceProcessor& sp, const SpecialMatcher* specials)
      : sp_(sp), specials_(specials) {}

  void encode(std::string_view text, std::vector<uint32_t>* out) override {
    size_t pos = 0;
    while (pos < text.size()) {
      const SpecialMatcher::Hit hit = specials_ ? specials_->find(text, pos) : SpecialMatcher::Hit{};
      const size_t end = hit.pos == std::string_view::npos ? text.size() : hit.pos;
      if (end > pos) encode_plain(text.substr(pos, end - pos), out);
      if (hit.pos == std::string_view::npos) break;
      out->push_back(hit.id);
      pos = hit.pos + hit.length;
    }
  }

  size_t encode_range(std::string_view text, size_t from, size_t stop, bool more, std::vector<uint32_t>* out,
                      std::vector<Boundary>* bounds) override {
    if (from != 0 || more) throw std::logic_error("SentencePiece encodes a document in one call");
    if (bounds) bounds->push_back({0, out->size()});
    encode(text, out);
    return text.size();
  }

 private:
  void encode_plain(std::string_view text, std::vector<uint32_t>* out) {
    ids_.clear();
    const auto status = sp_.Encode(text, &ids_);
    if (!status.ok()) throw std::runtime_error("SentencePiece: encoding failed: " + status.ToString());
    for (int id : ids_) out->push_back(static_cast<uint32_t>(id));
  }

  const sentencepiece::SentencePieceProcessor& sp_;
  const SpecialMatcher* specials_;
  std::vector<int> ids_;
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(path) {
    const auto status = sp_.Load(path);
    if (!status.ok())
      throw UserError(fmt::format("{}: not a SentencePiece model that libsentencepiece can load ({}); accepted: a "
                                  "SentencePiece .model, a tiktoken rank file, tokenizer.json, vocab.json + merges.txt",
                                  path, status.ToString()));
    const int n = sp_.GetPieceSize();
    for (int id = 0; id < n; ++id)
      if (sp_.IsControl(id)) specials_.push_back({sp_.IdToPiece(id), static_cast<uint32_t>(id)});
    const int doc = sp_.bos_id() >= 0 ? sp_.bos_id() : sp_.eos_id();
    if (doc < 0)
      throw UserError(fmt::format("{}: the SentencePiece model defines neither a BOS nor an EOS token to separate "
                                  "documents", path));
    document_ = static_cast<uint32_t>(doc);
    std::vector<const SpecialToken*> ptrs;
    for (const auto& s : specials_) ptrs.push_back(&s);
    matcher_ = std::make_unique<SpecialMatcher>(ptrs);
    const auto proto = sp_.serialized_model_proto();
    hash_ = fnv1a(std::string_view(proto.data(), proto.size()), fnv1a("holmes sentencepiece 1"));
  }

  uint32_t id_count() const override { return static_cast<uint32_t>(sp_.GetPieceSize()); }
  uint32_t document_token() const override { return document_; }
  const std::vector<SpecialToken>& specials() const override { return specials_; }
  std::unique_ptr<Encoder> encoder(bool allow_special) const override {
    return std::make_unique<SentencePieceEncoder>(sp_, allow_special ? matcher_.get() : nullptr);
  }
  std::string decode(std::span<const uint32_t> ids) const override {
    // libsentencepiece decodes runs of ordinary ids (it joins byte pieces and drops the
    // dummy prefix); control tokens are written as their text, ids out of range as U+FFFD.
    std::string out, part;
    std::vector<int> run;
    const auto flush = [&] {
      if (run.empty()) return;
      if (!sp_.Decode(run, &part).ok()) part = "\xEF\xBF\xBD";
      out += part;
      run.clear();
    };
    for (uint32_t id : ids) {
      if (id >= id_count()) {
        flush();
        out += "\xEF\xBF\xBD";
      } else if (sp_.IsControl(static_cast<int>(id))) {
        flush();
        out += sp_.IdToPiece(static_cast<int>(id));
      } else {
        run.push_back(static_cast<int>(id));
      }
    }
    flush();
    return out;
  }
  bool splittable() const override { return false; }
  uint64_t hash() const override { return hash_; }
  std::string name() const override { return "sentencepiece " + path_; }

 private:
  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
  std::vector<SpecialToken> specials_;
  std::unique_ptr<SpecialMatcher> matcher_;
  uint32_t document_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  return std::make_unique<SentencePieceTokenizer>(path);
}

}  // namespace holmes::tokenizer
