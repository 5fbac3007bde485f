// The bytes of one prepare-data input as its text: read as they are, or decompressed on the
// fly from gzip (zlib) or zstd, in bounded memory whatever the file's size. What an input
// holds (one text document, or JSON Lines with one document per line) is decided from its
// name and its first bytes before anything is tokenized.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace holmes::data {

enum class Compression { kNone, kGzip, kZstd };
const char* compression_name(Compression c);  // "none", "gzip", "zstd"

// prepare-data --input-format: auto decides by the name (.jsonl, .ndjson, .json, each
// possibly followed by .gz or .zst, hold JSON Lines; anything else is one text document).
enum class InputFormat { kAuto, kText, kJsonl };
const char* input_format_name(InputFormat f);  // "auto", "text", "jsonl"

// What an input is, from its name and its first bytes (magic numbers win over the name for the
// compression; a name that claims a compression the bytes do not have is refused).
struct InputKind {
  Compression compression = Compression::kNone;
  InputFormat format = InputFormat::kText;  // never kAuto
};
// UserError naming the file when its name says .gz or .zst and the bytes are not that, or when
// it is compressed in a way this reader does not take (xz, bzip2: named, with what to do).
InputKind detect_input(const std::string& path, const unsigned char* head, size_t head_bytes, InputFormat asked);

// Sequential reader of an input's (decompressed) bytes. Every problem is a UserError naming
// the file: unreadable, truncated or corrupt compressed data.
class InputStream {
 public:
  InputStream(const std::string& path, Compression compression);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Fills up to n bytes at p; returns how many, 0 at the end of the (decompressed) data.
  size_t read(char* p, size_t n);
  // Bytes of the file consumed so far (compressed bytes for a compressed file): progress.
  int64_t file_bytes_read() const { return file_read_; }
  const std::string& path() const { return path_; }

 private:
  struct Codec;
  size_t fill_input();  // refills in_ from the file; returns the bytes read

  std::string path_;
  std::FILE* f_ = nullptr;
  Compression compression_;
  std::unique_ptr<Codec> codec_;
  std::unique_ptr<unsigned char[]> in_;
  size_t in_pos_ = 0, in_len_ = 0;
  bool file_end_ = false, stream_end_ = false;
  int64_t file_read_ = 0;
};

}  // namespace holmes::data
