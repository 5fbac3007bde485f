// A worker process: start-up, the Trainer of this rank and the shared training loop; a
// failure of any rank becomes this rank's exit message through engine/runtime/failure.hpp.
#include "engine/train/dist_run.hpp"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "comm/errors.hpp"
#include "common/errors.hpp"
#include "engine/topo/discover.hpp"
#include "engine/data/data.hpp"
#include "engine/runtime/elastic.hpp"
#include "engine/runtime/failure.hpp"
#include "engine/runtime/replan.hpp"
#include "engine/train/calibration.hpp"
#include "engine/train/checkpoint_loop.hpp"
#include "engine/train/peer_copies.hpp"
#include "engine/train/replan_restart.hpp"
#include "engine/train/run.hpp"
#include "engine/parallel/trainer.hpp"
#include "backends/backends.hpp"

namespace holmes::train {

namespace {

// Groups reduce floats: exact for the integers the loop agrees on (stop signals, MiB) up
// to 2^24, and close enough for the shares it reports.
std::vector<double> max_over(comm::ProcessGroup& world, std::vector<double> v) {
  std::vector<float> x(v.begin(), v.end());
  world.all_reduce(std::span<float>(x), comm::ReduceOp::kMax);
  return std::vector<double>(x.begin(), x.end());
}

// Test hook (docs/elastic.md): HOLMES_TEST_DUMP_WEIGHTS=DIR makes every rank of a diloco or an
// elastic sync job write, once its run finished, its private state (Trainer::private_state: a
// header of five uint64 (magic, replica, params n, moments m, outer floats k; 0 for sync), then
// n weights, 2 m AdamW moments and the k outer floats, float32 in this machine's byte order) to
// DIR/rank-<R>.bin, for tests that compare replicas bit for bit.
void dump_state_for_test(parallel::Trainer& trainer, int rank) {
  const char* dir = std::getenv("HOLMES_TEST_DUMP_WEIGHTS");
  if (dir == nullptr || *dir == '\0') return;
  const std::vector<std::byte> state = trainer.private_state();  // empty: no replicas
  if (state.empty()) return;
  const std::string path = fmt::format("{}/rank-{}.bin", dir, rank);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(state.data()), static_cast<std::streamsize>(state.size()));
  if (!out) throw std::runtime_error(fmt::format("HOLMES_TEST_DUMP_WEIGHTS: cannot write {}", path));
}

// The loop's job-wide reductions over the current generation's world group, repeated over the
// survivors after a loss; checkpoints saved by the current generation's ranks (docs/elastic.md).
void elastic_loop_context(LoopContext& ctx, runtime::ElasticSession& elastic, parallel::Trainer& trainer) {
  ctx.max_over_ranks = [&elastic, &trainer](std::vector<double> v) {
    for (;;) {
      try {
        return max_over(elastic.world(), v);
      } catch (const comm::CommError& e) {
        trainer.recover_replicas(e.what());
      }
    }
  };
  ctx.start_max_over_ranks = nullptr;  // diloco reduces in the loop's order (FigureExchange)
  ctx.abort_max_over_ranks = [&elastic] { elastic.world().abort(); };
  ctx.save_refused = [meet = ctx.max_over_ranks]() -> std::string {
    meet(std::vector<double>{0.0});  // a lost rank is found (and the survivors regroup) here
    return "";
  };
  ctx.save_members = [&elastic] {
    return LoopContext::SaveMembers{
        elastic.member_index(), elastic.member_count(), elastic.generation(),
        [&elastic](const std::vector<int>& missing) { return elastic.wait_in_vain(missing); }};
  };
  ctx.save_abandoned = [&trainer](const std::string& what) { trainer.recover_replicas(what); };
  ctx.leads = [&elastic] { return elastic.leads(); };
  ctx.unsettled = [&elastic] { return elastic.unsettled(); };
}

int train_started(const spec::JobSpec& spec, runtime::Runtime& rt,
                  const std::function<void(int64_t)>& on_step_done = nullptr, int hook_rank = -1,
                  const std::function<void(LoopContext&)>& extend = nullptr) {
  const std::string plan_text = plan::format_plan_text(rt.plan);
  if (rt.rank == 0) fmt::print("{}plan hash {:016x}\n", plan_text, rt.plan_hash);
  const int threads = worker_threads(rt.local_world);
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);

