// One writer per run (writer_lock.hpp): a second holder is refused naming the first, a holder
// that was killed leaves nothing behind that blocks the next, and the local launcher's check
// reads without taking.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/errors.hpp"
#include "engine/checkpoint/writer_lock.hpp"
#include "engine/spec/run_paths.hpp"
#include "test/support/checkpoint_test_util.hpp"

namespace fs = std::filesystem;
using namespace holmes;
using namespace holmes::checkpoint;
using namespace holmes::test;

namespace {

std::string refusal_of_take(const std::string& dir) {
  try {
    WriterLock::take(dir, "second");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

TEST_CASE("writer lock: a second writer is refused naming the live one, and once released the folder is free") {
  const std::string dir = temp_dir("writer-lock");
  {
    WriterLock first = WriterLock::take(dir, "first-job");
    CHECK(first.held());
    const WriterInfo info = read_writer_info(spec::RunPaths::folder(dir).writer_lock);
    CHECK(info.pid == ::getpid());
    CHECK(info.host == this_host());
    CHECK(info.job == "first-job");
    CHECK(info.since.size() == 20);  // 2024-05-20T13:45:00Z
    const std::string msg = refusal_of_take(dir);
    CHECK_THAT(msg, Catch::Contains("job.output_dir: " + dir + " is being written by another live process: pid " +
                                    std::to_string(::getpid()) + " on " + this_host() + ", writing since " +
                                    info.since) &&
                        Catch::Contains("job 'first-job'") && Catch::Contains("run this command again") &&
                        !Catch::Contains("--resume"));
    CHECK_THROWS_WITH(check_no_live_writer(dir), Catch::Contains("is being written by another live process"));
  }
  CHECK_NOTHROW(check_no_live_writer(dir));
  WriterLock again = WriterLock::take(dir, "second");
  CHECK(again.held());
  CHECK(read_writer_info(spec::RunPaths::folder(dir).writer_lock).job == "second");
}

TEST_CASE("writer lock: a writer killed with SIGKILL does not block the next one") {
  const std::string dir = temp_dir("writer-lock-killed");
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The writer: takes the lock, says so, and waits to be killed.
    WriterLock lock = WriterLock::take(dir, "killed");
    const char ok = lock.held() ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    for (;;) ::pause();
  }
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  CHECK(ok == '1');
  CHECK_THAT(refusal_of_take(dir), Catch::Contains("pid " + std::to_string(child) + " on "));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
  ::close(ready[0]);
  ::close(ready[1]);
  CHECK_NOTHROW(check_no_live_writer(dir));
  CHECK(WriterLock::take(dir, "next").held());
}

TEST_CASE("writer lock: no lock file means no writer") {
  const std::string dir = temp_dir("writer-lock-none");
  CHECK_NOTHROW(check_no_live_writer(dir));
  CHECK(!fs::exists(spec::RunPaths::folder(dir).writer_lock));  // checking creates nothing
}
