// Worker output through the launcher, each line prefixed "[rank N] " (stdout to stdout,
// stderr to stderr), so that the lines of several ranks stay whole and attributable.
// Internal to engine/launch (worker_pool.cpp).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace holmes::launch::detail {

class OutputRelay {
 public:
  explicit OutputRelay(bool enabled) : enabled_(enabled) {}
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  // Before fork: pipes for the worker of `rank`; returns the write ends the child puts on
  // fd 1 and 2, or {-1, -1} when relaying is off. Throws std::runtime_error if pipe() fails.
  std::array<int, 2> open_pipes(int rank);
  // After fork, in the launcher: closes the write ends (EOF comes when the worker is gone).
  void close_child_ends();
  // Waits up to timeout_ms for worker output or for `wake_fd` to become readable, relays
  // what arrived, and returns whether wake_fd is readable.
  bool wait(int wake_fd, int timeout_ms);
  // Relays until every pipe has reached EOF or `timeout_ms` has passed, then closes them.
  void drain(int timeout_ms);

 private:
  struct Stream {
    int fd = -1;         // read end, -1 once closed
    int target = 1;      // launcher fd the lines go to
    std::string prefix;  // "[rank N] "
    std::string pending; // a line not yet complete
  };
  void relay(Stream& s);
  void emit(Stream& s, bool flush_partial);

  bool enabled_;
  std::vector<Stream> streams_;
  std::vector<int> child_ends_;
};

}  // namespace holmes::launch::detail
