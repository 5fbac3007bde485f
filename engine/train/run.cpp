// The training loop every rank runs (run_loop: resume, log, validation, metrics file,
// checkpoints, preemption, final weights) and the single-process entry run_training
// (tp = pp = dp = 1).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "engine/launch/signals.hpp"
#include "engine/spec/errors.hpp"
#include "engine/train/checkpoint_loop.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/model_file.hpp"
#include "engine/train/train_log.hpp"
#include "engine/train/run.hpp"
#include "engine/train/trainer.hpp"
#include "model/cpu/cpu_kernels.hpp"

namespace holmes::train {

namespace {

void check_single_process(const spec::JobSpec& spec) {
  check_degrees_fit(spec, 1, "a single process; start more with --nproc-per-node N, srun or RANK/WORLD_SIZE");
  if (spec.job.device == "cuda")
    throw UserError("job.device: 'cuda' training is not available in this build yet (accepted now: cpu, auto)");
  if (spec.train.steps < 1)
    throw UserError(fmt::format("train.steps: {} (training needs at least 1 step)", spec.train.steps));
  if (!spec.cluster.calibrate.empty())
    throw UserError(fmt::format("cluster.calibrate: '{}': a calibration measures the links between the workers of a "
                                "multi-process job; start one with --nproc-per-node N, srun or RANK/WORLD_SIZE",
                                spec.cluster.calibrate));
}

// The resolved spec beside the weights, so a user sees what produced them.
void write_spec_copy(const spec::JobSpec& spec, const std::string& path) {
  std::ofstream out(path);
  out << resolved_spec_text(spec);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the job spec copy", path));
}

// Rank 0's log into `log`; a resumed run continues metrics.jsonl.
void open_log(std::optional<TrainLog>& log, const spec::JobSpec& spec, const StepRunner& trainer,
              const DataSet& data, int64_t start) {
  double peak = spec.cluster.device_tflops * 1e3;
  std::string peak_source = "cluster.device_tflops";
  if (peak <= 0) {
    peak = measure_cpu_sgemm_gflops();
    peak_source = "measured sgemm of this CPU";
  }
  std::filesystem::create_directories(spec.job.output_dir);
  if (start > 0) trim_metrics_for_resume(spec, start);
  log.emplace(spec, peak, peak_source, data.entropy_floor(), /*append_metrics=*/start > 0);
  log->header(trainer, data.description());
}

// A whole model on one rank also goes to final/model.bin for `holmes-train sample`. Returns
// what the footer names.
std::string write_final_weights(const spec::JobSpec& spec, StepRunner& trainer, bool logger) {
  const auto& cfg = trainer.shard_config();
  const bool whole = cfg.tp_size == 1 && cfg.has_embedding && cfg.has_head && cfg.first_layer == 0 &&
                     cfg.num_stage_layers() == cfg.layers;
  if (!whole)
    return fmt::format("the checkpoints in {} (sharded over the ranks; sample, eval and export read them)",
                       spec.checkpoint_dir());
  const std::string dir = spec.job.output_dir + "/final";
  if (logger) {
    ShardState st = trainer.shard_state();
    save_model_weights(dir + "/model.bin", cfg, st.params, st.layout->size());
    write_spec_copy(spec, dir + "/job.yaml");
  }
  return dir + "/model.bin";
}

}  // namespace

void check_degrees_fit(const spec::JobSpec& spec, int world, const std::string& launched) {
  const auto& p = spec.parallel;
  int fixed = 1;
  bool any_auto = false;
  for (int d : {p.tensor, p.pipeline, p.data}) {
    if (d == spec::kAuto) any_auto = true;
    else fixed *= d;
  }
  if (any_auto ? world % fixed == 0 : world == fixed) return;
  auto text = [](int d) { return d == spec::kAuto ? std::string("auto") : std::to_string(d); };
  throw UserError(fmt::format("parallel.tensor x parallel.pipeline x parallel.data = {} x {} x {} cannot make the "
                              "job's {} workers ({}); the product of the explicit degrees must {} {}",
                              text(p.tensor), text(p.pipeline), text(p.data), world, launched,
                              any_auto ? "divide" : "equal", world));
}

int run_loop(const spec::JobSpec& spec, StepRunner& trainer, const DataSet& data, const LoopContext& ctx) {
  const bool logger = ctx.rank == 0;
  launch::install_stop_signal_handlers();
  // Before the log opens its files: a bad checkpoint stops the job with nothing overwritten.
  const int64_t start = resume_from_checkpoint(spec, trainer, ctx);
  CheckpointSaver saver(spec, ctx);
  auto max_over_ranks = [&](double v) { return ctx.max_over_ranks ? ctx.max_over_ranks(v) : v; };
  std::optional<TrainLog> log;
  if (logger) open_log(log, spec, trainer, data, start);

  const auto& t = spec.train;
  double first_loss = NAN, last_loss = NAN, comm_ms = 0, total_ms = 0;
  for (int64_t step = start; step < t.steps; ++step) {
    StepStats s = trainer.train_step(step);
    if (step == start) first_loss = s.loss;
    last_loss = s.loss;
    comm_ms += s.comm_ms;
    total_ms += s.step_ms;
    const double rss = max_over_ranks(rss_mb());  // collectives: every rank, every step
    s.comm_ms_max = max_over_ranks(s.comm_ms);
    if (log) log->step(s, trainer, rss);
    const int64_t done = step + 1;
    if (t.eval_interval > 0 && (done % t.eval_interval == 0 || done == t.steps)) {
      double v = trainer.evaluate();
      if (log && std::isfinite(v)) log->validation(done, v);
    }
    saver.after_step(trainer, done);
    maybe_raise_test_signal(ctx, done);
    // Every rank stops after this same step; after the last one the run simply ends.
    if (const int sig = agreed_stop_signal(ctx); sig != 0 && done < t.steps) {
      saver.save(trainer, done);
      if (logger)
        fmt::print("stopped by signal {} after step {} of {}; resubmit with --resume auto to continue\n", sig, done,
                   t.steps);
      return 128 + sig;
    }
  }
  if (start < t.steps) saver.save(trainer, t.steps);
  if (ctx.world > 1)
    fmt::print("rank {}: {:.1f} s in steps, of which {:.1f} s ({:.0f}%) waiting on communication\n", ctx.rank,
               total_ms / 1e3, comm_ms / 1e3, total_ms > 0 ? 100.0 * comm_ms / total_ms : 0.0);
  const std::string weights = write_final_weights(spec, trainer, logger);
  if (log) log->footer(first_loss, last_loss, weights);
  return 0;
}

int run_training(const spec::JobSpec& spec) {
  check_single_process(spec);
  std::filesystem::create_directories(spec.job.output_dir);
  auto data = DataSet::open(spec);
  auto kernels = model::cpu::make_cpu_kernels();
  Trainer trainer(spec, *kernels, *data);
  return run_loop(spec, trainer, *data, LoopContext{});
}

}  // namespace holmes::train
