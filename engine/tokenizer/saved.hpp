// A tokenizer kept beside what it made (a token file's sidecar folder, a run's
// <output_dir>/tokenizer, an export): copies of its files and holmes-tokenizer.json,
//   {"spec": "cl100k_base:cl100k_base.tiktoken", "name": "cl100k_base",
//    "hash": "ac0af5c20514b7fa", "ids": 100277, "document_token": 100257}
// where spec is relative to the folder. Reading it back checks the hash, so a copy whose
// files were changed is refused instead of decoding wrongly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/tokenizer/tokenizer.hpp"

namespace holmes::tokenizer {

inline constexpr const char* kSavedDescriptor = "holmes-tokenizer.json";

struct SavedInfo {
  std::string spec, name;
  uint64_t hash = 0;
  uint32_t ids = 0;
  int64_t document_token = -1;  // -1 when the descriptor records none
};

// Writes the folder `dir` (replacing an earlier saved tokenizer there): files first, the
// descriptor last, through temporary names. std::runtime_error when it cannot write.
void save_tokenizer(const Tokenizer& t, const std::string& dir);

// True when `dir` holds a descriptor.
bool is_saved_tokenizer(const std::string& dir);
// The descriptor; UserError naming the file when it is missing or malformed.
SavedInfo read_saved_info(const std::string& dir);
// The tokenizer of `dir`; UserError when it cannot be read or its hash is not the recorded one.
std::unique_ptr<Tokenizer> load_saved_tokenizer(const std::string& dir);

}  // namespace holmes::tokenizer
