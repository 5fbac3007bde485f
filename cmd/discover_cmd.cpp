// `holmes-train discover`: this node's network cards and compute devices, as a table, JSON
// (docs/topology.md) or a topology file entry (YAML) that can be planned offline later.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cmd/commands.hpp"
#include "cmd/option_values.hpp"
#include "engine/runtime/cluster_view.hpp"
#include "engine/topo/discover.hpp"
#include "engine/topo/report_format.hpp"
#include "engine/topo/topology_file.hpp"

namespace holmes::cmd {

Action add_discover(CLI::App& parent) {
  auto* sub = parent.add_subcommand("discover", "Print this node's network cards and compute devices");
  auto root = std::make_shared<std::string>("/");
  auto format = std::make_shared<std::string>("text");
  sub->add_option("--sysfs-root", *root, "Read sysfs under this folder instead of / (test fixtures)")
      ->option_text("DIR");
  sub->add_option("--format", *format, "Output format: text, json or yaml (a topology file)")
      ->check(one_of({"text", "json", "yaml"}));
  return [root, format] {
    std::string note;
    topo::Devices devices = runtime::local_devices(&note);
    topo::NodeReport report = topo::discover_node(*root, devices);
    if (*format == "json") fmt::print("{}", topo::report_json(report));
    else if (*format == "yaml") fmt::print("{}", topo::dump_topology_yaml({report}));
    else {
      fmt::print("{}", topo::report_text(report));
      if (!note.empty()) fmt::print("note     {}\n", note);
    }
    return 0;
  };
}

}  // namespace holmes::cmd
