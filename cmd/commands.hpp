// Subcommands of holmes-train. Each lives in its own file: it registers its options on the
// parent app and returns the action to run when it was chosen (exit code as result).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace holmes::cmd {

using Action = std::function<int()>;

Action add_discover(CLI::App& parent);
Action add_bench(CLI::App& parent);
Action add_export(CLI::App& parent);
Action add_eval(CLI::App& parent);
Action add_sample(CLI::App& parent);
Action add_prepare_data(CLI::App& parent);

}  // namespace holmes::cmd
