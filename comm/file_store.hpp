// File rendezvous store: one file per key in a directory on a file system every rank can
// see (cluster.rendezvous: file:///shared/path). Writes go to a temporary file renamed
// into place, so a reader never sees half a value; counters take an flock. The first
// process writes the job token to <dir>/.token; a process with another token (a stale
// directory of an earlier job) is refused with a StoreError telling what to remove.
#pragma once

#include <mutex>
#include <set>
#include <string>

#include "comm/store.hpp"

namespace holmes::comm {

class FileStore : public Store {
 public:
  FileStore(std::string directory, const std::string& token, Millis timeout);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, Millis timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::vector<std::string> missing(const std::vector<std::string>& keys) override;
  bool remove(const std::string& key) override;
  std::string describe() const override;
  void retire(bool last) override;

 private:
  std::string path_of(const std::string& key) const;
  void write_atomically(const std::string& path, const Bytes& value);
  void join(const std::string& token, Millis timeout);

  std::string dir_;
  std::mutex written_mutex_;
  std::set<std::string> written_;  // files this member created (removed by retire)
};

}  // namespace holmes::comm
