#include "cmd/plan_cmd.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "engine/launch/launch_env.hpp"
#include "engine/plan/plan.hpp"
#include "engine/runtime/nccl_env.hpp"
#include "common/errors.hpp"
#include "engine/runtime/cluster_view.hpp"

namespace holmes::cmd {

int run_plan_only(const spec::JobSpec& spec, const std::string& format, int nproc_per_node, const std::string& nodes) {
  if (format != "text" && format != "json" && format != "html")
    throw UsageError(fmt::format("--format '{}' is not accepted for --plan-only; expected text, json or html", format));
  // The cluster.topology file's cluster, or this machine (with --nproc-per-node: as its
  // workers would see it, with the file overlaid as a run does).
  const plan::Plan p = runtime::plan_local_job(spec, runtime::local_devices(), nproc_per_node, nodes);
  // A job launched from here inherits this environment: refuse what it would refuse, and say
  // which of the plan's NCCL variables it would take from here instead.
  const auto env = launch::process_environment();
  std::vector<std::string> user_set;
  if (p.device_kind == "cuda" && !p.hostnames.empty())
    for (const auto& v : runtime::resolve_nccl_env(p, 0, env))
      if (v.user) user_set.push_back(fmt::format("{}={}", v.name, v.value));
  fmt::print("{}", format == "json"   ? plan::format_plan_json(p)
                   : format == "html" ? plan::format_plan_html(p)
                                      : plan::format_plan_text(p));
  if (format == "text") fmt::print("plan hash {:016x}\n", plan::plan_hash(p));
  for (const auto& u : user_set)
    fmt::print(format != "text" ? stderr : stdout,
               "note: {} is set in this environment; a job that inherits it uses this value on every node instead of "
               "the plan's\n", u);
  return 0;
}

}  // namespace holmes::cmd
