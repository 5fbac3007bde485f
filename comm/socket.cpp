#include "comm/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace holmes::comm::net {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

void wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return;
    if (rc == 0) throw std::runtime_error("timed out");
    if (errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  }
}

void write_all(int fd, const char* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    wait_ready(fd, POLLOUT, deadline);
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void read_all(int fd, char* p, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    wait_ready(fd, POLLIN, deadline);
    ssize_t r = ::recv(fd, p, n, MSG_DONTWAIT);
    if (r == 0) throw std::runtime_error("connection closed by the other side");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
}

}  // namespace

void send_frame(int fd, const Bytes& payload, Clock::time_point deadline) {
  Bytes frame = Writer().u32(static_cast<uint32_t>(payload.size())).take();
  frame.insert(frame.end(), payload.begin(), payload.end());
  write_all(fd, frame.data(), frame.size(), deadline);
}

Bytes recv_frame(int fd, Clock::time_point deadline) {
  Bytes head(4);
  read_all(fd, head.data(), 4, deadline);
  uint32_t n = Reader(head).u32();
  if (n > kMaxFrame) throw std::runtime_error("frame too large (not a holmes store peer?)");
  Bytes body(n);
  read_all(fd, body.data(), n, deadline);
  return body;
}

Fd try_connect(const std::string& host, uint16_t port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
    return Fd();
  }
  Fd out;
  for (addrinfo* a = res; a != nullptr && !out; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s) continue;
    if (::connect(s.get(), a->ai_addr, a->ai_addrlen) == 0) {
      int one = 1;
      ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      out = std::move(s);
    } else {
      error = std::strerror(errno);
    }
  }
  ::freeaddrinfo(res);
  return out;
}

Fd listen_on(uint16_t port) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(port);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    const std::string what = "cannot bind port " + std::to_string(port) + ": " + std::strerror(err);
    if (err == EADDRINUSE) throw PortInUse(what);
    throw std::runtime_error(what);
  }
  if (::listen(s.get(), 1024) != 0) throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
  return s;
}

uint16_t local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

Writer& Writer::u8(uint8_t v) {
  buf_.push_back(static_cast<char>(v));
  return *this;
}

Writer& Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::i64(int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return *this;
}

Writer& Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
  return *this;
}

Writer& Writer::bytes(const Bytes& b) {
  u32(static_cast<uint32_t>(b.size()));
  buf_.insert(buf_.end(), b.begin(), b.end());
  return *this;
}

void Reader::need(size_t n) const {
  if (buf_.size() - pos_ < n) throw std::runtime_error("malformed message (truncated)");
}

uint8_t Reader::u8() {
  need(1);
  return static_cast<uint8_t>(buf_[pos_++]);
}

uint32_t Reader::u32() {
  need(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(buf_[pos_++])) << (8 * i);
  return v;
}

int64_t Reader::i64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(buf_[pos_++])) << (8 * i);
  return static_cast<int64_t>(v);
}

std::string Reader::str() {
  uint32_t n = u32();
  need(n);
  std::string s(buf_.begin() + static_cast<long>(pos_), buf_.begin() + static_cast<long>(pos_ + n));
  pos_ += n;
  return s;
}

Bytes Reader::bytes() {
  uint32_t n = u32();
  need(n);
  Bytes b(buf_.begin() + static_cast<long>(pos_), buf_.begin() + static_cast<long>(pos_ + n));
  pos_ += n;
  return b;
}

}  // namespace holmes::comm::net
