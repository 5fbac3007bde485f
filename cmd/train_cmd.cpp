#include "cmd/train_cmd.hpp"

#include <fmt/format.h>

#include "cmd/plan_cmd.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/launch/local_launcher.hpp"
#include "engine/launch/selftest.hpp"
#include "engine/spec/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/train/dist_run.hpp"
#include "engine/train/run.hpp"

namespace holmes::cmd {

void add_train_options(CLI::App& app, TrainOptions& o) {
  app.add_option("-c,--config", o.config, "Job spec (YAML). Without it, the embedded default job")
      ->option_text("FILE");
  app.add_option("--set", o.sets, "Override a key of the job spec, e.g. --set train.steps=100 (repeatable)")
      ->option_text("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_flag("--print-config", o.print_config,
               "Print the resolved job spec with the source of every value, then exit");
  app.add_flag("--plan-only", o.plan_only,
               "Print the parallel plan (placement, groups, partition, estimate) and exit");
  app.add_option("--topology", o.topology, "Topology file for --plan-only (overrides cluster.topology)")
      ->option_text("FILE");
  app.add_option("--nodes", o.nodes,
                 "Launch order of the nodes for --plan-only (hostlist; default: SLURM_JOB_NODELIST when set, "
                 "else the topology's order), as the run numbers them")
      ->option_text("HOSTLIST");
  app.add_option("--format", o.format, "Output format of --plan-only")
      ->check(CLI::IsMember({"text", "json"}));
  app.add_option("--resume", o.resume, "Resume from a checkpoint: auto, none or a checkpoint folder")
      ->option_text("auto|none|PATH");
  app.add_flag("--weights-only", o.weights_only,
               "With --resume: load the weights only (fresh optimizer, step 0; for fine-tuning)");
  app.add_option("--nproc-per-node", o.nproc_per_node, "Spawn N local worker processes on this machine")
      ->check(CLI::Range(1, 1024));
}

int run_train(const TrainOptions& o) {
  // The checkpoint flags are shorthands for spec keys, so --print-config shows them too.
  std::vector<std::string> sets = o.sets;
  if (!o.resume.empty()) sets.push_back("checkpoint.resume=" + o.resume);
  if (o.weights_only) sets.push_back("checkpoint.weights_only=true");
  if (!o.nodes.empty() && !o.plan_only)
    throw UsageError(fmt::format("--nodes '{}' is only read by --plan-only (a run takes its node order from the "
                                 "launcher)", o.nodes));
  auto loaded = spec::load_job_spec(o.config, sets);
  if (o.print_config) {
    fmt::print("{}", spec::print_resolved(loaded));
    return 0;
  }
  if (o.plan_only) return run_plan_only(loaded.spec, o.topology, o.format, o.nproc_per_node, o.nodes);
  if (o.nproc_per_node > 0) {
    const auto env = launch::detect_launch_env_from_process(o.nproc_per_node, loaded.spec.job.name);
    // The world size is known before anything is spawned: a misfit is reported once, here.
    train::check_degrees_fit(loaded.spec, env.world_size,
                             fmt::format("--nproc-per-node {} on {} node(s)", env.local_world_size, env.num_nodes));
    return launch::run_local_workers(env, launch::current_argv(), /*grace_s=*/10);
  }
  launch::maybe_run_launch_selftest();
  // A worker (or the only process): its place in the job comes from the environment.
  return train::run_job(loaded.spec, launch::detect_launch_env_from_process(0, loaded.spec.job.name));
}

}  // namespace holmes::cmd
