// Recognising files that are not token files before their bytes are read as tokens. A raw
// uint16 token file has no header, so any file of even size whose byte pairs fall below the
// vocabulary would pass as one: plain text does (every pair of ASCII bytes is below 50257),
// and so does UTF-16 text or a compressed archive with a large vocabulary. Those are
// recognised from their first bytes and refused with what to do instead.
#pragma once

#include <cstddef>
#include <string>

namespace holmes::data {

// What the file starting with `bytes` (`size` bytes in all) is when it is recognisably not
// a token file: "UTF-8 text", "UTF-16 text", "gzip-compressed data", "a NumPy .npy array",
// ...; "" when nothing marks it (it may be tokens).
std::string non_token_kind(const unsigned char* bytes, std::size_t size);

// Throws a UserError naming `path`, what the file is and how to make a token file of it
// (`holmes-train prepare-data` for text) when non_token_kind recognises it.
void refuse_non_token_file(const std::string& path, const unsigned char* bytes, std::size_t size);

}  // namespace holmes::data
