#include "cmd/plan_cmd.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <utility>

#include "engine/plan/plan.hpp"
#include "engine/spec/errors.hpp"
#include "engine/runtime/cluster_view.hpp"

namespace holmes::cmd {

int run_plan_only(const spec::JobSpec& spec, const std::string& format, int nproc_per_node, const std::string& nodes) {
  if (format != "text" && format != "json")
    throw UsageError(fmt::format("--format '{}' is not accepted for --plan-only; expected text or json", format));
  // The cluster.topology file's cluster, or this machine (with --nproc-per-node: as its
  // workers would see it, with the file overlaid as a run does).
  const plan::Plan p = train::plan_local_job(spec, train::local_devices(), nproc_per_node, nodes);
  fmt::print("{}", format == "json" ? plan::format_plan_json(p) : plan::format_plan_text(p));
  if (format == "text") fmt::print("plan hash {:016x}\n", plan::plan_hash(p));
  return 0;
}

}  // namespace holmes::cmd
