// A worker process: start-up, the DistTrainer of this rank, the shared training loop, and
// the one place that turns a failure of any rank into this rank's exit message.
#include "engine/train/dist_run.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "comm/errors.hpp"
#include "engine/spec/errors.hpp"
#include "engine/topo/discover.hpp"
#include "engine/train/calibration.hpp"
#include "engine/train/data.hpp"
#include "engine/train/dist_trainer.hpp"
#include "engine/train/run.hpp"
#include "engine/train/trainer.hpp"
#include "model/cpu/cpu_kernels.hpp"

namespace holmes::train {

namespace {

// After a failure every live rank records in the store whom its own error blames
// ("job/failed/<rank>" = peer, -1 when none). A rank that died or hangs never records
// anything, while a rank that only gave up because of it does: so the culprit is a blamed
// rank without a record of its own (the most blamed one when several). Waits up to
// `grace_s` until every rank has either reported or is such a culprit. Never throws: with
// the store gone (rank 0 died) the rank's own peer is all we know.
int blame_failed_rank(comm::Store& store, int rank, int world, int own_peer, double grace_s) {
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(fmt::format("job/failed/{}", r));
  int pick = -1;
  try {
    comm::set_string(store, keys[rank], std::to_string(own_peer));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    int last_reporters = -1;
    auto settled_at = deadline;
    for (;;) {
      std::vector<bool> reported(world, true);
      for (const auto& k : store.missing(keys)) reported[std::stoi(k.substr(k.rfind('/') + 1))] = false;
      std::map<int, int> blamed;  // culprit candidate -> times blamed
      int reporters = 0;
      for (int r = 0; r < world; ++r) {
        if (!reported[r]) continue;
        ++reporters;
        const int p = std::stoi(comm::get_string(store, keys[r], comm::Millis(1000)));
        if (p >= 0 && p < world && !reported[p]) ++blamed[p];
      }
      pick = -1;
      for (const auto& [p, n] : blamed)
        if (pick < 0 || n > blamed[pick]) pick = p;
      // Certain once only one rank is silent. Otherwise a silent rank may merely be slower
      // to time out (blamed by a neighbour that waits on it), so the verdict also needs the
      // reports to have settled for a moment.
      const auto now = std::chrono::steady_clock::now();
      if (reporters != last_reporters) {
        last_reporters = reporters;
        settled_at = now + std::chrono::milliseconds(1500);
      }
      const bool all_explained = reporters + static_cast<int>(blamed.size()) >= world;
      if (reporters >= world - 1 || (all_explained && now > settled_at) || now > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    store.add("job/decided", 1);
  } catch (const std::exception&) {
  }
  return pick >= 0 ? pick : own_peer;
}

// Rank 0 hosts the store the others decide with: it keeps it up until every other live
// rank has decided, or cluster.timeout_s.
void linger_as_store_host(comm::Store& store, int world, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  try {
    // A rank that died never decides: world - 1 is everyone that can.
    while (store.add("job/decided", 0) < world - 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (const std::exception&) {
  }
}

// Prints the failure and ends the process at once (a worker owns no children). First it
// closes its groups, so that peers blocked on this rank fail now rather than at their
// time-out; the destructors of the unwound DistTrainer already left them idle.
[[noreturn]] void fail(Runtime& rt, int rank, const std::string& what, int own_peer, double timeout_s) {
  rt.tp.reset();
  rt.pp.reset();
  rt.dp.reset();
  rt.embedding.reset();
  rt.world_group.reset();
  const int peer = rt.store ? blame_failed_rank(*rt.store, rank, rt.world, own_peer, std::min(timeout_s, 5.0))
                            : own_peer;
  std::fflush(stdout);
  if (peer >= 0) std::fprintf(stderr, "holmes-train: rank %d: %s, peer rank %d\n", rank, what.c_str(), peer);
  else std::fprintf(stderr, "holmes-train: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  if (rt.store && rank == 0) linger_as_store_host(*rt.store, rt.world, timeout_s);
  std::_Exit(1);
}

// Groups reduce floats: exact for the integers the loop agrees on (steps, stop flags, MiB)
// up to 2^24, which is all it needs.
double max_over(comm::ProcessGroup& world, double v) {
  float x = static_cast<float>(v);
  world.all_reduce(std::span<float>(&x, 1), comm::ReduceOp::kMax);
  return x;
}

int train_started(const spec::JobSpec& spec, Runtime& rt) {
  const std::string plan_text = plan::format_plan_text(rt.plan);
  if (rt.rank == 0) fmt::print("{}plan hash {:016x}\n", plan_text, rt.plan_hash);
  std::filesystem::create_directories(spec.job.output_dir);
  const int threads = worker_threads(rt.local_world);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  // cluster.calibrate: the link probe runs before training so the steps see no probe traffic.
  const bool calibrate = !spec.cluster.calibrate.empty();
  const std::vector<LinkSample> links = calibrate ? probe_links(rt, spec) : std::vector<LinkSample>{};
  auto data = DataSet::open(spec);
  auto kernels = model::cpu::make_cpu_kernels();
  DistTrainer trainer(spec, *kernels, *data, parallel_context(rt));
  LoopContext ctx;
  ctx.rank = rt.rank;
  ctx.world = rt.world;
  comm::ProcessGroup* world = rt.world_group.get();
  ctx.max_over_ranks = [world](double v) { return max_over(*world, v); };
  ctx.store = rt.store;
  ctx.plan_text = plan_text;
  ctx.plan_hash = rt.plan_hash;
  const int code = run_loop(spec, trainer, *data, ctx);
  if (calibrate && code == 0) {
    const DistTrainer::StepTimes t = trainer.step_times();
    finish_calibration(rt, spec, links, StepShare{t.host_s, trainer.compute_per_step()});
  }
  // Finished or stopped by a signal: leave a file:// rendezvous directory empty for the next
  // run (a resubmitted job included). Every member first, then rank 0 drops the token.
  rt.world_group->barrier();
  rt.store->retire(false);
  rt.world_group->barrier();
  if (rt.rank == 0) rt.store->retire(true);
  return code;
}

}  // namespace

int worker_threads(int local_world) {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    char* end = nullptr;
    long n = std::strtol(omp, &end, 10);
    if (end && *end == '\0' && n > 0) return static_cast<int>(n);
  }
  return std::max(1, topo::detect_cpu_devices().cores / std::max(1, local_world));
}

ParallelContext parallel_context(const Runtime& rt) {
  const plan::RankInfo& me = rt.plan.ranks.at(rt.rank);
  const plan::Stage& stage = rt.plan.stages.at(me.pp);
  ParallelContext c;
  c.tp_rank = me.tp;
  c.tp_size = rt.plan.tp;
  c.pp_stage = me.pp;
  c.pp_size = rt.plan.pp;
  c.dp_rank = me.dp;
  c.dp_size = rt.plan.dp;
  c.first_layer = stage.first_layer;
  c.num_layers = stage.num_layers;
  c.tp = rt.tp.get();
  c.pp = rt.pp.get();
  c.dp = rt.dp.get();
  c.embedding = rt.embedding.get();
  return c;
}

int run_job(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  if (env.world_size <= 1) return run_training(spec);
  Runtime rt;
  try {
    rt = start_runtime(spec, env);
    return train_started(spec, rt);
  } catch (const UserError&) {
    throw;
  } catch (const comm::CommError& e) {
    fail(rt, env.rank, e.what(), e.where().peer_global, spec.cluster.timeout_s);
  } catch (const std::exception& e) {
    fail(rt, env.rank, e.what(), -1, spec.cluster.timeout_s);
  }
}

}  // namespace holmes::train
