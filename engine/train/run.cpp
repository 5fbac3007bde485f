// run_training: the single-process training run (tp = pp = dp = 1) with its log, validation,
// metrics file and final weights.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "engine/spec/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/spec/schema.hpp"
#include "engine/train/metrics.hpp"
#include "engine/train/model_file.hpp"
#include "engine/train/train_log.hpp"
#include "engine/train/trainer.hpp"
#include "model/cpu/cpu_kernels.hpp"

namespace holmes::train {

namespace {

void check_single_process(const spec::JobSpec& spec) {
  const auto& p = spec.parallel;
  auto one = [](int d) { return d == 1 || d == spec::kAuto; };
  if (!one(p.tensor) || !one(p.pipeline) || !one(p.data))
    throw UserError(fmt::format("parallel: tensor={} pipeline={} data={} needs the distributed runtime, which is not "
                                "in this build yet; single-process training accepts 1 (or auto) for each",
                                p.tensor, p.pipeline, p.data));
  if (spec.job.device == "cuda")
    throw UserError("job.device: 'cuda' training is not available in this build yet (accepted now: cpu, auto)");
  if (spec.train.steps < 1)
    throw UserError(fmt::format("train.steps: {} (training needs at least 1 step)", spec.train.steps));
}

// The resolved spec beside the weights, so a user sees what produced them.
void write_spec_copy(const spec::JobSpec& spec, const std::string& path) {
  spec::LoadedSpec loaded{spec, {}};
  for (const auto& f : spec::schema()) loaded.origin[f.path] = {"training run", 0};
  std::ofstream out(path);
  out << spec::print_resolved(loaded);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the job spec copy", path));
}

}  // namespace

int run_training(const spec::JobSpec& spec) {
  check_single_process(spec);
  std::filesystem::create_directories(spec.job.output_dir);
  auto data = DataSet::open(spec);
  auto kernels = model::cpu::make_cpu_kernels();
  Trainer trainer(spec, *kernels, *data);

  double peak = spec.cluster.device_tflops * 1e3;
  std::string peak_source = "cluster.device_tflops";
  if (peak <= 0) {
    peak = measure_cpu_sgemm_gflops();
    peak_source = "measured sgemm of this CPU";
  }
  TrainLog log(spec, peak, peak_source, data->entropy_floor());
  log.header(trainer, data->description());

  const auto& t = spec.train;
  double first_loss = NAN, last_loss = NAN;
  for (int64_t step = 0; step < t.steps; ++step) {
    StepStats s = trainer.train_step(step);
    if (step == 0) first_loss = s.loss;
    last_loss = s.loss;
    log.step(s, trainer);
    const int64_t done = step + 1;
    if (t.eval_interval > 0 && (done % t.eval_interval == 0 || done == t.steps)) {
      double v = trainer.evaluate();
      if (std::isfinite(v)) log.validation(done, v);
    }
  }
  const std::string dir = spec.job.output_dir + "/final";
  save_model_weights(dir + "/model.bin", trainer.model());
  write_spec_copy(spec, dir + "/job.yaml");
  log.footer(first_loss, last_loss, dir + "/model.bin");
  return 0;
}

}  // namespace holmes::train
