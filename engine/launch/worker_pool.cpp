// run_workers(): fork/exec the workers and supervise them until every one has exited.
//
// The launcher blocks the signals it cares about (SIGCHLD and the stop signals) and takes
// them synchronously with sigtimedwait, so there is no handler and no race between "a
// worker died" and "the user pressed Ctrl-C". Everything the child needs (argv, envp) is
// built before fork(): between fork and exec the child only makes async-signal-safe calls.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>

#include "engine/launch/local_launcher.hpp"
#include "engine/launch/output_relay.hpp"

namespace holmes::launch {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGUSR1, SIGHUP};
// Variables the launcher owns in the workers' environment; inherited values are dropped.
const std::set<std::string> kOwnedVars = {"RANK",        "WORLD_SIZE",       "LOCAL_RANK",  "LOCAL_WORLD_SIZE",
                                          "GROUP_RANK",  "GROUP_WORLD_SIZE", "NODE_RANK",   "MASTER_ADDR",
                                          "MASTER_PORT", "HOLMES_JOB_TOKEN", "TORCHELASTIC_RUN_ID"};

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int local = 0;     // index in the group (its exec image)
  int restarts = 0;  // times started again (WorkerGroup::max_restarts)
};

// argv and envp of one worker, owned here so the char* arrays stay valid until exec.
struct ExecImage {
  std::vector<std::string> args, vars;
  std::string exec_failed;  // message written if execve fails (no formatting after fork)
  std::vector<char*> argv, envp;
  void seal() {
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
  }
};

ExecImage make_image(const WorkerGroup& g, int local, int port, const std::string& token) {
  ExecImage img;
  img.args = g.argv.empty() ? std::vector<std::string>{"holmes-train"} : g.argv;
  for (auto& [key, value] : process_environment())
    if (!kOwnedVars.count(key)) img.vars.push_back(key + "=" + value);
  auto set = [&](const char* key, const std::string& value) { img.vars.push_back(std::string(key) + "=" + value); };
  set("RANK", std::to_string(g.first_rank + local));
  set("WORLD_SIZE", std::to_string(g.world_size));
  set("LOCAL_RANK", std::to_string(local));
  set("LOCAL_WORLD_SIZE", std::to_string(g.nproc));
  set("GROUP_RANK", std::to_string(g.node_rank));
  set("GROUP_WORLD_SIZE", std::to_string(g.num_nodes));
  set("MASTER_ADDR", g.master_addr);
  set("MASTER_PORT", std::to_string(port));
  set("HOLMES_JOB_TOKEN", token);
  img.exec_failed = fmt::format("{}: rank {}: cannot execute {}\n", g.log_prefix, g.first_rank + local, g.exe);
  img.seal();
  return img;
}

// Child side of fork(): async-signal-safe calls only, then exec.
[[noreturn]] void become_worker(const char* exe, ExecImage& img, pid_t launcher, std::array<int, 2> out) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(1);  // the launcher died before prctl took effect
  // exec keeps ignored dispositions and the blocked mask; a worker starts with neither.
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  if (out[0] >= 0) dup2(out[0], STDOUT_FILENO);
  if (out[1] >= 0) dup2(out[1], STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) {
    dup2(devnull, STDIN_FILENO);
    if (devnull != STDIN_FILENO) close(devnull);
  }
  execve(exe, img.argv.data(), img.envp.data());
  ssize_t ignored = write(STDERR_FILENO, img.exec_failed.data(), img.exec_failed.size());
  (void)ignored;
  _exit(127);
}

