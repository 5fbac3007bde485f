// `holmes-train --nproc-per-node N`: spawn N workers on this machine and supervise them.
//
// Each worker is a fresh exec of the same binary (or `exe`), in its own process group, with
// stdin from /dev/null, stdout and stderr relayed line by line with a "[rank N] " prefix, RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / GROUP_RANK /
// GROUP_WORLD_SIZE / MASTER_ADDR / MASTER_PORT / HOLMES_JOB_TOKEN set, and
// PR_SET_PDEATHSIG = SIGKILL so that it dies with the launcher. The launcher:
//   - forwards SIGINT, SIGTERM, SIGUSR1 and SIGHUP to every worker's process group (a second
//     SIGINT kills them at once); after such a signal it waits for the workers to stop on
//     their own and returns 128 + N (0 when they all still exit 0);
//   - when a worker exits non-zero or is killed while no stop was asked for, prints
//     "holmes-train: rank R (pid P) exited with code C" (or "was killed by signal S"),
//     sends SIGTERM to the others, SIGKILL to any still alive grace_s later, and returns C
//     (or 128 + S) of that first failed worker;
//     (with keep_going: reports the worker and leaves the others running, or starts it again
//     while it has max_restarts left);
//   - kills whatever a worker left behind in its process group once it has exited, so no
//     process outlives the job.
// The launcher must call this from its main thread (PDEATHSIG follows the forking thread).
#pragma once

#include <string>
#include <vector>

#include "engine/launch/launch_env.hpp"

namespace holmes::launch {

// What to start: `nproc` copies of `exe` with `argv`, global ranks first_rank.. .
struct WorkerGroup {
  std::string exe = "/proc/self/exe";
  std::vector<std::string> argv;  // argv[0] included, passed unchanged
  int nproc = 1;
  int first_rank = 0;              // global rank of local worker 0
  int world_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;             // 0 = pick a free port on this machine
  std::string token;               // "" = draw a random one
  double grace_s = 10;             // SIGTERM -> SIGKILL delay when stopping after a failure
  std::string log_prefix = "holmes-train";  // start of the launcher's own messages
  bool prefix_output = true;       // relay worker stdout/stderr with "[rank N] " per line
  // An elastic job (parallel.elastic, docs/elastic.md): a worker that fails is reported, the
  // others are left to go on without it; the job's code is 0 when a worker finished with 0,
  // else the first failed worker's.
  bool keep_going = false;
  // With keep_going (torchrun's --max-restarts): a worker that fails while the job goes on is
  // started again with its RANK and environment, at most this many times per worker, and
  // rejoins (docs/elastic.md "Rejoin"); the launcher says so. 0: never.
  int max_restarts = 0;
};

// Spawns and supervises the group as described above; returns the job's exit code.
// Throws std::runtime_error when a worker cannot be started at all (fork fails); the workers
// already started are killed first.
int run_workers(const WorkerGroup& group);

// Both run_local_workers: HOLMES_LAUNCH_GRACE_S, when set, replaces grace_s (tests, or a
// site whose checkpoints take longer than the default); a bad value throws UserError.

// Single machine: N workers of this binary, ranks 0..N-1, master 127.0.0.1 on a free port,
// a random job token. `argv` is this process's full argv; the launcher's flags are removed.
// An elastic job's supervision: WorkerGroup::keep_going and max_restarts.
struct Elastic {
  bool keep_going = false;
  int max_restarts = 0;
};

int run_local_workers(int nproc, const std::vector<std::string>& argv, double grace_s, Elastic elastic = {});

// The launcher of one node of a larger job (source "local" of detect_launch_env, e.g. one
// srun task per node): ranks env.rank .. env.rank + env.local_world_size - 1 of
// env.world_size, master and token from `env` (a free port / random token where they are
// 0 / "", which is only right on a single node).
int run_local_workers(const LaunchEnv& env, const std::vector<std::string>& argv, double grace_s,
                      Elastic elastic = {});

// This process's argv, from /proc/self/cmdline (so main need not pass argv down).
std::vector<std::string> current_argv();

// argv without the launcher's flags: "--nproc-per-node N" / "--nproc-per-node=N" and
// "--max-restarts K" / "--max-restarts=K" (every occurrence).
std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& argv);

// 32 hex digits from the kernel's random source.
std::string random_job_token();

// A TCP port that was free on `addr` a moment ago (bind to port 0 and read it back). Throws
// std::runtime_error when no socket can be bound.
int pick_free_port(const std::string& addr);

}  // namespace holmes::launch
