// run_workers with /bin/sh workers: the environment each rank gets, a failing rank stopping
// the others, SIGKILL after the grace period, signal forwarding, and no process left behind.
// Each case runs a few short-lived shells; the slowest one takes about a second.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/launch/local_launcher.hpp"

using namespace holmes::launch;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char templ[] = "/tmp/holmes_launch_test_XXXXXX";
    path = mkdtemp(templ);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Workers running `script` under /bin/sh with $1 = the temp dir.
WorkerGroup shell_group(int nproc, const std::string& script, const fs::path& dir, double grace_s = 5) {
  WorkerGroup g;
  g.exe = "/bin/sh";
  g.argv = {"sh", "-c", script, "sh", dir.string()};
  g.nproc = nproc;
  g.world_size = nproc;
  g.grace_s = grace_s;
  g.log_prefix = "test-launcher";
  return g;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool process_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) return true;
    std::string pid_s, comm, state;
    stat >> pid_s >> comm >> state;
    if (state == "Z") return true;  // killed, waiting for its new parent to reap it
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  return false;
}

}  // namespace

TEST_CASE("workers get their rank variables, one port and one token", "[launch]") {
  TempDir tmp;
  auto g = shell_group(3,
                       "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
                       "$MASTER_PORT $HOLMES_JOB_TOKEN\" > \"$1/rank$RANK\"",
                       tmp.path);
  g.first_rank = 3;
  g.world_size = 6;
  g.node_rank = 1;
  g.num_nodes = 2;
  REQUIRE(run_workers(g) == 0);
  std::string port, token;
  for (int local = 0; local < 3; ++local) {
    std::istringstream line(read_file(tmp.path / ("rank" + std::to_string(3 + local))));
    int rank, world, lrank, lworld, node;
    std::string addr, p, t;
    line >> rank >> world >> lrank >> lworld >> node >> addr >> p >> t;
    CHECK(rank == 3 + local);
    CHECK(world == 6);
    CHECK(lrank == local);
    CHECK(lworld == 3);
    CHECK(node == 1);
    CHECK(addr == "127.0.0.1");
    CHECK(std::stoi(p) > 0);
    CHECK(t.size() == 32);
    if (local == 0) port = p, token = t;
    CHECK(p == port);
    CHECK(t == token);
  }
}

TEST_CASE("a failing rank stops the others and gives its exit code", "[launch]") {
  TempDir tmp;
  auto g = shell_group(4, "if [ \"$RANK\" = 2 ]; then sleep 0.2; exit 7; fi; exec sleep 30", tmp.path);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_workers(g) == 7);
  CHECK(seconds_since(t0) < 5);
}

TEST_CASE("a rank killed by a signal gives 128 + signal", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2, "if [ \"$RANK\" = 1 ]; then sleep 0.2; kill -9 $$; fi; exec sleep 30", tmp.path);
  CHECK(run_workers(g) == 128 + SIGKILL);
}

TEST_CASE("a worker that ignores SIGTERM is killed after the grace period", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2,
                       "if [ \"$RANK\" = 0 ]; then sleep 0.2; exit 1; fi; trap '' TERM; "
                       "echo $$ > \"$1/stubborn\"; while :; do sleep 0.05; done",
                       tmp.path, 0.5);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_workers(g) == 1);
  double took = seconds_since(t0);
  CHECK(took >= 0.5);
  CHECK(took < 5);
  CHECK(process_gone(std::stoi(read_file(tmp.path / "stubborn"))));
}

TEST_CASE("SIGTERM to the launcher reaches every worker", "[launch]") {
  TempDir tmp;
  // Rank 0 signals the launcher (its parent); every rank records the forwarded SIGTERM.
  auto g = shell_group(3,
                       "trap 'echo term > \"$1/got$RANK\"; exit 143' TERM; "
                       "if [ \"$RANK\" = 0 ]; then sleep 0.3; kill -TERM $PPID; fi; "
                       "i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done",
                       tmp.path);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_workers(g) == 128 + SIGTERM);
  CHECK(seconds_since(t0) < 4);
  for (int r = 0; r < 3; ++r) CHECK(read_file(tmp.path / ("got" + std::to_string(r))) == "term\n");
}

TEST_CASE("what a worker leaves behind in its process group is killed", "[launch]") {
  TempDir tmp;
  auto g = shell_group(1, "sleep 300 & echo $! > \"$1/child\"; exit 0", tmp.path);
  CHECK(run_workers(g) == 0);
  CHECK(process_gone(std::stoi(read_file(tmp.path / "child"))));
}

TEST_CASE("a binary that cannot be executed is a failed rank", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2, "", tmp.path);
  g.exe = (tmp.path / "no-such-binary").string();
  CHECK(run_workers(g) == 127);
}

