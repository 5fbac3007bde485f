#include "cmd/train_cmd.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "cmd/plan_cmd.hpp"
#include "cmd/usage.hpp"
#include "comm/tcp_store.hpp"
#include "engine/launch/launch_env.hpp"
#include "engine/launch/local_launcher.hpp"
#include "engine/launch/selftest.hpp"
#include "engine/launch/signals.hpp"
#include "engine/plan/plan.hpp"
#include "common/errors.hpp"
#include "engine/spec/load.hpp"
#include "engine/topo/discover.hpp"
#include "engine/train/checkpoint_loop.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/train/dist_run.hpp"
#include "engine/runtime/replan.hpp"
#include "engine/train/run.hpp"
#include "backends/backends.hpp"

namespace holmes::cmd {

namespace {

// The local launcher of an elastic job on one node serves the TCP store at MASTER_PORT itself
// (workers read HOLMES_STORE_HOSTED=1 and all connect), so that the store, the arbiter of who
// goes on, does not die with rank 0's process. Null where it does not: an explicit
// cluster.rendezvous (a file:// store survives any worker), or a launcher of one node among
// several (rank 0 hosts as usual; docs/elastic.md).
std::unique_ptr<comm::TcpStoreServer> host_elastic_store(const spec::JobSpec& spec, launch::LaunchEnv& env) {
  if (!spec.cluster.rendezvous_is_auto() || env.num_nodes > 1) return nullptr;
  if (env.master_port <= 0) env.master_port = launch::pick_free_port(env.master_addr);
  if (env.job_token.empty()) env.job_token = launch::random_job_token();
  auto server = std::make_unique<comm::TcpStoreServer>(static_cast<uint16_t>(env.master_port), env.job_token);
  ::setenv("HOLMES_STORE_HOSTED", "1", 1);
  return server;
}

}  // namespace

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
  app.add_option("--topology", o.topology, "Topology file (sets cluster.topology): overlaid on discovery by runs and "
                 "--plan-only alike")
      ->option_text("FILE");
  app.add_option("--nodes", o.nodes,
                 "Launch order of the nodes for --plan-only (hostlist; default: SLURM_JOB_NODELIST when set, "
                 "else the topology's order), as the run numbers them")
      ->option_text("HOSTLIST");
  app.add_option("--format", o.format, "Output format of --plan-only")
      ->check(one_of({"text", "json", "html"}));
  app.add_option("--resume", o.resume, "Resume from a checkpoint: auto, none or a checkpoint folder")
      ->option_text("auto|none|PATH");
  app.add_flag("--overwrite", o.overwrite,
               "Start fresh even when job.output_dir holds another run: delete its checkpoints, final weights and "
               "metrics first (job.overwrite)");
  app.add_flag("--weights-only", o.weights_only,
               "With --resume: load the weights only (fresh optimizer, step 0; for fine-tuning)");
  app.add_option("--init-from", o.init_from,
                 "Start a fresh run from a Hugging Face checkpoint folder (config.json + safetensors; GPT-2 or "
                 "Llama) whose config matches the job's model (checkpoint.init_from)")
      ->option_text("HF_DIR");
  add_number(app, "--nproc-per-node", o.nproc_per_node, "Spawn N local worker processes on this machine", 1, 1024);
}

namespace {

// What would stop every worker is found before any is spawned, and said once: degrees that
// cannot make the world, more workers than the node holds, a plan that does not fit (one
// node: the whole plan), a missing topology file, unwritable folders, another run in
// job.output_dir.
void check_before_spawning(const spec::JobSpec& spec, const launch::LaunchEnv& env) {
  plan::check_degrees_fit(spec, env.world_size,
                           fmt::format("--nproc-per-node {} on {} node(s)", env.local_world_size, env.num_nodes));
  // Workers train on the CPU or (job.device cuda) on this node's GPUs, as start-up discovers them.
  runtime::check_worker_device(spec);
  const topo::Devices devices = spec.job.device == spec::Device::kCuda ? runtime::local_devices() : topo::detect_cpu_devices();
  if (env.num_nodes == 1) {
    runtime::check_replan_nodes(spec, 1, env.world_size);
    runtime::plan_local_job(spec, devices, env.local_world_size);
  } else {
    runtime::check_node_capacity(devices, env.local_world_size, fmt::format("--nproc-per-node {}", env.local_world_size));
    runtime::load_spec_topology(spec);
  }
  train::check_outputs(spec, env.node_rank == 0);
}

// Where each option of training has an effect: a training run, --plan-only, --print-config.
// The spec shorthands (--resume, --weights-only, --overwrite, --topology) count everywhere the
// spec is read.
struct OptionScope {
  const char* name;
  bool train, plan, print;
};
constexpr OptionScope kScopes[] = {
    {"--config", true, true, true},       {"--set", true, true, true},      {"--resume", true, true, true},
    {"--weights-only", true, true, true}, {"--overwrite", true, true, true}, {"--topology", true, true, true},
    {"--init-from", true, true, true},
    {"--format", false, true, false},     {"--nproc-per-node", true, true, false}, {"--nodes", false, true, false},
};

std::string where_accepted(const OptionScope& s) {
  std::vector<std::string> modes;
  if (s.train) modes.push_back("training runs");
  if (s.plan) modes.push_back("--plan-only");
  if (s.print) modes.push_back("--print-config");
  return fmt::format("{}", fmt::join(modes, " and "));
}

}  // namespace