// Forks the worker of local index `local` into its own process group with its output relayed;
// returns its pid, or -1 when fork fails (errno set).
pid_t start_worker(const WorkerGroup& g, ExecImage& img, detail::OutputRelay& relay, int local, pid_t launcher) {
  auto out = relay.open_pipes(g.first_rank + local);
  std::fflush(nullptr);  // nothing buffered in the launcher may be written twice
  pid_t pid = fork();
  if (pid == 0) become_worker(g.exe.c_str(), img, launcher, out);
  const int err = errno;
  relay.close_child_ends();
  if (pid > 0) setpgid(pid, pid);  // also here, so no signal can reach the worker before its group exists
  errno = err;
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  return fmt::format("was killed by signal {} ({})", sig, strsignal(sig));
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

class Supervisor {
 public:
  // `start` starts the worker of a local index again (pid, or -1 when fork failed).
  Supervisor(const WorkerGroup& g, std::vector<Worker>& workers, std::function<pid_t(int)> start)
      : g_(g), workers_(workers), start_(std::move(start)) {}

  // `signal_fd` delivers the blocked signals; `relay` carries the workers' output.
  int run(int signal_fd, detail::OutputRelay& relay) {
    while (running_count() > 0) {
      if (relay.wait(signal_fd, next_timeout_ms())) {
        signalfd_siginfo info{};
        while (read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
          if (info.ssi_signo != SIGCHLD) on_signal(static_cast<int>(info.ssi_signo));
      }
      reap();
      escalate_if_due();
    }
    relay.drain(500);
    if (g_.keep_going && finished_ok_ && failed_code_ >= 0) return 0;
    if (failed_code_ >= 0) return failed_code_;
    if (stop_signal_ != 0 && !all_clean_) return 128 + stop_signal_;
    return 0;
  }

 private:
  int running_count() const {
    int n = 0;
    for (auto& w : workers_) n += w.running;
    return n;
  }

  int next_timeout_ms() const {
    // Poll at least every 200 ms: a safety net should a SIGCHLD be merged or lost.
    auto wait = std::chrono::milliseconds(200);
    if (kill_pending_) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at_ - Clock::now());
      wait = std::max(std::chrono::milliseconds(1), std::min(wait, left));
    }
    return static_cast<int>(wait.count());
  }

  void signal_all(int sig) {
    for (auto& w : workers_)
      if (w.running) kill(-w.pid, sig);  // the whole process group of the worker
  }

  void on_signal(int sig) {
    if (sig == SIGINT && stop_signal_ != 0) {
      fmt::print(stderr, "{}: second SIGINT; killing {} workers\n", g_.log_prefix, running_count());
      hard_killed_ = true;
      signal_all(SIGKILL);
      return;
    }
    if (stop_signal_ == 0) stop_signal_ = sig;
    // Workers treat every one of these as a stop (signals.hpp): finish the step, save, exit 128+N.
    fmt::print(stderr, "{}: got signal {} ({}); forwarding it to {} workers\n", g_.log_prefix, sig, strsignal(sig),
               running_count());
    signal_all(sig);
  }

  void reap() {
    for (auto& w : workers_) {
      if (!w.running) continue;
      siginfo_t info{};
      // WNOWAIT: the exited worker stays a zombie, which keeps its pid (= its process group
      // id) reserved while we kill what it left in that group; then it is reaped.
      if (waitid(P_PID, w.pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) continue;
      kill(-w.pid, SIGKILL);
      int status = 0;
      while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      w.running = false;
      on_exit(w, status);
    }
  }

  // After a forwarded stop signal S, a worker is expected to exit 0 or 128+S (or die of S
  // before it had its handlers); anything else is a failure that stops the others.
  bool expected_after_stop(int status) const {
    if (stop_signal_ == 0) return false;
    if (hard_killed_) return true;
    return WIFEXITED(status) ? WEXITSTATUS(status) == 128 + stop_signal_ : WTERMSIG(status) == stop_signal_;
  }

  // Elastic (max_restarts): a failed worker is started again as a joiner while the job goes on
  // without it (no stop asked for, not finished, someone left to rejoin) and it has restarts left.
  bool restart(Worker& w, int status) {
    if (w.restarts >= g_.max_restarts || stop_signal_ != 0 || finished_ok_ || running_count() == 0) return false;
    const pid_t old = w.pid;
    const pid_t pid = start_(w.local);
    if (pid < 0) {
      fmt::print(stderr, "{}: rank {} (pid {}) {}; cannot start it again: fork: {}\n", g_.log_prefix, w.rank, old,
                 describe_status(status), strerror(errno));
      return false;
    }
    ++w.restarts;
    w.pid = pid;
    w.running = true;
    fmt::print(stderr, "{}: rank {} (pid {}) {}; elastic job: starting it again as a joiner (restart {} of {}, pid {})\n",
               g_.log_prefix, w.rank, old, describe_status(status), w.restarts, g_.max_restarts, pid);
    return true;
  }

  void on_exit(Worker& w, int status) {
    bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!clean) all_clean_ = false;
    if (clean) finished_ok_ = true;
    if (g_.keep_going && clean && running_count() > 0 && !kill_pending_) {
      // Elastic: the job finished on this worker; one still running grace_s later was left out
      // of it (frozen, or stopped by its replica's loss and not yet gone).
      kill_pending_ = true;
      left_out_ = true;
      kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<long long>(std::max(0.0, g_.grace_s) * 1000));
    }
    if (g_.keep_going && !clean && !expected_after_stop(status)) {
      // Elastic: the others decide among themselves whether they go on (docs/elastic.md).
      if (failed_code_ < 0) failed_code_ = exit_code_of(status);
      if (restart(w, status)) return;
      fmt::print(stderr, "{}: rank {} (pid {}) {}; elastic job: the other {} worker(s) go on without it\n",
                 g_.log_prefix, w.rank, w.pid, describe_status(status), running_count());
      return;
    }
    // Expected, or not the first failure (the others die of our SIGTERM/SIGKILL).
    if (clean || failed_code_ >= 0 || expected_after_stop(status)) return;
    failed_code_ = exit_code_of(status);
    int others = running_count();
    fmt::print(stderr, "{}: rank {} (pid {}) {}\n", g_.log_prefix, w.rank, w.pid, describe_status(status));
    if (others == 0) return;
    fmt::print(stderr, "{}: stopping the other {} workers (SIGTERM, then SIGKILL after {:g} s)\n", g_.log_prefix,
               others, g_.grace_s);
    signal_all(SIGTERM);
    kill_pending_ = true;
    kill_at_ = Clock::now() + std::chrono::milliseconds(static_cast<long long>(std::max(0.0, g_.grace_s) * 1000));
  }

  void escalate_if_due() {
    if (!kill_pending_ || Clock::now() < kill_at_) return;
    for (auto& w : workers_)
      if (w.running)
        fmt::print(stderr, "{}: rank {} (pid {}) still running {:g} s after {}; sending SIGKILL\n", g_.log_prefix,
                   w.rank, w.pid, g_.grace_s, left_out_ ? "the elastic job finished without it" : "SIGTERM");
    signal_all(SIGKILL);
    kill_pending_ = false;
  }

  const WorkerGroup& g_;
  std::vector<Worker>& workers_;
  std::function<pid_t(int)> start_;
  int stop_signal_ = 0;                // first stop signal the launcher received
  bool all_clean_ = true;              // every worker so far exited 0
  bool finished_ok_ = false;           // a worker exited 0 (keep_going: the job's code is 0)
  bool hard_killed_ = false;           // SIGKILL sent after a second SIGINT
  int failed_code_ = -1;               // exit code of the first failed worker; -1 = none
  bool kill_pending_ = false;          // SIGKILL due at kill_at_
  bool left_out_ = false;              // keep_going: due because the job finished without them
  Clock::time_point kill_at_{};
};