  const bool calibrate = !spec.cluster.calibrate.empty();
  auto data = data::DataSet::open(spec);
  model::Backend backend = make_training_backend(spec, rt.local_rank);
  // After the backend (it chose this process's GPU), before the trainer; both outlive it.
  const runtime::DeviceComms device = runtime::connect_device_groups(rt, spec);
  const std::unique_ptr<parallel::ParallelGroups> groups = runtime::executor_groups(rt, device, *backend.memory);
  for (const std::string& line : device.log) fmt::print("rank {}: {}\n", rt.rank, line);
  if (rt.rank == 0)
    for (const std::string& line : groups->describe()) fmt::print("rank 0: {}\n", line);
  std::fflush(stdout);
  // cluster.calibrate: the link probe runs on the groups the steps use (device buffers on NCCL
  // where the plan gives them), before the trainer takes its memory and before the steps, so
  // they see no probe traffic.
  HostComm host_comm;
  const std::vector<LinkSample> links =
      calibrate ? probe_links(rt, spec, *groups, *backend.memory, &host_comm) : std::vector<LinkSample>{};
  parallel::Trainer trainer(spec, rt.rank_plan, backend, *data, groups.get());
  const runtime::AbortOnUnwind stop_nccl_first(device);  // destroyed before the trainer
  // parallel.elastic: the session regroups the trainer after a loss and owns the world group
  // from then on.
  std::optional<runtime::ElasticSession> elastic;
  if (spec.parallel.elastic && spec.parallel.replicas > 1) trainer.set_recovery(&elastic.emplace(rt, spec));
  LoopContext ctx;
  ctx.rank = rt.rank;
  ctx.world = rt.world;
  comm::ProcessGroup* world = rt.joining ? nullptr : &rt.world_group();  // a joiner's comes with its admission
  ctx.nodes = static_cast<int>(rt.topology.nodes.size());
  ctx.max_over_ranks = [world](std::vector<double> v) { return max_over(*world, std::move(v)); };
  // A thread per background reduction (one per log line at most); the loop waits for each
  // before it starts the next or uses the world group otherwise.
  ctx.start_max_over_ranks = [world](std::vector<double> v) {
    return std::async(std::launch::async, [world, v = std::move(v)]() mutable { return max_over(*world, std::move(v)); });
  };
  ctx.abort_max_over_ranks = [world] { world->abort(); };
  if (elastic) elastic_loop_context(ctx, *elastic, trainer);
  if (rt.joining) {
    // A late rank: admitted at an outer sync of the running job, it takes its peer's state and
    // trains from the step after it.
    const auto [layout, step] = elastic->join();
    trainer.join_replicas(layout, step);
    ctx.joined_at = step + 1;
  }
  ctx.store = rt.store;
  ctx.on_step_done = on_step_done;
  ctx.hook_rank = hook_rank;
  ctx.plan_text = plan_text;
  ctx.plan_hash = rt.plan_hash;
  ctx.plan_json = plan::format_plan_json(rt.plan);
  ctx.ranks = rank_work_of(rt.plan);
  if (extend) extend(ctx);
  const int code = run_loop(spec, trainer, *data, ctx);
  // A rank still waiting to rejoin (started again by a launcher, say) stops now, not at the end of its wait.
  if (elastic && elastic->leads())
    runtime::job_over(*rt.store, code == 0 ? runtime::kJobFinished : fmt::format("exit code {}", code));
  if (code == 0) dump_state_for_test(trainer, rt.rank);
  if (calibrate && code == 0) {
    const parallel::Trainer::StepTimes t = trainer.step_times();
    StepShare share{t.host_s, t.cpu_s, trainer.compute_per_step(), trainer.other_cpu_per_step(),
                    trainer.groups().group(schedule::Axis::kTp).sums(), trainer.timed_steps()};
    share.job_sum_s = t.job_sum_s;
    share.update_s = t.update_s;
    if (const parallel::OuterSync* outer = trainer.outer()) {
      share.outer_wire_s = outer->wire().seconds;
      share.outer_wire_bytes = outer->wire().bytes;
      share.outer_exchanges = outer->wire().exchanges;
      share.presync_s = trainer.presync_sums().seconds;
      share.presync_sums = trainer.presync_sums().count;
    }
    finish_calibration(rt, spec, links, share, host_comm);
  }
  // Finished or stopped by a signal: leave a file:// rendezvous directory empty for the next
  // run (a resubmitted job included). Every member first, then the leader drops the token.
  comm::ProcessGroup& last_world = elastic ? elastic->world() : rt.world_group();
  last_world.barrier();
  rt.store->retire(false);
  last_world.barrier();
  if (elastic ? elastic->leads() : rt.rank == 0) rt.store->retire(true);
  return code;
}

