// The default command: train (or print / plan) the job given by --config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace holmes::cmd {

struct TrainOptions {
  std::string config;             // "" = embedded default job
  std::vector<std::string> sets;  // --set key.path=value
  bool print_config = false;
  bool plan_only = false;
  std::string topology;           // --topology FILE (sets cluster.topology)
  std::string nodes;              // --nodes HOSTLIST (launch order for --plan-only)
  std::string format = "text";    // --format for --plan-only
  std::string resume;             // auto | none | PATH; "" = checkpoint.resume of the spec
  bool weights_only = false;      // load weights only (fine-tuning)
  std::string init_from;          // --init-from HF_DIR (checkpoint.init_from)
  bool overwrite = false;         // job.overwrite: replace another run in job.output_dir
  int nproc_per_node = 0;         // local launcher; 0 = not the local launcher
  int max_restarts = 0;           // local launcher of an elastic job: restarts per worker
};

void add_train_options(CLI::App& app, TrainOptions& opts);
// Throws UsageError (exit 2) for options of training that would have no effect: any given
// with a subcommand, --format without --plan-only, --nproc-per-node with --print-config,
// and --print-config together with --plan-only.
void check_train_usage(const CLI::App& app);
int run_train(const TrainOptions& opts);

}  // namespace holmes::cmd
