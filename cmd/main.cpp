// holmes-train: argv -> subcommand -> exit code. Exit codes: 0 ok, 2 bad config or usage,
// 1 runtime failure, 128+N after signal N.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cmd/commands.hpp"
#include "cmd/train_cmd.hpp"
#include "cmd/usage.hpp"
#include "common/errors.hpp"

namespace {

int run(int argc, char** argv) {
  CLI::App app{"holmes-train: GPT training across GPU clusters with mixed network cards.\n"
               "Without a subcommand it trains the job given by --config (or the embedded default).",
               "holmes-train"};
  app.set_version_flag("--version", "holmes-train 0.1.0");
  app.require_subcommand(0, 1);
  app.fallthrough(false);

  holmes::cmd::TrainOptions train;
  holmes::cmd::add_train_options(app, train);

  std::vector<std::pair<CLI::App*, holmes::cmd::Action>> subs;
  auto add = [&](holmes::cmd::Action (*adder)(CLI::App&)) {
    auto action = adder(app);
    subs.emplace_back(app.get_subcommands({}).back(), std::move(action));
  };
  add(holmes::cmd::add_discover);
  add(holmes::cmd::add_bench);
  add(holmes::cmd::add_export);
  add(holmes::cmd::add_eval);
  add(holmes::cmd::add_sample);
  add(holmes::cmd::add_prepare_data);
  add(holmes::cmd::add_report);
  add(holmes::cmd::add_calibrate);
  add(holmes::cmd::add_store);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with exit code 0; usage errors are reported like
    // every other user error (main below) and exit with 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    throw holmes::UsageError(holmes::cmd::describe_parse_error(app, e));
  }
  holmes::cmd::check_train_usage(app);
  for (auto& [sub, action] : subs)
    if (sub->parsed()) return action();
  return holmes::cmd::run_train(train);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const holmes::UserError& e) {
    std::fprintf(stderr, "holmes-train: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "holmes-train: fatal: %s\n", e.what());
    return 1;
  }
}