// parallel.elastic without replicas (docs/elastic.md "A single pipeline that loses a node"):
// the same processes train generation after generation; after a communication failure the
// survivors re-plan on the nodes that remain (runtime::ReplanSession) and train again from the
// peer copies of the last checkpoint step (peer_copies.hpp) or, where those are incomplete,
// from the run's last checkpoint, redoing the steps since it.
int train_replanning(const spec::JobSpec& spec, runtime::Runtime& rt) {
  runtime::ReplanSession session(rt, spec);
  const int started_as = rt.rank;  // the test hook's numbering
  spec::JobSpec current = spec;
  int64_t steps_done = 0;
  std::optional<runtime::ReplanSession::Outcome> replanned;
  std::optional<HeldCopies> held;  // this rank's newest peer copies, whichever generation made them
  for (;;) {
    std::string what;
    // The generation's group for the copies and its copies; closed before the survivors
    // regroup, so a peer blocked on this rank there fails at once.
    std::unique_ptr<comm::ProcessGroup> copy_group;
    std::unique_ptr<PeerCopies> copies;
    try {
      if (replanned) {
        // Inside the try: a rank lost while start-up is opened again is one more loss.
        current = spec_after_replan(replanned->survivors.spec, spec);
        session.reopen(*replanned);
      }
      copy_group = runtime::make_job_group(rt, current, "peer-copies");
      copies = std::make_unique<PeerCopies>(rt.plan, rt.rank, session.generation(), rt.store, copy_group.get());
      const int64_t done_before = replanned ? replanned->decision.steps_done : 0;
      auto extend = [&](LoopContext& ctx) {
        ctx.mirror = [&copies, &held](std::span<const checkpoint::ShardState> states,
                                      const checkpoint::SaveContext& c) {
          copies->mirror(states, c);
          held = copies->held();
        };
        if (!replanned) return;
        ctx.peer_source = [&, done_before](int64_t disk_step) {
          std::optional<PeerSource> src = peer_source(held, disk_step, parallel::gpt_config_of(current), *rt.store,
                                                      *copy_group, rt.rank, rt.world, current.cluster.timeout_s);
          if (rt.rank == 0)
            discard_redone_rows(current,
                                src ? redo_from(current, src->info.step,
                                                fmt::format("{}, held in the survivors' memory (the checkpoint folder is "
                                                            "not read)", src->info.dir),
                                                done_before)
                                    : redo_of(current, done_before),
                                session.generation());
          return src;
        };
      };
      return train_started(current, rt, [&steps_done](int64_t done) { steps_done = done; }, started_as, extend);
    } catch (const comm::CommError& e) {
      what = e.what();
    } catch (const comm::StoreError& e) {
      what = e.what();
    }
    copies.reset();
    copy_group.reset();
    replanned = session.recover(what, steps_done);
    // The test hook (checkpoint_loop.hpp) fires once per process: a redone step it already
    // passed must not fire it again (a freeze that woke in time would freeze again).
    if (const TestSignal hook = TestSignal::from_environment(started_as); hook.step >= 0 && hook.step <= steps_done)
      ::unsetenv("HOLMES_TEST_SIGNAL_AFTER_STEP");
  }
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

int run_job(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  // Where the job came from (under Slurm: its job and step id), for whoever reads the log.
  if (env.rank == 0 && env.source != "single") fmt::print("launch: {}\n", launch::describe(env));
  if (env.world_size <= 1) return run_training(spec);
  runtime::Runtime rt;
  try {
    rt = runtime::start_runtime(spec, env);
    if (runtime::replans_on_loss(spec, rt.world)) return train_replanning(spec, rt);
    return train_started(spec, rt);
  } catch (const UserError&) {
    throw;
  } catch (const runtime::ElasticStop& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "holmes-train: rank %d: %s\n", env.rank, e.what());
    std::fflush(stderr);
    // Out of the job (its replica lost, or the job stopped): the store lives on in its own
    // process (store_keeper.hpp) for the replicas that go on.
    std::_Exit(1);
  } catch (const comm::CommError& e) {
    fail_rank(rt, env.rank, e.what(), e.where().peer_global, true, spec.cluster.timeout_s);
  } catch (const std::exception& e) {
    fail_rank(rt, env.rank, e.what(), -1, false, spec.cluster.timeout_s);
  }
}

}  // namespace holmes::train
