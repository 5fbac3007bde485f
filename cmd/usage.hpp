// Usage errors of the command line, reported like every other user error: main prints
// "holmes-train: error: " + the command it concerns + what was seen + what is accepted, and
// exits with 2. CLI11's own parse errors are rewritten here; option combinations that CLI11
// cannot see (an option of training given with a subcommand, --format without --plan-only)
// are checked by check_train_usage (train_cmd.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace holmes::cmd {

// "holmes-train" or "holmes-train bench": the command whose options were being read.
std::string command_name(const CLI::App& command);
// The subcommand chosen on the command line, or nullptr (training).
const CLI::App* chosen_subcommand(const CLI::App& app);
// "--config, --steps, ..., --help": the options `command` accepts, in --help order.
std::string accepted_options(const CLI::App& command);
// The option as given: "--format json", "--set a=1 --set b=2", "--plan-only".
std::string option_as_given(const CLI::Option& option);

// The message (without the "holmes-train: error: " prefix) for a CLI11 parse error other
// than --help and --version.
std::string describe_parse_error(const CLI::App& app, const CLI::ParseError& e);

}  // namespace holmes::cmd
