// A worker process: start-up, the DistTrainer of this rank, the shared training loop, and
// the one place that turns a failure of any rank into this rank's exit message.
#include "engine/train/dist_run.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "comm/errors.hpp"
#include "engine/spec/errors.hpp"
#include "engine/train/data.hpp"
#include "engine/train/dist_trainer.hpp"
#include "engine/train/run.hpp"
#include "engine/train/trainer.hpp"
#include "model/cpu/cpu_kernels.hpp"

namespace holmes::train {

namespace {

// Job-wide record of the first failure, so that a rank whose own error only shows a
// neighbour that gave up (a cascade) can still name the rank that failed first. The first
// rank to report sets it; the rest read it. Never throws: with the store gone (rank 0 died)
// the rank's own peer is all we know.
int first_failed_rank(const std::shared_ptr<comm::Store>& store, int own_peer) {
  if (!store) return own_peer;
  try {
    if (own_peer >= 0 && store->add("job/failures", 1) == 1) {
      comm::set_string(*store, "job/first_failed", std::to_string(own_peer));
      return own_peer;
    }
    return std::stoi(comm::get_string(*store, "job/first_failed", comm::Millis(2000)));
  } catch (const std::exception&) {
    return own_peer;
  }
}

// Rank 0 hosts the store the others read the first failure from: after its own failure it
// closes its groups (so that peers blocked on it fail now rather than at their time-out) and
// keeps the store up until every other live rank has reported, or cluster.timeout_s.
void linger_as_store_host(Runtime& rt, double timeout_s) {
  rt.tp.reset();
  rt.pp.reset();
  rt.dp.reset();
  rt.embedding.reset();
  rt.world_group.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  try {
    // The rank that died first never reports: world - 1 reports are everyone that can.
    while (rt.store->add("job/reported", 0) < rt.world - 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (const std::exception&) {
  }
}

// Prints the failure and ends the process at once: the groups of a broken job may block in
// their destructors (Gloo pairs waiting on a dead peer), and a worker owns no children.
[[noreturn]] void fail(Runtime& rt, int rank, const std::string& what, int own_peer, double timeout_s) {
  const int peer = first_failed_rank(rt.store, own_peer);
  std::fflush(stdout);
  if (peer >= 0) std::fprintf(stderr, "holmes-train: rank %d: %s, peer rank %d\n", rank, what.c_str(), peer);
  else std::fprintf(stderr, "holmes-train: rank %d: %s\n", rank, what.c_str());
  std::fflush(stderr);
  if (rt.store) {
    try {
      rt.store->add("job/reported", 1);
    } catch (const std::exception&) {
    }
    if (rank == 0) linger_as_store_host(rt, timeout_s);
  }
  std::_Exit(1);
}

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
  return run_loop(spec, trainer, *data, ctx);
}

}  // namespace

int worker_threads(int local_world) {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && *omp) {
    char* end = nullptr;
    long n = std::strtol(omp, &end, 10);
    if (end && *end == '\0' && n > 0) return static_cast<int>(n);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                : static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_world));
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
