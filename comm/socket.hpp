// Small blocking-socket helpers for the TCP store: length-prefixed frames with deadlines
// and a byte encoder/decoder. Internal to comm/.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace holmes::comm::net {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<char>;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Frames are a 4-byte little-endian length then the payload. Both throw
// std::runtime_error with a short reason ("timed out", "connection closed") on failure.
constexpr uint32_t kMaxFrame = 256u << 20;
void send_frame(int fd, const Bytes& payload, Clock::time_point deadline);
Bytes recv_frame(int fd, Clock::time_point deadline);

// One connection attempt to host:port; returns an invalid Fd and sets `error` on failure.
Fd try_connect(const std::string& host, uint16_t port, std::string& error);
// A listening IPv4 socket on all addresses; port 0 picks a free one. Throws PortInUse when
// another socket listens on the port, std::runtime_error on other failures.
struct PortInUse : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Fd listen_on(uint16_t port);
uint16_t local_port(int fd);

// Encoder/decoder of little-endian integers and length-prefixed strings.
class Writer {
 public:
  Writer& u8(uint8_t v);
  Writer& u32(uint32_t v);
  Writer& i64(int64_t v);
  Writer& str(const std::string& s);
  Writer& bytes(const Bytes& b);
  Bytes take() { return std::move(buf_); }

 private:
  Bytes buf_;
};

class Reader {
 public:
  explicit Reader(const Bytes& b) : buf_(b) {}
  uint8_t u8();
  uint32_t u32();
  int64_t i64();
  std::string str();
  Bytes bytes();
  bool done() const { return pos_ == buf_.size(); }

 private:
  void need(size_t n) const;
  const Bytes& buf_;
  size_t pos_ = 0;
};

}  // namespace holmes::comm::net
