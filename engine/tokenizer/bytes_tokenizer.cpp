// The byte tokenizer: token = byte value (0..255), 256 = end-of-text between documents. The
// synthetic data's vocabulary and prepare-data's default.
#include <fmt/format.h>

#include "common/hash.hpp"
#include "engine/tokenizer/load.hpp"

namespace holmes::tokenizer {

namespace {

class BytesEncoder final : public Encoder {
 public:
  void encode(std::string_view text, std::vector<uint32_t>* out) override {
    for (char c : text) out->push_back(static_cast<unsigned char>(c));
  }
  size_t encode_range(std::string_view text, size_t from, size_t stop, bool more, std::vector<uint32_t>* out,
                      std::vector<Boundary>* bounds) override {
    const size_t end = std::min(stop, text.size());
    for (size_t i = from; i < end; ++i) {
      if (bounds) bounds->push_back({i, out->size()});
      out->push_back(static_cast<unsigned char>(text[i]));
    }
    return std::max(from, end);
  }
};

class BytesTokenizer final : public Tokenizer {
 public:
  uint32_t id_count() const override { return kBytesIdCount; }
  uint32_t document_token() const override { return kBytesDocumentToken; }
  const std::vector<SpecialToken>& specials() const override { return specials_; }
  std::unique_ptr<Encoder> encoder(bool) const override { return std::make_unique<BytesEncoder>(); }
  std::string decode(std::span<const uint32_t> ids) const override {
    std::string s;
    for (uint32_t t : ids) {
      if (t < 256)
        s.push_back(static_cast<char>(t));
      else if (t == kBytesDocumentToken)
        s += specials_[0].text;
      else
        s += "\xEF\xBF\xBD";
    }
    return s;
  }
  bool splittable() const override { return true; }
  uint64_t hash() const override { return fnv1a("holmes bytes tokenizer 257"); }
  std::string name() const override { return "bytes"; }

 private:
  // Never produced from text: the byte tokenizer has no spelling for end-of-text.
  std::vector<SpecialToken> specials_ = {{"<|endoftext|>", kBytesDocumentToken}};
};

}  // namespace

std::unique_ptr<Tokenizer> make_bytes_tokenizer() { return std::make_unique<BytesTokenizer>(); }

}  // namespace holmes::tokenizer
