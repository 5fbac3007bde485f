// The training loop every rank runs (run_loop: resume, log, validation, metrics file,
// checkpoints, preemption, final weights) and the single-process entry run_training
// (tp = pp = dp = 1).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "engine/plan/plan.hpp"
#include "engine/plan/rank_plan.hpp"
#include "engine/spec/run_paths.hpp"
#include "engine/launch/signals.hpp"
#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/topo/cpu_peak.hpp"
#include "engine/topo/gpu_peaks.hpp"
#include "engine/topo/discover.hpp"
#include "engine/train/checkpoint_loop.hpp"
#include "engine/train/job_figures.hpp"
#include "engine/train/run_tokenizer.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/replan_restart.hpp"
#include "engine/checkpoint/model_file.hpp"
#include "engine/train/train_log.hpp"
#include "engine/train/run.hpp"
#include "engine/parallel/trainer.hpp"
#include "backends/backends.hpp"

namespace holmes::train {

namespace {

// Returns the plan of the one worker (its recompute choice is the trainer's).
plan::Plan check_single_process(const spec::JobSpec& spec) {
  plan::check_degrees_fit(spec, 1, "a single process; start more with --nproc-per-node N, srun or RANK/WORLD_SIZE");
  runtime::training_device(spec.job.device);
  runtime::check_precision_device(spec);
  if (spec.train.steps < 1)
    throw UserError(fmt::format("train.steps: {} (training needs at least 1 step)", spec.train.steps));
  plan::Plan plan = single_process_plan(spec);
  if (!spec.cluster.calibrate.empty())
    throw UserError(fmt::format("cluster.calibrate: '{}': a calibration measures the links between the workers of a "
                                "multi-process job; start one with --nproc-per-node N, srun or RANK/WORLD_SIZE",
                                spec.cluster.calibrate));
  return plan;
}

// The resolved spec beside the weights, so a user sees what produced them.
void write_spec_copy(const spec::JobSpec& spec, const std::string& path) {
  std::ofstream out(path);
  out << spec::resolved_spec_text(spec);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the job spec copy", path));
}

// The plan the run runs under, as --plan-only --format json prints it, for `holmes-train
// report` (written again by a resumed run: the plan it continues under).
void write_plan_json(const spec::JobSpec& spec, const std::string& json) {
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  std::filesystem::create_directories(paths.output_dir);
  const std::string tmp = paths.plan + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json;
    if (!out) throw std::runtime_error(fmt::format("{}: cannot write the plan", tmp));
  }
  std::filesystem::rename(tmp, paths.plan);
}

// Rank 0's log into `log`; a resumed run continues metrics.jsonl.
void open_log(std::optional<TrainLog>& log, const spec::JobSpec& spec, const parallel::StepRunner& trainer,
              const data::DataSet& data, int64_t start, const LoopContext& ctx) {
  const auto [peak, peak_source] = job_peak_gflops(spec, ctx);
  std::filesystem::create_directories(spec.job.output_dir);
  if (start > 0) trim_metrics_for_resume(spec, start);
  log.emplace(spec, peak, peak_source, data.entropy_floor(), /*append_metrics=*/start > 0);
  log->header(trainer, data.description());
  if (ctx.world > 1) log->watch_stragglers(ctx.ranks, start);
}

// A whole model on one rank also goes to final/model.bin for `holmes-train sample`.
bool writes_final_weights(const model::GptConfig& cfg) {
  return cfg.tp_size == 1 && cfg.has_embedding && cfg.has_head && cfg.first_layer == 0 &&
         cfg.num_stage_layers() == cfg.layers;
}

// What write_final_weights writes (rank 0): model.bin and the spec copy; 0 when nothing.
uint64_t final_weights_bytes(const spec::JobSpec& spec, parallel::StepRunner& trainer) {
  const auto& cfg = trainer.shard_config();
  if (!writes_final_weights(cfg)) return 0;
  return checkpoint::model_weights_bytes(cfg, trainer.shard_shapes().at(0).layout->size()) +
         spec::resolved_spec_text(spec).size();
}

// Returns what the footer names.
std::string write_final_weights(const spec::JobSpec& spec, parallel::StepRunner& trainer, bool logger) {
  const auto& cfg = trainer.shard_config();
  if (!writes_final_weights(cfg))
    return fmt::format("the checkpoints in {} (sharded over the ranks; sample, eval and export read them)",
                       spec::RunPaths::of(spec).checkpoints);
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  if (logger) {
    checkpoint::ShardState st = trainer.shard_state();
    checkpoint::save_model_weights(paths.final_model, cfg, st.params, st.layout->size());
    write_spec_copy(spec, paths.final_spec);
  }
  return paths.final_model;
}

}  // namespace

