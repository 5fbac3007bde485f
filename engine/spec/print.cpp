// --print-config: the resolved spec as YAML, one key per line with where its value came from.
#include <fmt/format.h>

#include "engine/spec/load.hpp"
#include "engine/spec/schema.hpp"

namespace holmes::spec {
namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts(1);
  for (char c : path) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

}  // namespace

std::string Origin::to_string() const {
  std::string where = line > 0 ? fmt::format("{}:{}", source, line) : source;
  return derived_from.empty() ? where : where + " (from " + derived_from + ")";
}

std::string print_resolved(const LoadedSpec& loaded) {
  std::string out = fmt::format("# holmes-train job spec, resolved from {}\n",
                                loaded.spec.source_file.empty() ? "the embedded default" : loaded.spec.source_file);
  std::vector<std::string> open;  // groups of the previous key, outermost first
  for (const auto& f : schema()) {
    std::vector<std::string> parts = split_path(f.path);
    std::size_t depth = parts.size() - 1, same = 0;
    while (same < depth && same < open.size() && open[same] == parts[same]) ++same;
    for (std::size_t d = same; d < depth; ++d) out += fmt::format("{:{}}{}:\n", "", 2 * d, parts[d]);
    open.assign(parts.begin(), parts.end() - 1);
    const Origin& o = loaded.origin.at(f.path);
    std::string line = fmt::format("{:{}}{}: {}", "", 2 * depth, parts.back(), f.show(loaded.spec));
    out += fmt::format("{:<48} # {}\n", line, o.to_string());
  }
  return out;
}

}  // namespace holmes::spec
