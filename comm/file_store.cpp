#include "comm/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "comm/errors.hpp"

namespace holmes::comm {

namespace fs = std::filesystem;

namespace {

// Keys may hold '/', so they are escaped into one flat file name: [A-Za-z0-9._-] stay,
// everything else becomes %XX. A leading '.' is escaped too so keys never clash with
// the store's own dot files.
std::string escape_key(const std::string& key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    bool plain = std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0);
    out += plain ? std::string(1, static_cast<char>(c)) : fmt::format("%{:02X}", c);
  }
  return out.empty() ? "%" : out;
}

bool read_file(const std::string& path, Bytes& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

FileStore::FileStore(std::string directory, const std::string& token, Millis timeout) : dir_(std::move(directory)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_))
    throw StoreError(fmt::format("rendezvous store {}: cannot create the directory ({})", describe(),
                                 ec ? ec.message() : "exists and is not a directory"));
  join(token, timeout);
}

void FileStore::join(const std::string& token, Millis timeout) {
  // link(2) of a complete temporary file is atomic even on NFS: exactly one process
  // creates .token and everyone then reads the same content.
  const std::string token_path = dir_ + "/.token";
  Bytes seen;
  if (!read_file(token_path, seen)) {
    std::string tmp = fmt::format("{}/.token.{}.{}", dir_, ::getpid(), std::hash<std::thread::id>()(std::this_thread::get_id()));
    std::ofstream(tmp, std::ios::binary) << token;
    [[maybe_unused]] int rc = ::link(tmp.c_str(), token_path.c_str());
    ::unlink(tmp.c_str());
    if (!read_file(token_path, seen))
      throw StoreError(fmt::format("rendezvous store {}: cannot write {}: {}", describe(), token_path, std::strerror(errno)));
  }
  if (std::string(seen.begin(), seen.end()) != token)
    throw StoreError(fmt::format("rendezvous store {} belongs to another job (its token fingerprint {}, yours {}); "
                                 "it is stale or shared by mistake: remove the directory or choose another path",
                                 describe(), token_fingerprint(std::string(seen.begin(), seen.end())),
                                 token_fingerprint(token)));
}

std::string FileStore::path_of(const std::string& key) const { return dir_ + "/" + escape_key(key); }

void FileStore::write_atomically(const std::string& path, const Bytes& value) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = fmt::format("{}/.tmp.{}.{}", dir_, ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    if (!out) throw StoreError(fmt::format("rendezvous store {}: cannot write {}", describe(), tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw StoreError(fmt::format("rendezvous store {}: cannot rename into {}: {}", describe(), path, std::strerror(err)));
  }
  std::lock_guard<std::mutex> lock(written_mutex_);
  written_.insert(path);
}

void FileStore::retire(bool last) {
  std::set<std::string> mine;
  {
    std::lock_guard<std::mutex> lock(written_mutex_);
    mine.swap(written_);
  }
  for (const auto& path : mine) ::unlink(path.c_str());  // a counter may be gone already
  if (last) {
    ::unlink((dir_ + "/.lock").c_str());
    ::unlink((dir_ + "/.token").c_str());
  }
}

void FileStore::set(const std::string& key, const Bytes& value) { write_atomically(path_of(key), value); }

Bytes FileStore::get(const std::string& key, Millis timeout) {
  wait({key}, timeout);
  Bytes out;
  if (!read_file(path_of(key), out))
    throw StoreError(fmt::format("rendezvous store {}: key '{}' vanished", describe(), key));
  return out;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::string lock_path = dir_ + "/.lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw StoreError(fmt::format("rendezvous store {}: cannot open {}: {}", describe(), lock_path, std::strerror(errno)));
  int rc;
  while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    ::close(fd);
    throw StoreError(fmt::format("rendezvous store {}: cannot lock {}", describe(), lock_path));
  }
  int64_t value = 0;
  try {
    Bytes old;
    if (read_file(path_of(key), old)) {
      std::string text(old.begin(), old.end());
      char* end = nullptr;
      value = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0')
        throw StoreError(fmt::format("rendezvous store {}: add: key '{}' holds '{}', not an integer counter",
                                     describe(), key, text));
    }
    value += delta;
    std::string text = std::to_string(value);
    write_atomically(path_of(key), Bytes(text.begin(), text.end()));
  } catch (...) {
    ::close(fd);  // closing drops the lock
    throw;
  }
  ::close(fd);
  return value;
}

std::vector<std::string> FileStore::missing(const std::vector<std::string>& keys) {
  std::vector<std::string> left;
  struct stat st;
  for (const auto& k : keys)
    if (::stat(path_of(k).c_str(), &st) != 0) left.push_back(k);
  return left;
}

bool FileStore::remove(const std::string& key) { return ::unlink(path_of(key).c_str()) == 0; }

std::string FileStore::describe() const { return "file://" + dir_; }

}  // namespace holmes::comm