void check_train_usage(const CLI::App& app) {
  auto given = [&](const char* name) { return app.get_option(name)->count() > 0; };
  if (const CLI::App* sub = chosen_subcommand(app)) {
    for (const CLI::Option* o : app.get_options()) {
      if (o->count() == 0 || o->get_lnames().empty()) continue;
      const std::string seen = option_as_given(*o);
      std::string msg = fmt::format("{} is an option of holmes-train without a subcommand and has no effect on '{}'",
                                    seen, sub->get_name());
      if (sub->get_option_no_throw(o->get_name()) != nullptr)
        msg += fmt::format("; give it after the subcommand: holmes-train {} {}", sub->get_name(), seen);
      else
        msg += fmt::format("; accepted options of '{}': {}", command_name(*sub), accepted_options(*sub));
      throw UsageError(msg);
    }
    return;
  }
  const bool plan = given("--plan-only"), print = given("--print-config");
  if (plan && print)
    throw UsageError("--print-config and --plan-only were both given; accepted: one of them (--print-config prints "
                     "the resolved job spec, --plan-only the parallel plan)");
  const char* mode = plan ? "--plan-only" : print ? "--print-config" : "a training run";
  for (const auto& s : kScopes) {
    if (!given(s.name) || (plan ? s.plan : print ? s.print : s.train)) continue;
    throw UsageError(fmt::format("{} has no effect on {}; accepted only with {}",
                                 option_as_given(*app.get_option(s.name)), mode, where_accepted(s)));
  }
}

spec::Device resolve_training_device(spec::Device device) {
  // auto that falls back stays auto: the backend says why once the job has been accepted.
  if (device != spec::Device::kAuto) return device;  // checked where the job starts (NCCL_NET first)
  return runtime::training_device(device) == backends::Device::kCuda ? spec::Device::kCuda : device;
}

int run_train(const TrainOptions& o) {
  // The checkpoint, output and topology flags are shorthands for spec keys, so --print-config
  // shows them too, and messages and --print-config name the flag as the origin of the value.
  std::vector<spec::FlagOverride> flags;
  if (!o.resume.empty()) flags.push_back({"--resume", "checkpoint.resume=" + o.resume});
  if (o.weights_only) flags.push_back({"--weights-only", "checkpoint.weights_only=true"});
  if (!o.init_from.empty()) flags.push_back({"--init-from", "checkpoint.init_from=" + o.init_from});
  if (o.overwrite) flags.push_back({"--overwrite", "job.overwrite=true"});
  // Relative to where the user typed it, not to the spec file's folder.
  if (!o.topology.empty())
    flags.push_back({"--topology", "cluster.topology=" + std::filesystem::absolute(o.topology).string()});
  auto loaded = spec::load_job_spec(o.config, o.sets, flags);
  if (o.print_config) {
    fmt::print("{}", spec::print_resolved(loaded));
    return 0;
  }
  if (o.plan_only) return run_plan_only(loaded.spec, o.format, o.nproc_per_node, o.nodes);
  // job.device auto becomes cuda or cpu here, for this machine (a plan for other machines,
  // above, reads the topology's devices instead).
  loaded.spec.job.device = resolve_training_device(loaded.spec.job.device);
  if (o.nproc_per_node > 0) {
    auto env = launch::detect_launch_env_from_process(o.nproc_per_node, loaded.spec.job.name);
    check_before_spawning(loaded.spec, env);
    if (!loaded.spec.parallel.elastic) return launch::run_local_workers(env, launch::current_argv(), /*grace_s=*/10);
    // An elastic job: its rendezvous store must outlive any worker, so this launcher serves it.
    const std::unique_ptr<comm::TcpStoreServer> store = host_elastic_store(loaded.spec, env);
    return launch::run_local_workers(env, launch::current_argv(), /*grace_s=*/10, /*keep_going=*/true);
  }
  launch::maybe_run_launch_selftest();
  // From here a stop signal (Slurm's warning, the launcher forwarding one) is remembered
  // rather than fatal, also during start-up: the job then stops after its first step with a
  // checkpoint.
  launch::install_stop_signal_handlers();
  // A worker (or the only process): its place in the job comes from the environment.
  return train::run_job(loaded.spec, launch::detect_launch_env_from_process(0, loaded.spec.job.name));
}

}  // namespace holmes::cmd
