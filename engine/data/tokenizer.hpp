// The byte-level tokenizer: token = byte value (0..255), 256 = end-of-text between
// documents. Vocabulary 257, which every GPT config pads to a multiple of 128.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data/token_file.hpp"

namespace holmes::data {

inline constexpr int kByteVocab = 257;

// Appends the bytes of `text` as tokens to `out`.
void encode_bytes(std::string_view text, std::vector<uint16_t>* out);

// Tokens back to text; end-of-text becomes `eot_text`, ids > 256 become "\xEF\xBF\xBD" (U+FFFD).
std::string decode_bytes(std::span<const int32_t> tokens, std::string_view eot_text = "\n<|endoftext|>\n");

// Reads every input file as one document, puts end-of-text before each document (as GPT-2
// data does) and writes the llm.c token file `out`. Returns the token count. UserError
// naming the file when an input cannot be read or the output cannot be written.
int64_t prepare_byte_tokens(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace holmes::data
