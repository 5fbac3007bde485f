// Subcommands of holmes-train. Each lives in its own file: it registers its options on the
// parent app and returns the action to run when it was chosen (exit code as result).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "engine/spec/choices.hpp"

namespace holmes::cmd {

using Action = std::function<int()>;

Action add_discover(CLI::App& parent);
Action add_bench(CLI::App& parent);
Action add_export(CLI::App& parent);
Action add_eval(CLI::App& parent);
Action add_sample(CLI::App& parent);
Action add_prepare_data(CLI::App& parent);
Action add_report(CLI::App& parent);
Action add_calibrate(CLI::App& parent);
Action add_store(CLI::App& parent);

// job.device as this process trains it: auto becomes cuda when this node has a GPU
// (runtime::training_device); otherwise it stays as given (auto then trains on the CPU, and
// make_training_backend says why).
spec::Device resolve_training_device(spec::Device device);

}  // namespace holmes::cmd
