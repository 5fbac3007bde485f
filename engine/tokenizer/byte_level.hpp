// GPT-2's byte-level alphabet: vocab.json, merges.txt and tokenizer.json spell token bytes as
// printable characters, one per byte. Bytes 33..126, 161..172 and 174..255 stand for
// themselves (as code points); the other 68 bytes (controls, space, 127..160, 173) map in
// increasing order to U+0100 upward, so byte 0x20 (space) is U+0120 'Ġ', 0x0A is U+010A 'Ċ'.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace holmes::tokenizer {

// The raw bytes a byte-level string stands for; nullopt when it holds a character outside
// the alphabet or is not valid UTF-8.
std::optional<std::string> bytes_from_byte_level(std::string_view text);

// The byte-level spelling (UTF-8) of raw bytes.
std::string byte_level_from_bytes(std::string_view bytes);

// Byte value of GPT-2's order: the i-th byte of the alphabet in the order above (tiktoken's
// data-gym ranks give the 256 single bytes ranks in this order).
unsigned char byte_level_order(int i);

}  // namespace holmes::tokenizer
