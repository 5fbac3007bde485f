// `holmes-train calibrate`: measure the planner's inputs on this node and write a calibration
// file (engine/tools/calibrate.hpp).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "common/errors.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/launch/local_launcher.hpp"
#include "engine/spec/load.hpp"
#include "engine/tools/calibrate.hpp"

namespace holmes::cmd {

Action add_calibrate(CLI::App& parent) {
  auto* sub = parent.add_subcommand(
      "calibrate", "Measure compute by shape and collectives by size on this node's devices; write a calibration file");
  auto config = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto o = std::make_shared<tools::CalibrateOptions>();
  auto nproc = std::make_shared<int>(0);
  sub->add_option("-c,--config", *config, "Job spec (YAML) whose model is measured; without it, the embedded default job")
      ->option_text("FILE");
  sub->add_option("--set", *sets, "Override a key of the job spec (repeatable)")->option_text("KEY=VALUE");
  sub->add_option("--out", o->out, "The calibration file to write (required)")->option_text("FILE");
  add_number(*sub, "--reps", o->reps, "Timed runs of each measurement (compute: the least is kept; collectives: the median)", 1);
  sub->add_option("--tp", o->tp, "Tensor-parallel slices to time (default: every degree the search may pick here)")
      ->option_text("N...");
  sub->add_option("--micro-batches", o->micro_batches,
                  "Micro-batches to time (default: train.micro_batch, or 1, 2, 4, 8, 16 for auto)")
      ->option_text("N...");
  add_number(*sub, "--nproc-per-node", *nproc,
             "Spawn N worker processes on this machine: the collectives between them are measured too", 1, 1024);
  return [config, sets, o, nproc] {
    auto loaded = spec::load_job_spec(*config, *sets);
    loaded.spec.job.device = resolve_training_device(loaded.spec.job.device);
    if (!o->out.empty()) o->out = std::filesystem::absolute(o->out).string();
    if (*nproc > 0) {
      const auto env = launch::detect_launch_env_from_process(*nproc, loaded.spec.job.name);
      if (o->out.empty()) throw UserError("calibrate: --out FILE is required (the calibration file to write)");
      return launch::run_local_workers(env, launch::current_argv(), /*grace_s=*/10);
    }
    return tools::run_calibrate(loaded.spec, *o, launch::detect_launch_env_from_process(0, loaded.spec.job.name));
  };
}

}  // namespace holmes::cmd