// Blocks the waited-for signals (and makes SIGCHLD deliverable) for the launcher's lifetime
// in run_workers; restores both on the way out.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGCHLD);
    for (int sig : kForwarded) sigaddset(&set_, sig);
    sigprocmask(SIG_BLOCK, &set_, &old_mask_);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &old_chld_);  // SIG_IGN would auto-reap and hide exit codes
    struct sigaction ign = dfl;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old_pipe_);  // a closed stdout must not kill the launcher
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) throw std::runtime_error(fmt::format("signalfd: {}", strerror(errno)));
  }
  ~BlockedSignals() {
    if (fd_ >= 0) close(fd_);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigaction(SIGCHLD, &old_chld_, nullptr);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  int fd() const { return fd_; }

 private:
  sigset_t set_, old_mask_;
  struct sigaction old_chld_ {}, old_pipe_ {};
  int fd_ = -1;
};

}  // namespace

int run_workers(const WorkerGroup& g) {
  if (g.nproc < 1) throw std::invalid_argument(fmt::format("run_workers: nproc {} < 1", g.nproc));
  int port = g.master_port > 0 ? g.master_port : pick_free_port(g.master_addr);
  std::string token = g.token.empty() ? random_job_token() : g.token;
  std::vector<ExecImage> images;
  images.reserve(g.nproc);
  for (int local = 0; local < g.nproc; ++local) images.push_back(make_image(g, local, port, token));

  BlockedSignals blocked;
  detail::OutputRelay relay(g.prefix_output);
  pid_t launcher = getpid();
  std::vector<Worker> workers(g.nproc);
  for (int local = 0; local < g.nproc; ++local) {
    const pid_t pid = start_worker(g, images[local], relay, local, launcher);
    if (pid < 0) {
      int err = errno;
      for (auto& w : workers)
        if (w.running) kill(-w.pid, SIGKILL), waitpid(w.pid, nullptr, 0);
      throw std::runtime_error(fmt::format("cannot start worker {} of {}: fork: {}", local, g.nproc, strerror(err)));
    }
    workers[local] = Worker{g.first_rank + local, pid, true, local, 0};
  }
  fmt::print(stderr, "{}: started {} workers (ranks {}..{} of {}), master {}:{}\n", g.log_prefix, g.nproc,
             g.first_rank, g.first_rank + g.nproc - 1, g.world_size, g.master_addr, port);
  // A worker started again gets its first start's image: the same RANK and environment.
  Supervisor supervisor(g, workers, [&](int local) { return start_worker(g, images[local], relay, local, launcher); });
  return supervisor.run(blocked.fd(), relay);
}

}  // namespace holmes::launch
