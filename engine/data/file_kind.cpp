#include "engine/data/file_kind.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"

namespace holmes::data {

namespace {

// Bytes looked at for text: enough that a token file passing for text is out of the question
// (every one of 32768 tokens would need both its bytes to be text), little enough to be instant.
constexpr std::size_t kTextSample = 64 * 1024;

struct Magic {
  std::size_t offset;
  const char* bytes;
  std::size_t length;
  const char* kind;
  const char* advice;
};

constexpr const char* kCompressed = "decompress it first (if it holds text, then tokenize that with holmes-train prepare-data)";
constexpr const char* kArray = "write the token ids as a raw uint16 array (numpy: ids.astype(numpy.uint16).tofile(FILE)) "
                               "or as an llm.c token file";

// Formats a training corpus is commonly kept in, by their signatures.
constexpr Magic kMagics[] = {
    {0, "\x1f\x8b", 2, "gzip-compressed data", kCompressed},
    {0, "\x28\xb5\x2f\xfd", 4, "zstd-compressed data", kCompressed},
    {0, "\xfd\x37\x7a\x58\x5a\x00", 6, "xz-compressed data", kCompressed},
    {0, "BZh", 3, "bzip2-compressed data", kCompressed},
    {0, "PK\x03\x04", 4, "a zip archive (or a .npz or PyTorch .pt file, which are zip archives)", kArray},
    {0, "\x93NUMPY", 6, "a NumPy .npy array (a header before the data)", kArray},
    {0, "PAR1", 4, "a Parquet file", kArray},
    {0, "ARROW1", 6, "an Arrow file", kArray},
    {0, "\x89HDF\r\n\x1a\n", 8, "an HDF5 file", kArray},
    {0, "\x7f" "ELF", 4, "an executable (ELF)", kArray},
    {257, "ustar", 5, "a tar archive", "extract the token file from it"},
};

// Length of the UTF-8 sequence starting at s[0] when it is valid within `n` bytes; 0 when
// invalid; -1 when it is cut off by the end of the sample.
int utf8_sequence(const unsigned char* s, std::size_t n) {
  const unsigned char c = s[0];
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return 0;
  for (int i = 1; i < len; ++i) {
    if (static_cast<std::size_t>(i) >= n) return -1;
    if ((s[i] & 0xc0) != 0x80) return 0;
  }
  return len;
}

// The first `n` bytes are UTF-8 text: valid sequences, no control characters but tab, line
// feed, carriage return, form feed and escape. `cut` allows the last sequence to be cut off.
bool is_utf8_text(const unsigned char* s, std::size_t n, bool cut) {
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b) return false;
    const int len = utf8_sequence(s + i, n - i);
    if (len < 0) return cut;
    if (len == 0) return false;
    i += static_cast<std::size_t>(len);
  }
  return true;
}

}  // namespace

std::string non_token_kind(const unsigned char* bytes, std::size_t size) {
  if (size == 0) return "";
  for (const Magic& m : kMagics)
    if (size >= m.offset + m.length && std::memcmp(bytes + m.offset, m.bytes, m.length) == 0) return m.kind;
  if (size >= 2 && ((bytes[0] == 0xff && bytes[1] == 0xfe) || (bytes[0] == 0xfe && bytes[1] == 0xff)))
    return "UTF-16 text (it starts with a byte-order mark)";
  const std::size_t n = std::min(size, kTextSample);
  if (is_utf8_text(bytes, n, n < size)) return "UTF-8 text";
  return "";
}

void refuse_non_token_file(const std::string& path, const unsigned char* bytes, std::size_t size) {
  const std::string kind = non_token_kind(bytes, size);
  if (kind.empty()) return;
  std::string advice;
  if (kind == "UTF-8 text")
    advice = fmt::format("tokenize it first: holmes-train prepare-data --input {} --out FILE.bin, then give FILE.bin "
                         "as data.train (or data.valid)", path);
  else if (kind.rfind("UTF-16", 0) == 0)
    advice = "convert it to UTF-8 (iconv -f UTF-16 -t UTF-8) and tokenize that with holmes-train prepare-data";
  for (const Magic& m : kMagics)
    if (kind == m.kind) advice = m.advice;
  throw UserError(fmt::format("{}: this is {}, not a token file (accepted: an llm.c token file or a raw uint16 array "
                              "of token ids); read as raw uint16 its bytes would be trained on as token ids. What to "
                              "do: {}", path, kind, advice));
}

}  // namespace holmes::data
