#include "engine/tokenizer/builtin.hpp"

#include <fmt/format.h>

namespace holmes::tokenizer {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

constexpr const char* kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|)"
    R"(\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Llama 3's 256 special tokens follow its 128000 ranks: ten named slots, the rest reserved.
std::vector<SpecialToken> llama3_specials() {
  const std::vector<std::string> named = {
      "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
      "<|reserved_special_token_2|>", "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
      "<|reserved_special_token_4|>", "<|eot_id|>"};
  std::vector<SpecialToken> out;
  uint32_t id = 128000;
  for (const auto& n : named) out.push_back({n, id++});
  for (int i = 5; id < 128256; ++i) out.push_back({fmt::format("<|reserved_special_token_{}|>", i), id++});
  return out;
}

const std::vector<BuiltinEncoding>& table() {
  static const std::vector<BuiltinEncoding> t = {
      {"gpt2", kGpt2Pattern, {{"<|endoftext|>", 50256}}, "<|endoftext|>", 50256,
       "a folder with encoder.json + vocab.bpe (or vocab.json + merges.txt), or gpt2.tiktoken"},
      {"r50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, "<|endoftext|>", 50256, "r50k_base.tiktoken"},
      {"p50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, "<|endoftext|>", 50280, "p50k_base.tiktoken"},
      {"cl100k_base", kCl100kPattern,
       {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258}, {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260}, {"<|endofprompt|>", 100276}},
       "<|endoftext|>", 100256, "cl100k_base.tiktoken"},
      {"o200k_base", kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}, "<|endoftext|>",
       199998, "o200k_base.tiktoken"},
      {"llama3", kCl100kPattern, llama3_specials(), "<|begin_of_text|>", 128000,
       "Llama 3's tokenizer.model (a tiktoken rank file)"},
  };
  return t;
}

}  // namespace

const BuiltinEncoding* find_builtin(std::string_view name) {
  for (const auto& e : table())
    if (e.name == name) return &e;
  return nullptr;
}

std::string builtin_names() {
  std::string s;
  for (const auto& e : table()) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

}  // namespace holmes::tokenizer