std::pair<double, std::string> job_peak_gflops(const spec::JobSpec& spec, const LoopContext& ctx) {
  if (spec.cluster.device_tflops > 0)
    return {spec.cluster.device_tflops * 1e3 * ctx.world,
            fmt::format("cluster.device_tflops {:g} x {} device(s)", spec.cluster.device_tflops, ctx.world)};
  if (spec.job.device == spec::Device::kCuda) {
    // The data sheet's dense bf16 figure: an upper bound for the fp32 kernels too.
    const topo::Devices gpu = runtime::local_devices();
    const double tflops = topo::known_peak_tflops(gpu.name);
    if (tflops <= 0) return {0, fmt::format("unknown: {} is not in the peak table; set cluster.device_tflops", gpu.name)};
    return {tflops * 1e3 * ctx.world,
            fmt::format("{} x {} dense bf16 peak {:g} TFLOP/s (data sheet)", ctx.world, gpu.name, tflops)};
  }
  const topo::CpuPeak cpu = topo::cpu_peak();
  const int cores = topo::detect_cpu_devices().cores;
  return {cpu.gflops_per_core() * cores * ctx.nodes,
          fmt::format("{} core(s) x {} node(s) x {}", cores, ctx.nodes, cpu.describe())};
}

constexpr size_t kUnloggedKept = 4096;  // steps a rank keeps for take_over_log while it does not lead

// A step's row not written yet, with what its writing needs.
struct HeldRow {
  parallel::StepStats s;
  bool line = false;  // a log step: printed as well
  std::optional<JobMaxima> job;
};

// parallel.elastic with replicas: this rank leads the job from step `done` on, the rank that led
// it lost with its replica. It sets aside the rows after step done - 1 that the lost leader wrote
// (it may have logged steps its replica trained alone), writes the rows of its own steps that
// nobody logged (`unlogged`, kept while it did not lead) after the last row the file holds, and
// continues metrics.jsonl from row `done`. The writer lock is taken where it is free (the lost
// leader's process ended); a dropped leader that still lives (frozen, cut off) holds it until
// it stops, writing no row meanwhile (LoopContext::unsettled): then take_lock tries again.
void take_over_log(std::optional<TrainLog>& log, const spec::JobSpec& spec, const parallel::StepRunner& trainer,
                   const data::DataSet& data, int64_t done, const LoopContext& ctx,
                   std::deque<HeldRow>& unlogged) {
  const spec::RunPaths paths = spec::RunPaths::of(spec);
  const int64_t moved = set_aside_rows(paths.metrics, done - 1, discarded_metrics_path(spec), "set_aside_at_step", done);
  const auto [peak, peak_source] = job_peak_gflops(spec, ctx);
  log.emplace(spec, peak, peak_source, data.entropy_floor(), /*append_metrics=*/true);
  if (ctx.world > 1) log->watch_stragglers(ctx.ranks, done - 1);
  const int64_t last = last_row_step(paths.metrics);
  int64_t filled = 0;
  for (const HeldRow& u : unlogged)
    if (u.s.step + 1 > last && u.s.step + 1 < done) log->step(u.s, trainer, u.line, u.job), ++filled;
  unlogged.clear();
  const int64_t gap = done - 1 - last - filled;
  fmt::print("rank {}: leads the job from step {} (the lowest rank training now): the log, {}, the checkpoint "
             "manifests and the final weights are written here{}{}{}\n", ctx.rank, done, paths.metrics,
             moved > 0 ? fmt::format("; the previous leader's {} row(s) after step {} moved to {}", moved, done - 1,
                                     discarded_metrics_path(spec))
                       : "",
             filled > 0 ? fmt::format("; rows {}-{} written from this rank's steps", last + 1, last + filled) : "",
             gap > 0 ? fmt::format("; {} row(s) before step {} are missing (no rank kept them)", gap, done) : "");
  std::fflush(stdout);
}

