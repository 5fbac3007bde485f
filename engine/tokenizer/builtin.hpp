// The tiktoken encodings holmes-train knows by name: split pattern, special tokens, the token
// documents start with, and the size of the rank file. The ranks themselves are not shipped:
// the user points to the file (`--tokenizer cl100k_base:PATH/cl100k_base.tiktoken`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.hpp"

namespace holmes::tokenizer {

struct BuiltinEncoding {
  std::string name;
  std::string pattern;
  std::vector<SpecialToken> specials;
  std::string document_token;  // text of one of `specials`
  uint32_t rank_count = 0;     // tokens in the rank file
  std::string files;           // what the user points to, for messages
};

// nullptr when `name` is not built in.
const BuiltinEncoding* find_builtin(std::string_view name);
// "gpt2, r50k_base, p50k_base, cl100k_base, o200k_base, llama3".
std::string builtin_names();

// GPT-2's split pattern (also what a Hugging Face ByteLevel pre-tokenizer with use_regex uses).
extern const char* const kGpt2Pattern;

}  // namespace holmes::tokenizer
