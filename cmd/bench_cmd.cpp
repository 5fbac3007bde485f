// `holmes-train bench`: N training steps after a warm-up; ends with one summary line.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "engine/spec/load.hpp"
#include "engine/tools/bench.hpp"

namespace holmes::cmd {

Action add_bench(CLI::App& parent) {
  auto* sub = parent.add_subcommand("bench", "Time training steps and print one summary line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(20);
  auto warmup = std::make_shared<int>(2);
  auto sets = std::make_shared<std::vector<std::string>>();
  sub->add_option("-c,--config", *config, "Job spec (YAML); without it, the embedded default job")->option_text("FILE");
  add_number(*sub, "--steps", *steps, "Timed steps after the warm-up", 1);
  add_number(*sub, "--warmup", *warmup, "Untimed steps before the timed ones", 0);
  sub->add_option("--set", *sets, "Override a key of the job spec (repeatable)")->option_text("KEY=VALUE");
  return [config, steps, warmup, sets] {
    auto loaded = spec::load_job_spec(*config, *sets);
    loaded.spec.job.device = resolve_training_device(loaded.spec.job.device);
    auto r = tools::run_bench(loaded.spec, *steps, *warmup);
    fmt::print("{}\n", tools::bench_line(r));
    return 0;
  };
}

}  // namespace holmes::cmd
