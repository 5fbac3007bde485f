// `holmes-train discover`: not built yet; parses its options so --help is accurate.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cmd/commands.hpp"

namespace holmes::cmd {

Action add_discover(CLI::App& parent) {
  auto* sub = parent.add_subcommand("discover", "Print this node's network cards and compute devices");
  auto root = std::make_shared<std::string>("/");
  auto format = std::make_shared<std::string>("text");
  sub->add_option("--sysfs-root", *root, "Read sysfs under this folder instead of /")->option_text("DIR");
  sub->add_option("--format", *format, "Output format")->check(CLI::IsMember({"text", "json", "yaml"}));
  return [] { return not_available("discover"); };
}

}  // namespace holmes::cmd
