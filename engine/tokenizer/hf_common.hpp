// Internal to the GPT-2 / Hugging Face loaders (hf_files.cpp, hf_json.cpp): vocabularies and
// merges spelled in the byte-level alphabet.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tokenizer/bpe_tokenizer.hpp"

namespace holmes::tokenizer::hf {

// vocab: byte-level spelling -> id, into spec->model.tokens. An entry not spelled in the
// byte-level alphabet is skipped when its text is one of `added_text` (added tokens),
// otherwise refused. UserError naming `path`.
void add_vocab(const nlohmann::json& vocab, const std::string& path, const std::vector<std::string>& added_text,
               BpeSpec* spec);

// One merge of two byte-level spellings; `where` ("file:line") names it in errors.
void add_merge(const std::string& left, const std::string& right, const std::string& where, BpeSpec* spec);

// tokenizer.json merges: "a b" strings or [a, b] pairs.
void add_merges_json(const nlohmann::json& merges, const std::string& path, BpeSpec* spec);

}  // namespace holmes::tokenizer::hf
