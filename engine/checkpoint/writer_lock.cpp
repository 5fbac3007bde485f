#include "engine/checkpoint/writer_lock.hpp"

#include <fcntl.h>
#include <signal.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>
#include <utility>

#include "common/errors.hpp"
#include "common/format.hpp"
#include "engine/spec/run_paths.hpp"

namespace holmes::checkpoint {

namespace {

std::string lock_path(const std::string& dir) { return spec::RunPaths::folder(dir).writer_lock; }

// The whole file, one byte range: every locker asks for the same lock.
struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;
  return fl;
}

// fcntl with the open-file-description command, or the classic one where the kernel does
// not know it (EINVAL; Linux before 3.15). Returns fcntl's result; errno as it left it.
int lock_call(int fd, int ofd_cmd, int classic_cmd, struct flock* fl) {
  int r = ::fcntl(fd, ofd_cmd, fl);
  if (r != 0 && errno == EINVAL) r = ::fcntl(fd, classic_cmd, fl);
  return r;
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return when;
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) return "an unknown host";
  return host;
}

// The string value of "key": "..." in a one-line JSON record (no escapes but \" and \\).
std::string field(const std::string& line, const std::string& key) {
  const std::string tag = "\"" + key + "\": ";
  auto at = line.find(tag);
  if (at == std::string::npos) return "";
  at += tag.size();
  if (at < line.size() && line[at] != '"') return line.substr(at, line.find_first_of(",}", at) - at);
  std::string out;
  for (size_t i = at + 1; i < line.size() && line[i] != '"'; ++i) out += line[i] == '\\' && i + 1 < line.size() ? line[++i] : line[i];
  return out;
}

// "12 min ago" from a UTC time as utc_now writes it; "" when it does not parse.
std::string age_of(const std::string& since) {
  std::tm tm{};
  std::istringstream in(since);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  if (in.fail()) return "";
  const long s = static_cast<long>(std::difftime(std::time(nullptr), ::timegm(&tm)));
  if (s < 0) return "";
  if (s < 120) return fmt::format("{} s ago", s);
  if (s < 7200) return fmt::format("{} min ago", s / 60);
  return fmt::format("{:.1f} h ago", static_cast<double>(s) / 3600);
}

// The record names the live holder: not a process of this host that has exited (the record
// of an earlier holder, read in the moment between a new holder's lock and its record).
bool live_record(const WriterInfo& info) {
  if (info.pid <= 0) return false;
  if (info.host != host_name()) return true;  // another node's: the lock is the evidence
  return ::kill(static_cast<pid_t>(info.pid), 0) == 0 || errno == EPERM;
}

// The refusal: another live process writes `dir`. The lock is taken before the holder writes
// its record, so a record is waited for briefly; none after that is said as such.
[[noreturn]] void refuse(const std::string& dir) {
  WriterInfo info;
  for (int i = 0; i < 20; ++i) {
    info = read_writer_info(lock_path(dir));
    if (live_record(info)) break;
    info = {};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string who = info.pid == 0 ? "another process (it has not said who it is)" : describe_writer(info);
  const std::string stop = info.pid == 0 ? "" : fmt::format(" (kill -TERM {} on {} stops it after a checkpoint)",
                                                            info.pid, info.host);
  throw UserError(fmt::format("job.output_dir: {} is being written by another live process: {}. Two processes "
                              "writing one run corrupt it (each deletes the other's checkpoints, their metrics "
                              "interleave), so this one stops here and writes nothing. Wait until that process ends "
                              "or stop it{}, then run this command again; or write to another folder with --set "
                              "job.output_dir=DIR", dir, who, stop));
}

}  // namespace

WriterInfo read_writer_info(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  WriterInfo info;
  info.host = field(line, "host");
  info.pid = std::atol(field(line, "pid").c_str());
  info.since = field(line, "since");
  info.job = field(line, "job");
  return info;
}

std::string describe_writer(const WriterInfo& info) {
  const std::string age = age_of(info.since);
  return fmt::format("pid {} on {}, writing since {}{}{}", info.pid, info.host.empty() ? "an unknown host" : info.host,
                     info.since.empty() ? "an unknown time" : info.since, age.empty() ? "" : " (" + age + ")",
                     info.job.empty() ? "" : fmt::format(", job '{}'", info.job));
}

WriterLock WriterLock::take(const std::string& dir, const std::string& job_name) {
  const std::string path = lock_path(dir);
  WriterLock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd_ < 0)
    throw UserError(fmt::format("job.output_dir: cannot create the writer lock {}: {}", path, std::strerror(errno)));
  struct flock fl = whole_file(F_WRLCK);
  if (lock_call(lock.fd_, F_OFD_SETLK, F_SETLK, &fl) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EACCES) refuse(dir);  // lock's destructor closes the file
    // ENOLCK, EOPNOTSUPP, ENOSYS: a file system without (these) locks.
    fmt::print(stderr, "holmes-train: warning: cannot lock {} ({}): the file system of job.output_dir does not take "
               "locks, so nothing stops a second process from writing this run at the same time\n", path,
               std::strerror(err));
    return lock;
  }
  lock.held_ = true;
  const std::string record = fmt::format("{{\"host\": {}, \"pid\": {}, \"since\": \"{}\", \"job\": {}}}\n",
                                         json_quote(host_name()), ::getpid(), utc_now(), json_quote(job_name));
  // A record that cannot be written does not weaken the lock: the refusal then says less.
  if (::ftruncate(lock.fd_, 0) == 0 && ::pwrite(lock.fd_, record.data(), record.size(), 0) < 0) {
    fmt::print(stderr, "holmes-train: warning: cannot write {}: {}\n", path, std::strerror(errno));
  }
  return lock;
}

WriterLock::WriterLock(WriterLock&& other) noexcept { *this = std::move(other); }

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor of the description releases the lock
}

void check_no_live_writer(const std::string& dir) {
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no lock file: nobody has written here with a lock yet
  struct flock fl = whole_file(F_WRLCK);
  const int r = lock_call(fd, F_OFD_GETLK, F_GETLK, &fl);
  ::close(fd);
  if (r == 0 && fl.l_type != F_UNLCK) refuse(dir);
}

}  // namespace holmes::checkpoint
