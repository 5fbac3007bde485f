#include "engine/runtime/store_keeper.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "comm/errors.hpp"
#include "comm/socket.hpp"
#include "comm/store.hpp"
#include "comm/tcp_store.hpp"
#include "engine/launch/signals.hpp"

extern char** environ;

namespace holmes::runtime {

namespace {

void say(int fd, const std::string& line) {
  if (fd < 0) return;
  const std::string text = line + "\n";
  [[maybe_unused]] auto rc = ::write(fd, text.data(), text.size());
}

// This process's own argv[0], so that the keeper reads as the job's binary in `ps` and to
// whoever ends the job's processes by their command line.
std::string own_argv0() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string first = all.substr(0, all.find('\0'));
  return first.empty() ? "holmes-train" : first;
}

std::string exit_text(int status) {
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return "an unknown status";
}

}  // namespace

int serve_job_store(const KeeperOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  if (o.outlive_signals) launch::ignore_stop_signals();
  else launch::install_stop_signal_handlers();
  const pid_t parent = ::getppid();
  std::unique_ptr<comm::TcpStoreServer> server;
  try {
    server = std::make_unique<comm::TcpStoreServer>(o.port, o.token);
  } catch (const comm::net::PortInUse& e) {
    say(o.ready_fd, "in-use");
    std::fprintf(stderr, "holmes-train store: %s (another process serves it)\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    say(o.ready_fd, fmt::format("error {}", e.what()));
    std::fprintf(stderr, "holmes-train store: %s\n", e.what());
    return 1;
  }
  say(o.ready_fd, fmt::format("ready {}", server->port()));
  if (o.ready_fd >= 0) ::close(o.ready_fd);
  if (o.ready_fd < 0)
    std::fprintf(stderr, "holmes-train store: serving on port %u (token %s); ends once the job's ranks have gone\n",
                 static_cast<unsigned>(server->port()), comm::token_fingerprint(o.token).c_str());
  using Clock = std::chrono::steady_clock;
  bool anyone_came = false;
  auto empty_since = Clock::now();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!o.outlive_signals && launch::stop_requested()) return 1;
    const auto now = Clock::now();
    if (server->clients() > 0) {
      anyone_came = true;
      empty_since = now;
      continue;
    }
    if (anyone_came) {
      if (now - empty_since >= std::chrono::duration<double>(o.linger_s)) return 0;
    } else if (o.follow_parent && ::getppid() != parent) {
      return 1;  // rank 0 ended before it (or any rank) connected
    }
  }
}

bool start_store_keeper(uint16_t port, const std::string& token, double timeout_s) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0)
    throw comm::StoreError(fmt::format("rank 0: cannot start the store keeper: pipe: {}", std::strerror(errno)));
  const std::string argv0 = own_argv0();
  const std::string port_text = std::to_string(port);
  std::vector<std::string> args{argv0, "store", "--port", port_text, "--ready-fd", "3", "--outlive-signals",
                                "--follow-parent"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The same environment, with the token the ranks will present.
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "HOLMES_JOB_TOKEN=", 17) != 0) env_text.emplace_back(*e);
  env_text.push_back("HOLMES_JOB_TOKEN=" + token);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  // Its output goes nowhere: it would hold open whatever pipe reads rank 0's output until the
  // job ends. What it has to say comes back on the ready pipe.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, ready[1], 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(ready[1]);
  if (rc != 0) {
    ::close(ready[0]);
    throw comm::StoreError(fmt::format("rank 0: cannot start the store keeper: {}", std::strerror(rc)));
  }

  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(timeout_s, 10.0));
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{ready[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char buf[256];
    const ssize_t got = ::read(ready[0], buf, sizeof(buf));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // it ended (or closed the pipe) without a full line
    line.append(buf, static_cast<size_t>(got));
    if (line.find('\n') != std::string::npos) break;
  }
  ::close(ready[0]);
  line = line.substr(0, line.find('\n'));
  if (line.rfind("ready", 0) == 0) {
    std::fprintf(stderr, "holmes-train: rank 0: elastic: the job's rendezvous store is served by a process of its own "
                 "(pid %d, `holmes-train store --port %u`), which outlives this rank's and ends once the job's ranks "
                 "have gone\n", static_cast<int>(pid), static_cast<unsigned>(port));
    std::fflush(stderr);
    return true;
  }
  int status = 0;
  if (line == "in-use") {
    ::waitpid(pid, &status, 0);
    return false;
  }
  std::string why = line.rfind("error ", 0) == 0 ? line.substr(6) : "";
  if (why.empty()) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      why = fmt::format("it ended with {} before it listened", exit_text(status));
    } else {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      why = "it did not listen in time";
    }
  } else {
    ::waitpid(pid, &status, 0);
  }
  throw comm::StoreError(fmt::format("rank 0 cannot serve the rendezvous store on port {}: {}", port, why));
}

}  // namespace holmes::runtime
