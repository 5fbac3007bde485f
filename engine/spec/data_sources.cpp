#include "engine/spec/data_sources.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "engine/spec/scalar.hpp"

namespace holmes::spec {

namespace {

bool valid_name(const std::string& n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

// One mapping entry {path, weight, name}.
std::string parse_entry(const YAML::Node& v, size_t i, DataSourceSpec* s) {
  for (const auto& kv : v) {
    const std::string key = kv.first.Scalar();
    if (key != "path" && key != "weight" && key != "name")
      return fmt::format("element {} has the key '{}'; accepted keys: path, weight, name", i, key);
  }
  if (!v["path"]) return fmt::format("element {} has no 'path' (a token file or a list of them)", i);
  if (auto err = parse_string_list(v["path"], &s->paths); !err.empty())
    return fmt::format("element {}: path {}, expected a path or a list of paths", i, err);
  if (s->paths.empty()) return fmt::format("element {}: path is an empty list, expected at least one file", i);
  if (v["weight"]) {
    if (auto err = parse_real(v["weight"], &s->weight); !err.empty())
      return fmt::format("element {}: weight {}, expected a number > 0", i, err);
    if (!(s->weight > 0)) return fmt::format("element {}: weight {} is not accepted, expected a number > 0", i, s->weight);
    s->weighted = true;
  }
  if (v["name"]) {
    if (auto err = parse_string(v["name"], &s->name); !err.empty()) return fmt::format("element {}: name {}", i, err);
    if (!valid_name(s->name))
      return fmt::format("element {}: name '{}' is not accepted, expected letters, digits, '.', '_' and '-'", i, s->name);
  }
  return "";
}

// [w1, p1, w2, p2, ...] as Megatron-LM's --data-path: true when `v` has that shape.
bool megatron_spelling(const YAML::Node& v) {
  if (v.size() < 2 || v.size() % 2 != 0) return false;
  for (size_t i = 0; i < v.size(); i += 2) {
    double w = 0;
    if (!v[i].IsScalar() || !parse_real(v[i], &w).empty() || !v[i + 1].IsScalar()) return false;
  }
  return true;
}

}  // namespace

std::string source_name_of(const std::string& path) {
  std::string n = path.substr(path.find_last_of('/') + 1);
  for (const char* ext : {".bin", ".idx", ".tokens"})
    if (n.size() > std::string(ext).size() && n.ends_with(ext)) n.resize(n.size() - std::string(ext).size());
  std::replace_if(n.begin(), n.end(), [](char c) { return !valid_name(std::string(1, c)); }, '_');
  return n.empty() ? "source" : n;
}

std::string parse_data_sources(const YAML::Node& v, std::vector<DataSourceSpec>* out) {
  out->clear();
  if (v.IsScalar()) {
    out->push_back({"", {v.Scalar()}, 1, false});
  } else if (!v.IsSequence()) {
    return describe(v) + " is not accepted";
  } else if (megatron_spelling(v)) {
    for (size_t i = 0; i < v.size(); i += 2) {
      DataSourceSpec s{"", {v[i + 1].Scalar()}, 0, true};
      parse_real(v[i], &s.weight);
      if (!(s.weight > 0)) return fmt::format("element {}: weight {} is not accepted, expected a number > 0", i, s.weight);
      out->push_back(s);
    }
  } else {
    size_t maps = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].IsMap()) ++maps;
      else if (!v[i].IsScalar()) return fmt::format("element {} is {}", i, describe(v[i]));
    }
    if (maps == 0) {  // a list of paths: one source
      DataSourceSpec s{"", {}, 1, false};
      if (auto err = parse_string_list(v, &s.paths); !err.empty()) return err;
      if (!s.paths.empty()) out->push_back(s);
    } else if (maps != v.size()) {
      return "a list mixing paths and {path, weight} mappings is not accepted: give every source as a mapping (a "
             "mixture) or only paths (one source)";
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        DataSourceSpec s;
        if (auto err = parse_entry(v[i], i, &s); !err.empty()) return err;
        out->push_back(s);
      }
    }
  }
  // Names: given ones unique; the others from their first file, made unique with -2, -3, ...
  std::set<std::string> taken;
  for (const auto& s : *out)
    if (!s.name.empty() && !taken.insert(s.name).second)
      return fmt::format("the name '{}' is given to two sources; accepted: a name per source", s.name);
  for (auto& s : *out) {
    if (!s.name.empty()) continue;
    const std::string base = source_name_of(s.paths.front());
    s.name = base;
    for (int k = 2; taken.count(s.name); ++k) s.name = fmt::format("{}-{}", base, k);
    taken.insert(s.name);
  }
  return "";
}

std::string show_data_sources(const std::vector<DataSourceSpec>& sources) {
  if (sources.size() == 1 && !sources[0].weighted) {
    std::vector<std::string> q;
    for (const auto& p : sources[0].paths) q.push_back(quote(p));
    return "[" + join(q, ", ") + "]";
  }
  std::vector<std::string> items;
  for (const auto& s : sources) {
    std::vector<std::string> q;
    for (const auto& p : s.paths) q.push_back(quote(p));
    items.push_back(fmt::format("{{name: {}, path: [{}], weight: {}}}", quote(s.name), join(q, ", "), s.weight));
  }
  return "[" + join(items, ", ") + "]";
}

}  // namespace holmes::spec
