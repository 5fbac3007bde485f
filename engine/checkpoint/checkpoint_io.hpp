// Low-level pieces of checkpoint I/O (internal to engine/checkpoint): CRC32C,
// durable writes (temporary name, fsync, rename, fsync the folder) and the shard file header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace holmes::checkpoint {

// CRC32C (Castagnoli), the SSE4.2 instruction when the CPU has it. Chain with `crc` = the
// previous result (0 to start).
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// Shard file header: 64 bytes, little-endian; the payload (pieces) follows.
inline constexpr size_t kHeaderBytes = 64;
inline constexpr char kMagic[9] = "HOLMESCK";
struct ShardHeader {
  uint32_t format_version = 0;
  uint32_t rank = 0;
  uint32_t world = 0;
  int64_t step = 0;
  uint64_t payload_bytes = 0;
};
void encode_header(const ShardHeader& h, char out[kHeaderBytes]);
// Empty string when `in` is a valid header, else what is wrong with it.
std::string decode_header(const char in[kHeaderBytes], ShardHeader* h);

// Appends to a temporary file `<path>.tmp`, computing the CRC32C as it goes; commit() fsyncs
// it and renames it to `path`. Destroyed without commit(), it removes the temporary file.
class DurableFile {
 public:
  explicit DurableFile(std::string path);
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile();
  void write(const void* data, size_t n);
  void commit();  // fsync, close, rename (the caller fsyncs the folder)
  uint64_t bytes() const { return bytes_; }
  uint32_t crc() const { return crc_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

// Writes `text` to `path` durably (DurableFile) and fsyncs the folder.
void write_text_durably(const std::string& path, std::string_view text);
void fsync_dir(const std::string& dir);

}  // namespace holmes::checkpoint
