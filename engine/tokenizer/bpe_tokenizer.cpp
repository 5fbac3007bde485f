#include "engine/tokenizer/bpe_tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/hash.hpp"

namespace holmes::tokenizer {

SpecialMatcher::SpecialMatcher(const std::vector<const SpecialToken*>& tokens) {
  for (const SpecialToken* t : tokens)
    if (!t->text.empty()) tokens_.push_back(*t);
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  for (const auto& t : tokens_) {
    first_[static_cast<unsigned char>(t.text[0])] = true;
    max_length_ = std::max(max_length_, t.text.size());
  }
}

SpecialMatcher::Hit SpecialMatcher::find(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_[static_cast<unsigned char>(text[i])]) continue;
    const std::string_view rest = text.substr(i);
    for (const auto& t : tokens_)  // longest first
      if (rest.starts_with(t.text)) return {i, t.text.size(), t.id};
  }
  return {};
}

namespace {

std::vector<const SpecialToken*> pointers(const std::vector<SpecialToken>& a, const std::vector<SpecialToken>* b) {
  std::vector<const SpecialToken*> out;
  for (const auto& t : a) out.push_back(&t);
  if (b)
    for (const auto& t : *b) out.push_back(&t);
  return out;
}

uint64_t hash_spec(const BpeSpec& s) {
  auto word = [](uint64_t h, uint64_t v) { return fnv1a(std::string_view(reinterpret_cast<const char*>(&v), 8), h); };
  uint64_t h = fnv1a("holmes byte-level bpe 1");
  h = fnv1a(s.pattern, word(h, s.pattern.size()));
  h = word(h, s.model.whole_piece_first);
  const TokenTable& t = s.model.tokens;
  for (uint32_t id = 0; id < t.id_limit(); ++id)
    if (t.has(id)) h = fnv1a(t.bytes(id), word(word(h, id), t.bytes(id).size()));
  h = word(h, s.merges.size());
  for (const auto& [a, b] : s.merges) h = word(h, (uint64_t{a} << 32) | b);
  for (const auto* list : {&s.specials, &s.added}) {
    h = word(h, list->size());
    for (const auto& sp : *list) h = fnv1a(sp.text, word(h, sp.id));
  }
  return word(h, s.document_token);
}

// The encoder of one thread. Pieces that are not whole tokens are remembered (piece ->
// tokens) so a word repeated through a corpus is merged once.
class BpeEncoder final : public Encoder {
 public:
  BpeEncoder(const BpeTokenizer& t, bool allow_special)
      : t_(t), m_(t.spec().model), cursor_(t.splitter()), matcher_(t.matcher(allow_special)) {}

  void encode(std::string_view text, std::vector<uint32_t>* out) override {
    encode_range(text, 0, text.size(), false, out, nullptr);
  }

  size_t encode_range(std::string_view text, size_t from, size_t stop, bool more, std::vector<uint32_t>* out,
                      std::vector<Boundary>* bounds) override {
    // With more text to come, a piece ending in the last bytes may still change (a split
    // pattern's lookahead, a UTF-8 character or special token cut by the window's end).
    const size_t margin = more ? std::max<size_t>(16, matcher_.max_length()) : 0;
    const size_t limit = text.size() > margin ? text.size() - margin : 0;
    size_t pos = from;
    while (pos < stop && pos < text.size()) {
      const SpecialMatcher::Hit hit = next_special(text, pos);
      if (hit.pos == pos) {
        if (more && pos + hit.length > limit) return pos;
        if (bounds) bounds->push_back({pos, out->size()});
        out->push_back(hit.id);
        pos += hit.length;
        continue;
      }
      const bool open_end = hit.pos == std::string_view::npos;
      const std::string_view segment = open_end ? text : text.substr(0, hit.pos);
      const Splitter::Cursor::Piece piece = cursor_.next(segment, pos, more && open_end);
      if (more && (piece.partial || piece.end > limit)) return pos;
      if (bounds) bounds->push_back({pos, out->size()});
      encode_piece(text.substr(pos, piece.end - pos), out);
      pos = piece.end;
    }
    return pos;
  }

 private:
  // The next special token at or after `pos`, remembered between calls on the same text.
  SpecialMatcher::Hit next_special(std::string_view text, size_t pos) {
    if (matcher_.empty()) return {};
    if (hit_text_ != text.data() || hit_size_ != text.size() || pos < hit_from_ ||
        (hit_.pos != std::string_view::npos && pos > hit_.pos)) {
      hit_ = matcher_.find(text, pos);
      hit_text_ = text.data();
      hit_size_ = text.size();
      hit_from_ = pos;
    }
    return hit_;
  }

  void encode_piece(std::string_view piece, std::vector<uint32_t>* out) {
    if (piece.size() == 1 || piece.size() > kCachedLength) return bpe_encode_piece(m_, piece, scratch_, out);
    if (m_.whole_piece_first) {
      const uint32_t id = m_.tokens.find(piece);
      if (id != kNoToken) return out->push_back(id);
    }
    auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
    const size_t first = out->size();
    bpe_encode_piece(m_, piece, scratch_, out);
    if (cache_.size() >= kCacheEntries) cache_.clear();
    cache_.emplace(std::string(piece), std::vector<uint32_t>(out->begin() + static_cast<std::ptrdiff_t>(first), out->end()));
  }

  static constexpr size_t kCachedLength = 64;
  static constexpr size_t kCacheEntries = 1 << 16;

  const BpeTokenizer& t_;
  const BpeModel& m_;
  Splitter::Cursor cursor_;
  const SpecialMatcher& matcher_;
  BpeScratch scratch_;
  std::unordered_map<std::string, std::vector<uint32_t>> cache_;
  SpecialMatcher::Hit hit_;
  const char* hit_text_ = nullptr;
  size_t hit_size_ = 0, hit_from_ = 0;
};

}  // namespace

BpeTokenizer::BpeTokenizer(BpeSpec spec)
    : spec_(std::move(spec)),
      with_specials_(pointers(spec_.specials, &spec_.added)),
      added_only_(pointers(spec_.added, nullptr)) {
  splitter_ = std::make_unique<Splitter>(spec_.pattern);
  spec_.model.index_bytes();
  id_count_ = spec_.model.tokens.id_limit();
  for (const auto* list : {&spec_.specials, &spec_.added})
    for (const auto& s : *list) {
      id_count_ = std::max(id_count_, s.id + 1);
      special_text_[s.id] = s.text;
    }
  if (spec_.document_token >= id_count_ ||
      (!spec_.model.tokens.has(spec_.document_token) && !special_text_.count(spec_.document_token)))
    throw std::invalid_argument(fmt::format("the document token {} is not a token of the vocabulary",
                                            spec_.document_token));
  hash_ = hash_spec(spec_);
}

std::unique_ptr<Encoder> BpeTokenizer::encoder(bool allow_special) const {
  return std::make_unique<BpeEncoder>(*this, allow_special);
}

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string s;
  for (uint32_t id : ids) {
    // A special token's text wins over a vocabulary entry of the same id (GPT-2's
    // <|endoftext|> is both, with the same spelling).
    if (auto it = special_text_.find(id); it != special_text_.end())
      s += it->second;
    else if (spec_.model.tokens.has(id))
      s += spec_.model.tokens.bytes(id);
    else
      s += "\xEF\xBF\xBD";
  }
  return s;
}

}  // namespace holmes::tokenizer