TEST_CASE("the launcher's flags are removed from the workers argv", "[launch]") {
  using V = std::vector<std::string>;
  CHECK(strip_launcher_flags(V{"ht", "--config", "a.yaml", "--nproc-per-node", "4", "--set", "x=1"}) ==
        V{"ht", "--config", "a.yaml", "--set", "x=1"});
  CHECK(strip_launcher_flags(V{"ht", "--nproc-per-node=2"}) == V{"ht"});
  CHECK(strip_launcher_flags(V{"ht", "--max-restarts", "2", "--nproc-per-node", "3", "--max-restarts=1", "-c", "j"}) ==
        V{"ht", "-c", "j"});
  CHECK(strip_launcher_flags(V{"ht"}) == V{"ht"});
  CHECK(random_job_token() != random_job_token());
  CHECK(pick_free_port("127.0.0.1") > 0);
}

TEST_CASE("current_argv reads this process's command line", "[launch]") {
  auto argv = current_argv();
  REQUIRE(!argv.empty());
  CHECK(argv[0].find("test_launch") != std::string::npos);
}

TEST_CASE("worker output comes through line by line with a rank prefix", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2, "printf 'a%s\\nb' $RANK; echo e$RANK >&2", tmp.path);
  // Capture the launcher's stdout (fd 1) in a file for the duration of the run.
  fflush(stdout);
  int saved = dup(1);
  FILE* capture = fopen((tmp.path / "out").c_str(), "w");
  dup2(fileno(capture), 1);
  int code = run_workers(g);
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  fclose(capture);
  CHECK(code == 0);
  std::string out = read_file(tmp.path / "out");
  CHECK(out.find("[rank 0] a0\n") != std::string::npos);
  CHECK(out.find("[rank 1] a1\n") != std::string::npos);
  CHECK(out.find("[rank 0] b\n") != std::string::npos);  // a last line without newline is kept
  CHECK(out.find("[rank 1] b\n") != std::string::npos);
  CHECK(out.find("e0") == std::string::npos);  // stderr stays on stderr
}

TEST_CASE("a worker failing otherwise while stopping on a signal is still reported", "[launch]") {
  TempDir tmp;
  // Rank 0 asks the launcher to stop; rank 1 answers the forwarded SIGTERM with code 9 (a
  // failed checkpoint, say); rank 2 keeps going until the launcher stops it.
  auto g = shell_group(3,
                       "if [ \"$RANK\" = 1 ]; then trap 'exit 9' TERM; elif [ \"$RANK\" = 2 ]; then trap '' TERM; "
                       "else trap 'exit 143' TERM; sleep 0.3; kill -TERM $PPID; fi; "
                       "i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done",
                       tmp.path, 0.5);
  auto t0 = std::chrono::steady_clock::now();
  CHECK(run_workers(g) == 9);
  CHECK(seconds_since(t0) < 4);
}

// Rank 1 fails (exit 3) until its third start; rank 0 waits (at most ~5 s) for it to succeed.
// Each start of rank 1 appends its variables to $1/starts.
constexpr const char* kFailsTwice =
    "if [ \"$RANK\" = 1 ]; then echo \"$RANK $LOCAL_RANK $MASTER_PORT $HOLMES_JOB_TOKEN\" >> \"$1/starts\"; "
    "[ $(wc -l < \"$1/starts\") -ge 3 ] && { touch \"$1/done\"; exit 0; }; exit 3; fi; "
    "i=0; while [ ! -f \"$1/done\" ] && [ $i -lt 250 ]; do sleep 0.02; i=$((i+1)); done; exit 0";

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> out;
  std::ifstream in(p);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST_CASE("an elastic launcher starts a failed worker again, as often as max_restarts allows", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2, kFailsTwice, tmp.path);
  g.keep_going = true;
  g.max_restarts = 2;
  CHECK(run_workers(g) == 0);
  const auto starts = lines_of(tmp.path / "starts");
  REQUIRE(starts.size() == 3);  // the first start and two restarts, each with the same variables
  CHECK(starts[1] == starts[0]);
  CHECK(starts[2] == starts[0]);
  CHECK(fs::exists(tmp.path / "done"));
}

TEST_CASE("an elastic launcher stops starting a worker again after max_restarts", "[launch]") {
  TempDir tmp;
  auto g = shell_group(2, kFailsTwice, tmp.path);
  g.keep_going = true;
  g.max_restarts = 1;
  CHECK(run_workers(g) == 0);  // rank 0 finished the job
  CHECK(lines_of(tmp.path / "starts").size() == 2);
  CHECK(!fs::exists(tmp.path / "done"));
  g.max_restarts = 0;  // today's behaviour: no restart
  fs::remove(tmp.path / "starts");
  CHECK(run_workers(g) == 0);
  CHECK(lines_of(tmp.path / "starts").size() == 1);
}
