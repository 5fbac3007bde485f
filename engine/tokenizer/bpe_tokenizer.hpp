// Byte-level BPE tokenizers: a split pattern (splitter.hpp), a vocabulary with merges
// (bpe.hpp) and special tokens. The loaders (tiktoken_files.cpp, hf_files.cpp) fill a BpeSpec;
// the BpeTokenizer only encodes and decodes it.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizer/bpe.hpp"
#include "engine/tokenizer/splitter.hpp"
#include "engine/tokenizer/tokenizer.hpp"

namespace holmes::tokenizer {

struct BpeSpec {
  std::string name;  // for messages: "cl100k_base", "tokenizer.json", ...
  BpeModel model;    // tokens, pair table, byte ids, whole_piece_first
  // Hugging Face / GPT-2 merges in file order (rank = index); empty for tiktoken, whose
  // merges follow from the ranks (BpeModel::add_rank_merges).
  std::vector<std::pair<uint32_t, uint32_t>> merges;
  std::string pattern;
  std::vector<SpecialToken> specials;  // produced from text only with allow_special
  std::vector<SpecialToken> added;     // HF added tokens that are not special: always matched
  uint32_t document_token = kNoToken;
};

// Finds the special tokens in text: leftmost occurrence, longest among those starting there.
class SpecialMatcher {
 public:
  explicit SpecialMatcher(const std::vector<const SpecialToken*>& tokens);
  bool empty() const { return tokens_.empty(); }
  size_t max_length() const { return max_length_; }
  struct Hit {
    size_t pos = std::string_view::npos;
    size_t length = 0;
    uint32_t id = 0;
  };
  Hit find(std::string_view text, size_t from) const;

 private:
  std::vector<SpecialToken> tokens_;  // longest first
  bool first_[256] = {};
  size_t max_length_ = 0;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // std::invalid_argument when the pattern does not compile, a byte has no token, or the
  // document token is not a token.
  explicit BpeTokenizer(BpeSpec spec);

  uint32_t id_count() const override { return id_count_; }
  uint32_t document_token() const override { return spec_.document_token; }
  const std::vector<SpecialToken>& specials() const override { return spec_.specials; }
  std::unique_ptr<Encoder> encoder(bool allow_special) const override;
  std::string decode(std::span<const uint32_t> ids) const override;
  bool splittable() const override { return true; }
  uint64_t hash() const override { return hash_; }
  std::string name() const override { return spec_.name; }

  const BpeSpec& spec() const { return spec_; }
  const Splitter& splitter() const { return *splitter_; }
  const SpecialMatcher& matcher(bool allow_special) const { return allow_special ? with_specials_ : added_only_; }

 private:
  BpeSpec spec_;
  std::unique_ptr<Splitter> splitter_;
  SpecialMatcher with_specials_, added_only_;
  std::unordered_map<uint32_t, std::string> special_text_;
  uint32_t id_count_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace holmes::tokenizer
