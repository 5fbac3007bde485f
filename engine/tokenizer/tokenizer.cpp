#include "engine/tokenizer/tokenizer.hpp"

#include <fmt/format.h>

namespace holmes::tokenizer {

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<uint32_t> out;
  encoder(allow_special)->encode(text, &out);
  return out;
}

std::string Tokenizer::token_text(uint32_t id) const {
  const uint32_t one[1] = {id};
  return decode(one);
}

std::string Tokenizer::describe() const {
  return fmt::format("{}: {} ids, documents start with {} = {}, hash {}", name(), id_count(),
                     token_text(document_token()), document_token(), hash_hex(hash()));
}

std::string hash_hex(uint64_t h) { return fmt::format("{:016x}", h); }

}  // namespace holmes::tokenizer
