// Reading YAML files of the topology area (topology files, calibration files) with errors that
// say where: "file:line: key 'nodes[0].nics[1].rate_gbps': expected ..., found ...".
// Internal to engine/topo.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <string>
#include <type_traits>

#include "common/errors.hpp"

namespace holmes::topo::yaml_read {

// Where a value sits: "file:line: key 'nodes[0].nics[1].rate_gbps'".
struct Ctx {
  const std::string& source;
  std::string path;

  Ctx at(const std::string& key) const { return {source, path.empty() ? key : path + "." + key}; }
  Ctx item(size_t i) const { return {source, fmt::format("{}[{}]", path, i)}; }
  [[noreturn]] void fail(const YAML::Node& node, const std::string& what) const {
    int line = node.IsDefined() && node.Mark().line >= 0 ? node.Mark().line + 1 : 0;
    throw UserError(fmt::format("{}{}: key '{}': {}", source, line ? fmt::format(":{}", line) : "", path, what));
  }
};

inline std::string describe(const YAML::Node& n) {
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "nothing";
}

inline void check_keys(const YAML::Node& map, const Ctx& ctx, const std::set<std::string>& allowed) {
  if (!map.IsMap()) ctx.fail(map, fmt::format("expected a mapping, found {}", describe(map)));
  for (const auto& kv : map) {
    std::string key = kv.first.Scalar();
    if (!allowed.count(key))
      ctx.at(key).fail(kv.first, fmt::format("unknown key; accepted: {}", fmt::join(allowed, ", ")));
  }
}

template <typename T>
T get(const YAML::Node& map, const char* key, const Ctx& ctx, T fallback, const char* expected) {
  YAML::Node v = map[key];
  if (!v.IsDefined() || v.IsNull()) return fallback;
  try {
    if (!v.IsScalar()) throw YAML::Exception(v.Mark(), "");
    T value = v.as<T>();
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(value)) throw YAML::Exception(v.Mark(), "");  // .nan / .inf
    return value;
  } catch (const YAML::Exception&) {
    ctx.at(key).fail(v, fmt::format("expected {}, found {}", expected, describe(v)));
  }
}

}  // namespace holmes::topo::yaml_read
