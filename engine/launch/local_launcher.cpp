// The parts of the local launcher around the supervision loop (worker_pool.cpp): argv
// rewriting, free ports, tokens and the two run_local_workers entry points.
#include "engine/launch/local_launcher.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "common/errors.hpp"

namespace holmes::launch {

namespace {

// The launcher's own flags, each with a value: its workers are not launchers.
constexpr const char* kLauncherFlags[] = {"--nproc-per-node", "--max-restarts"};

}  // namespace

std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    bool flag = false;
    for (const std::string name : kLauncherFlags) {
      if (i > 0 && argv[i] == name) {
        ++i;  // skip the value too
        flag = true;
        break;
      }
      if (i > 0 && argv[i].rfind(name + "=", 0) == 0) {
        flag = true;
        break;
      }
    }
    if (!flag) out.push_back(argv[i]);
  }
  return out;
}

std::vector<std::string> current_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

std::string random_job_token() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("cannot draw a job token: getrandom: {}", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  std::string out;
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

int pick_free_port(const std::string& addr) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot pick a free port: socket: {}", std::strerror(errno)));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  // A numeric address we can bind to is used as is; a host name (or an address of another
  // machine) falls back to "any": the port is then free on every local address.
  if (inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      int err = errno;
      close(fd);
      throw std::runtime_error(fmt::format("cannot pick a free port on {}: bind: {}", addr, std::strerror(err)));
    }
  }
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

int run_local_workers(int nproc, const std::vector<std::string>& argv, double grace_s, Elastic elastic) {
  LaunchEnv env;
  env.source = "local";
  env.world_size = nproc;
  env.local_world_size = nproc;
  return run_local_workers(env, argv, grace_s, elastic);
}

int run_local_workers(const LaunchEnv& env, const std::vector<std::string>& argv, double grace_s, Elastic elastic) {
  WorkerGroup group;
  group.argv = strip_launcher_flags(argv);
  group.nproc = env.local_world_size;
  group.first_rank = env.rank;
  group.world_size = env.world_size;
  group.node_rank = env.node_rank;
  group.num_nodes = env.num_nodes;
  group.master_addr = env.master_addr;
  group.master_port = env.master_port;
  group.token = env.job_token;
  group.grace_s = grace_s;
  group.keep_going = elastic.keep_going;
  group.max_restarts = elastic.max_restarts;
  if (const char* text = std::getenv("HOLMES_LAUNCH_GRACE_S")) {
    char* end = nullptr;
    double value = std::strtod(text, &end);
    if (end == text || *end != '\0' || value < 0)
      throw UserError(fmt::format("environment variable HOLMES_LAUNCH_GRACE_S='{}' is not a number of seconds; "
                                  "accepted: a number >= 0",
                                  text));
    group.grace_s = value;
  }
  return run_workers(group);
}

}  // namespace holmes::launch
