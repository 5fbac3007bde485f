// One writer per run. The process that writes a run's job.output_dir (the single process, or
// rank 0 of a job) holds an advisory lock on <job.output_dir>/writer.lock for as long as it
// runs, and writes into the file who it is (host, pid, since when, job name). A second
// process that would write the same folder (a second start, a --resume auto beside a live
// run, a Slurm requeue while the old allocation is still dying) finds the lock taken and is
// refused, naming that writer; the folder and the first run stay as they were.
//
// The lock is an open-file-description lock (fcntl F_OFD_SETLK; classic F_SETLK on kernels
// without it): the kernel drops it when its holder exits in any way, SIGKILL included, so a
// dead writer never blocks a resume and nothing needs cleaning up. It is POSIX byte-range
// locking, which network file systems carry to the server: NFSv4 releases the locks of a
// client that disappeared when its lease expires (90 s by default); NFSv3 (NLM) only when
// the client's lock daemon reports its reboot. On a file system without locks the run goes
// on with a warning. The file itself is never deleted: a process locking a file that another
// has just replaced would lock a different file.
#pragma once

#include <string>

namespace holmes::checkpoint {

// Who holds a writer lock, as the holder wrote it into the lock file.
struct WriterInfo {
  std::string host;
  long pid = 0;
  std::string since;  // UTC, 2024-05-20T13:45:00Z
  std::string job;    // job.name
};
// Reads the lock file's record; empty fields when it holds none (yet).
WriterInfo read_writer_info(const std::string& lock_path);
// "pid 4242 on node7, writing since 2024-05-20T13:45:00Z (12 min ago), job 'gpt2'".
std::string describe_writer(const WriterInfo& info);

class WriterLock {
 public:
  WriterLock() = default;  // holds nothing
  // Takes <dir>/writer.lock (spec::RunPaths) for this process (`dir` must exist) and records this process in
  // it. Throws a UserError (exit 2) naming `dir` and the live writer when another process
  // holds it.
  static WriterLock take(const std::string& dir, const std::string& job_name);

  WriterLock(WriterLock&& other) noexcept;
  WriterLock& operator=(WriterLock&& other) noexcept;
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  ~WriterLock();  // releases the lock (the record stays; the next holder replaces it)

  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;  // false with fd_ >= 0: the file system has no locks (warned)
};

// Reading only (the local launcher, before it spawns the workers): the UserError take() would
// throw when another process writes `dir`; nothing when the lock is free or `dir` has none.
void check_no_live_writer(const std::string& dir);

}  // namespace holmes::checkpoint
