#include "engine/checkpoint/checkpoint_io.hpp"

#include "engine/checkpoint/disk_space.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <nmmintrin.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace holmes::checkpoint {

static_assert(std::endian::native == std::endian::little, "checkpoint files are little-endian raw floats");

namespace {

// `err` is errno as the failing call left it, read before anything else can change it.
std::runtime_error io_error(int err, const std::string& what, const std::string& path) {
  return std::runtime_error(fmt::format("{}: cannot {}: {}{}", path, what, std::strerror(err), space_note(err, path)));
}

// Reflected CRC32C polynomial 0x82F63B78, one table lookup per byte (the portable path).
const std::array<uint32_t, 256>& crc_table() {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint32_t crc32c_table(const unsigned char* p, size_t n, uint32_t c) {
  const auto& t = crc_table();
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFFu] ^ (c >> 8);
  return c;
}

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const unsigned char* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  static const bool hw = __builtin_cpu_supports("sse4.2");
  const auto* p = static_cast<const unsigned char*>(data);
  const uint32_t c = ~crc;
  return ~(hw ? crc32c_sse42(p, n, c) : crc32c_table(p, n, c));
}

void encode_header(const ShardHeader& h, char out[kHeaderBytes]) {
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, kMagic, 8);
  std::memcpy(out + 8, &h.format_version, 4);
  std::memcpy(out + 12, &h.rank, 4);
  std::memcpy(out + 16, &h.world, 4);
  std::memcpy(out + 24, &h.step, 8);
  std::memcpy(out + 32, &h.payload_bytes, 8);
}

std::string decode_header(const char in[kHeaderBytes], ShardHeader* h) {
  if (std::memcmp(in, kMagic, 8) != 0) return "does not start with the holmes shard magic 'HOLMESCK'";
  std::memcpy(&h->format_version, in + 8, 4);
  std::memcpy(&h->rank, in + 12, 4);
  std::memcpy(&h->world, in + 16, 4);
  std::memcpy(&h->step, in + 24, 8);
  std::memcpy(&h->payload_bytes, in + 32, 8);
  return "";
}

DurableFile::DurableFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    throw io_error(err, "create", tmp_);
  }
}

DurableFile::~DurableFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void DurableFile::write(const void* data, size_t n) {
  crc_ = crc32c(data, n, crc_);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const int err = errno;
      throw io_error(err, "write", tmp_);
    }
    if (w == 0) throw io_error(EIO, "write (0 bytes written)", tmp_);
    p += w;
    n -= static_cast<size_t>(w);
    bytes_ += static_cast<uint64_t>(w);
  }
}

void DurableFile::commit() {
  if (::fsync(fd_) != 0) {
    const int err = errno;
    throw io_error(err, "fsync", tmp_);
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw io_error(err, "close", tmp_);
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw io_error(err, "rename to " + path_, tmp_);
  }
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw io_error(err, "open the folder", dir);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw io_error(err, "fsync the folder", dir);
}

void write_text_durably(const std::string& path, std::string_view text) {
  DurableFile f(path);
  f.write(text.data(), text.size());
  f.commit();
  const auto slash = path.find_last_of('/');
  fsync_dir(slash == std::string::npos ? "." : path.substr(0, slash));
}

}  // namespace holmes::checkpoint