// The writer lock for a rank that took over the log: true once held. Says once when the lost
// leader's process still holds it.
bool take_lock(OutputClaim& output, const spec::JobSpec& spec, const LoopContext& ctx, bool& told) {
  try {
    output.lock = checkpoint::WriterLock::take(spec.job.output_dir, spec.job.name);
    return true;
  } catch (const UserError& e) {
    if (!told)
      fmt::print("rank {}: the writer lock is still held by the previous leader ({}); this rank writes the log "
                 "meanwhile and takes the lock once it is free\n", ctx.rank, e.what());
    told = true;
    return false;
  }
}

int run_loop(const spec::JobSpec& spec, parallel::StepRunner& trainer, const data::DataSet& data, const LoopContext& ctx) {
  const bool logger = ctx.leading();  // at the start (elastic: the leader may change, take_over_log)
  launch::install_stop_signal_handlers();
  // Before the log opens its files: a bad checkpoint, an unwritable folder, another run in
  // job.output_dir, a live process writing it or a checkpoint trained on another tokenizer's
  // data stops the job with nothing overwritten.
  // And a file system too small for one checkpoint and the final weights (the run would lose
  // its training at the first save); priced on every rank from its own shard.
  const bool joined = ctx.joined_at >= 0;  // elastic: a rank that rejoined (loop_context.hpp)
  const checkpoint::SpaceNeed space = joined ? checkpoint::SpaceNeed{} : checkpoint_space_need(
      spec, trainer, ctx, run_tokenizer_of(data), logger ? final_weights_bytes(spec, trainer) : 0);
  OutputClaim output = claim_output(  // the leader holds the writer lock (elastic: take_lock)
      spec, ctx, [&](const ResumePoint& resume) {
        check_resume_tokenizer(resume.checkpoint, data);
        check_space(spec, space, resume, logger);
      });
  if (logger && !joined) keep_run_tokenizer(spec, data);
  ResumePoint resume = output.resume;
  if (ctx.peer_source && !joined) {
    // A re-planned generation: the survivors' peer copies when they are at least as new.
    if (auto peers = ctx.peer_source(resume.checkpoint ? resume.checkpoint->step : -1)) {
      resume.checkpoint = std::move(peers->info);
      resume.fetch = std::move(peers->fetch);
      resume.via.clear();
      resume.skipped.clear();
    }
  }
  const int64_t start = joined ? ctx.joined_at : load_resume_point(spec, resume, trainer, ctx);
  if (!joined) load_init_from(spec, resume, trainer, ctx);
  CheckpointSaver saver(spec, ctx, output.run_id, run_tokenizer_of(data));
  std::optional<TrainLog> log;
  // A rank that rejoined and leads (a rejoining replica 0) takes the log over at its first step.
  if (logger && !joined) open_log(log, spec, trainer, data, start, ctx);
  // After the checkpoint loaded: a refused resume leaves the folder as it was.
  if (logger && !joined && !ctx.plan_json.empty()) write_plan_json(spec, ctx.plan_json);

  const auto& t = spec.train;
  const TestSignal test_signal = TestSignal::from_environment(ctx.hook_rank >= 0 ? ctx.hook_rank : ctx.rank);
  const int interval = std::max(1, spec.log.interval);
  double first_loss = NAN, last_loss = NAN, comm_ms = 0, total_ms = 0;
  std::string first_label;
  parallel::OuterTimes outer;  // this rank's outer syncs (diloco), summed for its last line
  // Where this rank's steps after the first went (StepStats' phases), summed for its last line.
  double phase_ms[6] = {0, 0, 0, 0, 0, 0};  // StepStats pipeline, grad sync, job sums, update, passes, pipeline wait
  int64_t phase_steps = 0;
  // The job-wide figures (largest memory and communication share, each rank's share and
  // compute for the straggler check, the stop signal's number) are reduced over the world
  // group, which crosses the slow links, on log steps only, and never every step in the steps' way:
  // - without diloco, in the background (figures.later: a log line shows the figures of the
  //   steps up to the previous log line, reduced while this step trained): a blocking
  //   reduction after every log step costs each step the ring's hops through ranks held by
  //   their CPU quota or queued behind the step's own Ethernet traffic, outside step_ms;
  // - with diloco, blocking, but only on the first log line of each outer period (one
  //   reduction per inner_steps steps at most; periods counted from the steps where an
  //   exchange lands, outer_overlap steps after it was sent, where the replicas meet anyway
  //   and the slow link is free of it): a reduction on every line made each replica wait for
  //   the slowest over the slow links; the lines between carry rank 0's own figures;
  // - blocking on the first and the last line and when stopping (the signal's number).
  const bool diloco = spec.parallel.diloco();
  FigureExchange figures(ctx.rank, ctx.world, ctx.max_over_ranks, diloco ? nullptr : ctx.start_max_over_ranks,
                         ctx.abort_max_over_ranks);
  const int64_t period = diloco ? std::max(1, spec.parallel.inner_steps) : 1;
  const int64_t lands = diloco ? spec.parallel.outer_overlap : 0;
  auto period_of = [&](int64_t done) { return (done - lands) / period; };
  // The period of the last reduction; a rank that rejoined takes the one the others have
  // (their last log step up to `start` reduced, the first of its period).
  int64_t reduced_in = joined ? period_of(start - start % interval) : std::numeric_limits<int64_t>::min();
  // A step's agreed stats, in step order: its log line and metrics row; returns the reduced
  // figures when they were reduced now (always when stopping).
  bool lock_told = false, lock_wanted = false;  // take_lock: said it is held; not held yet
  std::deque<HeldRow> unlogged;  // elastic: rows held (unsettled), or this rank's latest steps (not leading)
  auto write_held = [&] {  // the leader's held rows, in step order
    for (const HeldRow& u : unlogged) log->step(u.s, trainer, u.line, u.job);
    unlogged.clear();
  };
  auto report = [&](const parallel::StepStats& s, bool stopping) {
    const int64_t done = s.step + 1;
    if (s.step == start) first_loss = s.loss, first_label = loss_label(s);
    last_loss = s.loss;
    figures.note(rss_mb(), s.step_ms, s.comm_ms, s.compute_ms);
    const bool first = done == start + 1 && !joined;  // the others' first line came long before
    const bool log_step = first || done % interval == 0 || done == t.steps;
    const bool edge = stopping || (log_step && (first || done == t.steps));
    std::vector<double> job;
    std::optional<JobMaxima> maxima;
    if (edge || (log_step && !figures.background() && period_of(done) > reduced_in)) {
      job = figures.now(launch::stop_signal());
      reduced_in = period_of(done);
      maxima = maxima_of(job, done);
    } else if (log_step && figures.background()) {
      maxima = figures.later(done);
    }
    // Elastic: rows wait while a failure is unresolved (the leader may be the one lost); a rank
    // that comes to lead takes the log over.
    const bool hold = ctx.unsettled && ctx.unsettled();
    if (!hold && log && ctx.leads && !ctx.leading()) {
      // A lower rank rejoined: it leads from this step (take_over_log there), this rank hands the
      // log and the writer lock over.
      write_held();
      log.reset();
      output.lock = checkpoint::WriterLock{};
      lock_wanted = false;
      fmt::print("rank {}: a lower rank rejoined and leads the job from step {}: the log and metrics continue "
                 "there\n", ctx.rank, done);
    }
    if (!hold && !log && ctx.leads && ctx.leading()) {
      take_over_log(log, spec, trainer, data, done, ctx, unlogged);
      lock_wanted = true;
    }
    if (lock_wanted && take_lock(output, spec, ctx, lock_told)) lock_wanted = false;
    if (log && !hold) {
      write_held();
      log->step(s, trainer, log_step || stopping, maxima);
    } else if (ctx.leads) {
      // Kept in case this rank comes to lead before the leader logged them (take_over_log).
      unlogged.push_back({s, log_step || stopping, maxima});
      if (unlogged.size() > kUnloggedKept) unlogged.pop_front();
    }
    return job;
  };
  std::optional<std::chrono::steady_clock::time_point> last_end;  // of the previous step (between_ms)
  for (int64_t step = start; step < t.steps; ++step) {
    const int64_t done = step + 1;
    test_signal.raise_if(done, /*before_sums=*/true);
    const auto step_start = std::chrono::steady_clock::now();
    // A stop signal rides the step's own job-wide sums. With diloco replicas their sum across
    // the replicas runs only where the replicas meet anyway (Agreement::kAtSyncs: before each
    // outer exchange, and below), so every rank learns of it at the same step, at most one
    // outer period (inner_steps / fragments steps) later; otherwise at this step.
    parallel::StepStats s = trainer.train_step(step, launch::stop_requested(), parallel::Agreement::kAtSyncs);
    if (last_end) s.between_ms = std::chrono::duration<double, std::milli>(step_start - *last_end).count();
    last_end = std::chrono::steady_clock::now();
    comm_ms += s.comm_ms;
    total_ms += s.step_ms;
    if (step > start) {
      const double got[6] = {s.pipeline_ms, s.grad_sync_ms, s.job_sum_ms, s.update_ms, s.passes_ms, s.pipeline_wait_ms};
      for (int i = 0; i < 6; ++i) phase_ms[i] += got[i];
      ++phase_steps;
    }
    outer += s.outer;
    const bool validating = t.eval_interval > 0 && (done % t.eval_interval == 0 || done == t.steps);
    // A step whose loss and stop flags are its replica's alone gets the job's where the run
    // needs them and the replicas meet anyway: its last step, a validation (its row before the
    // validation line), a checkpoint (every rank commits it together; no checkpoint holds a
    // replica whose loss went non-finite unnoticed); the same steps on every rank.
    if (!s.agreed && (done == t.steps || validating || saver.due(done))) trainer.agree(s);
    // Every rank stops after this same step; after the last one the run simply ends.
    const bool stopping = s.agreed && s.stop_ranks > 0 && done < t.steps;
    saver.after_step(trainer, done, /*last=*/stopping || done == t.steps);
    test_signal.raise_if(done, /*before_sums=*/false);
    const std::vector<double> job = report(s, stopping);
    if (ctx.on_step_done) ctx.on_step_done(done);
    if (validating) {
      double v = trainer.evaluate();
      if (log && std::isfinite(v)) log->validation(done, v, trainer.source_losses());
    }
    if (stopping) {
      const int sig = static_cast<int>(job[2]);
      saver.save(trainer, done);
      if (ctx.leading())
        fmt::print("stopped by signal {} after step {} of {}; resubmit with --resume auto to continue\n", sig, done,
                   t.steps);
      return 128 + sig;
    }
  }
  if (start < t.steps) saver.save(trainer, t.steps);
  if (ctx.world > 1)
    fmt::print("rank {}: {:.1f} s in steps, of which {:.1f} s ({:.0f}%) waiting on communication\n", ctx.rank,
               total_ms / 1e3, comm_ms / 1e3, total_ms > 0 ? 100.0 * comm_ms / total_ms : 0.0);
  if (ctx.world > 1 && phase_steps > 0) {
    const double n = static_cast<double>(phase_steps);
    fmt::print("rank {}: a step after the first, mean ms: pipeline {:.1f} (passes {:.1f}, waiting for neighbouring "
               "stages {:.1f}), gradient sync wait {:.1f}, job sums {:.1f}, optimizer {:.1f}\n", ctx.rank, phase_ms[0] / n,
               phase_ms[4] / n, phase_ms[5] / n, phase_ms[1] / n, phase_ms[2] / n, phase_ms[3] / n);
  }
  if (outer.syncs > 0)
    fmt::print("rank {}: {} outer sync(s), in all {}\n", ctx.rank, outer.syncs, outer.describe());
  if (trainer.replica_agreements() > 0)
    fmt::print("rank {}: {} sum(s) of the loss and stop flags across the replicas in {} step(s)\n", ctx.rank,
               trainer.replica_agreements(), t.steps - start);
  const std::string weights = write_final_weights(spec, trainer, ctx.leading());
  if (log) {
    write_held();
    log->footer(first_loss, last_loss, weights, first_label);
  }
  return 0;
}

plan::Plan single_process_plan(const spec::JobSpec& spec) {
  return runtime::plan_local_job(
      spec, spec.job.device == spec::Device::kCuda ? runtime::local_devices() : topo::detect_cpu_devices(), 1);
}

model::Backend make_training_backend(const spec::JobSpec& spec, int local_rank) {
  std::string note;
  const backends::Device device = runtime::training_device(spec.job.device, &note);
  if (!note.empty() && local_rank <= 0) {
    fmt::print("holmes-train: {}\n", note);
    std::fflush(stdout);
  }
  return backends::make_backend(device, local_rank);
}

int run_training(const spec::JobSpec& spec) {
  const plan::Plan plan = check_single_process(spec);
  auto data = data::DataSet::open(spec);
  model::Backend backend = make_training_backend(spec);
  parallel::Trainer trainer(spec, plan::rank_plan(plan, 0), backend, *data);
  LoopContext ctx;
  ctx.plan_json = plan::format_plan_json(plan);
  return run_loop(spec, trainer, *data, ctx);
}

}  // namespace holmes::train
