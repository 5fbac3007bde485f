// `holmes-train bench`: not built yet; parses its options so --help is accurate.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

Action add_bench(CLI::App& parent) {
  auto* sub = parent.add_subcommand("bench", "Time training steps and print one summary line");
  auto config = std::make_shared<std::string>();
  auto steps = std::make_shared<int>(20);
  auto sets = std::make_shared<std::vector<std::string>>();
  sub->add_option("-c,--config", *config, "Job spec (YAML)")->option_text("FILE");
  sub->add_option("--steps", *steps, "Timed steps after the warm-up")->check(CLI::PositiveNumber);
  sub->add_option("--set", *sets, "Override a key of the job spec (repeatable)")->option_text("KEY=VALUE");
  return [] { return not_available("bench"); };
}

}  // namespace holmes::cmd
