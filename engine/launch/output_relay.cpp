#include "engine/launch/output_relay.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace holmes::launch::detail {

namespace {

// A line longer than this is passed on in pieces rather than held forever.
constexpr size_t kMaxPending = 64 * 1024;

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EPIPE and the like: the reader is gone, the output is dropped
    done += static_cast<size_t>(n);
  }
}

}  // namespace

OutputRelay::~OutputRelay() {
  close_child_ends();
  for (auto& s : streams_)
    if (s.fd >= 0) close(s.fd);
}

std::array<int, 2> OutputRelay::open_pipes(int rank) {
  if (!enabled_) return {-1, -1};
  std::array<int, 2> ends{};
  for (int target : {1, 2}) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error(fmt::format("cannot start rank {}: pipe: {}", rank, std::strerror(errno)));
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    streams_.push_back(Stream{fds[0], target, fmt::format("[rank {}] ", rank), {}});
    child_ends_.push_back(fds[1]);
    ends[target - 1] = fds[1];
  }
  return ends;
}

void OutputRelay::close_child_ends() {
  for (int fd : child_ends_) close(fd);
  child_ends_.clear();
}

void OutputRelay::emit(Stream& s, bool flush_partial) {
  std::string out;
  size_t start = 0, nl;
  while ((nl = s.pending.find('\n', start)) != std::string::npos) {
    out += s.prefix;
    out.append(s.pending, start, nl + 1 - start);
    start = nl + 1;
  }
  s.pending.erase(0, start);
  if (!s.pending.empty() && (flush_partial || s.pending.size() > kMaxPending)) {
    out += s.prefix + s.pending + "\n";
    s.pending.clear();
  }
  if (!out.empty()) write_all(s.target, out);
}

void OutputRelay::relay(Stream& s) {
  char buf[8192];
  for (;;) {
    ssize_t n = read(s.fd, buf, sizeof buf);
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // EOF: the worker (and all it started) closed this stream
      close(s.fd);
      s.fd = -1;
    }
    break;  // EAGAIN: nothing more for now
  }
  emit(s, s.fd < 0);
}

bool OutputRelay::wait(int wake_fd, int timeout_ms) {
  std::vector<pollfd> fds{{wake_fd, POLLIN, 0}};
  std::vector<Stream*> owners{nullptr};
  for (auto& s : streams_)
    if (s.fd >= 0) fds.push_back({s.fd, POLLIN, 0}), owners.push_back(&s);
  int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready <= 0) return false;
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) relay(*owners[i]);
  return (fds[0].revents & POLLIN) != 0;
}

void OutputRelay::drain(int timeout_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto open_count = [&] {
    int n = 0;
    for (auto& s : streams_) n += s.fd >= 0;
    return n;
  };
  while (open_count() > 0 && std::chrono::steady_clock::now() < end) wait(-1, 20);
  for (auto& s : streams_) {
    if (s.fd < 0) continue;
    relay(s);  // what is there now, then give up on a descendant that escaped the group
    if (s.fd >= 0) close(s.fd), s.fd = -1;
    emit(s, true);
  }
}

}  // namespace holmes::launch::detail
