// Job-spec loading in three steps kept apart: read the sources (file, --set) into one flat
// table of key -> YAML value with its origin; convert every schema field from that table
// (or its default) into the typed JobSpec; then run the cross-field checks (validate.cpp).
// Problems from all three steps are collected and thrown together.
#include "engine/spec/load.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/errors.hpp"
#include "engine/spec/scalar.hpp"
#include "engine/spec/schema.hpp"
#include "engine/spec/suggest.hpp"
#include "engine/spec/validate.hpp"
#include "engine/spec/yaml_text.hpp"

namespace holmes::spec {
namespace {

struct Entry {
  YAML::Node value;
  Origin origin;
  int column = 0;
};

using Table = std::map<std::string, Entry>;

std::string group_name(const std::string& g) { return g.empty() ? "the top level" : "'" + g + "'"; }

// "unknown key 'trian' in the top level; did you mean 'train'? accepted: job, model, ..."
std::string unknown_key_message(const std::string& group, const std::string& key) {
  std::vector<std::string> siblings = children_of(group);
  std::string msg = fmt::format("unknown key '{}' in {}", key, group_name(group));
  if (key == "<<") {
    // YAML 1.1's merge key: yaml-cpp (0.7) reads it as a plain key, so nothing would be merged.
    msg += "; '<<' is YAML's merge key, which this reader does not support: write the merged keys out here.";
  } else if (auto near = nearest(key, siblings); !near.empty()) {
    msg += fmt::format("; did you mean '{}'?", near);
  } else if (const Field* f = find_field_by_leaf(key)) {
    // The key may belong to another section: `layers` at the top level -> model.layers.
    msg += fmt::format("; did you mean '{}'?", f->path);
  }
  return msg + (msg.back() == '?' || msg.back() == '.' ? " " : ". ") + "Accepted keys here: " + join(siblings, ", ");
}

// For a dotted path from the command line: find the deepest known section it starts with and
// report the first component that is not known there.
std::string unknown_path_message(const std::string& path) {
  if (is_group(path))
    return fmt::format("'{}' is a section; set one of its keys: {}", path, join(children_of(path), ", "));
  std::string group;
  std::size_t start = 0;
  for (;;) {
    auto dot = path.find('.', start);
    std::string head = path.substr(0, dot);
    if (dot == std::string::npos || !is_group(head)) return unknown_key_message(group, path.substr(start, dot - start));
    group = head;
    start = dot + 1;
  }
}

// Walks a mapping of the file, recording known fields and reporting unknown keys.
void collect(const YAML::Node& map, const std::string& group, const std::string& file, Table& table,
             std::vector<ConfigIssue>& issues) {
  for (const auto& kv : map) {
    const YAML::Mark m = kv.first.Mark();
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    std::string path = group.empty() ? key : group + "." + key;
    ConfigIssue issue{file, path, m.line + 1, m.column + 1, ""};
    if (key.empty()) {
      issue.message = "a key must be a plain name, not " + describe(kv.first);
    } else if (find_field(path)) {
      const YAML::Mark vm = kv.second.Mark();
      int line = vm.line >= 0 ? vm.line + 1 : m.line + 1;
      table[path] = Entry{kv.second, Origin{file, line}, vm.column >= 0 ? vm.column + 1 : m.column + 1};
      continue;
    } else if (is_group(path)) {
      if (kv.second.IsMap()) {
        collect(kv.second, path, file, table, issues);
        continue;
      }
      if (kv.second.IsNull()) continue;  // an empty section: all defaults
      issue.message = fmt::format("section '{}' must be a mapping of keys ({}), got {}", path,
                                  join(children_of(path), ", "), describe(kv.second));
    } else {
      issue.message = unknown_key_message(group, key);
    }
    issues.push_back(issue);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(fmt::format("cannot read config file '{}': {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Returns false when the file is not a usable mapping at all (then only that is reported).
bool read_yaml(const std::string& text, const std::string& file, Table& table, std::vector<ConfigIssue>& issues) {
  YamlText parsed = parse_yaml_text(text, file);
  issues.insert(issues.end(), parsed.issues.begin(), parsed.issues.end());  // a parse error or keys given twice
  if (!parsed.parsed) return false;
  YAML::Node root = parsed.root;  // a handle; non-const: a missing key reads as undefined, not invalid
  if (!root.IsDefined() || root.IsNull()) {
    issues.push_back({file, "", 0, 0,
                      "the file is empty; a job spec is a mapping with the sections " + join(children_of(""), ", ")});
    return false;
  }
  if (!root.IsMap()) {
    const YAML::Mark m = root.Mark();
    issues.push_back({file, "", m.line + 1, m.column + 1,
                      "a job spec must be a mapping with the sections " + join(children_of(""), ", ") + ", got " +
                          describe(root)});
    return false;
  }
  collect(root, "", file, table, issues);
  return true;
}

// One KEY=VALUE override; `origin` is "--set" or the flag that stands for the key.
void read_override(const std::string& s, const std::string& origin, Table& table, std::vector<ConfigIssue>& issues) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) {
    issues.push_back(
        {origin, "", 0, 0, fmt::format("'{}' is not accepted, expected KEY=VALUE such as train.steps=100", s)});
    return;
  }
  std::string key = s.substr(0, eq), text = s.substr(eq + 1);
  if (!find_field(key)) {
    issues.push_back({origin, key, 0, 0, unknown_path_message(key)});
    return;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception&) {
    value = YAML::Node(text);  // not YAML: take it as a plain string
  }
  table[key] = Entry{value, Origin{origin}, 0};
}

}  // namespace

LoadedSpec load_job_spec(const std::string& file, const std::vector<std::string>& sets,
                         const std::vector<FlagOverride>& flags) {
  std::vector<ConfigIssue> issues;
  Table table;
  const std::string source = file.empty() ? "<embedded default>" : file;
  bool usable = read_yaml(file.empty() ? embedded_default_yaml() : read_file(file), source, table, issues);
  for (const auto& s : sets) read_override(s, "--set", table, issues);
  for (const auto& f : flags) read_override(f.key_value, f.flag, table, issues);
  if (!usable) throw ConfigError(std::move(issues));

  // Cross-field checks need every field converted; unknown keys do not get in their way.
  const std::size_t before_fields = issues.size();
  LoadedSpec out;
  out.spec.source_file = file;
  for (const auto& f : schema()) {
    auto it = table.find(f.path);
    if (it == table.end()) {
      if (f.required) {
        issues.push_back({source, f.path, 0, 0,
                          fmt::format("missing required key '{}' ({}): {}", f.path, f.type, f.doc)});
        continue;
      }
      std::string err = f.apply(out.spec, YAML::Load(f.default_yaml.empty() ? "\"\"" : f.default_yaml));
      if (!err.empty()) throw std::logic_error("bad default for " + f.path + ": " + err);
      out.origin[f.path] = Origin{"default"};
      continue;
    }
    const Entry& e = it->second;
    if (std::string err = f.apply(out.spec, e.value); !err.empty()) {
      issues.push_back({e.origin.source, f.path, e.origin.line, e.column, err});
      continue;
    }
    out.origin[f.path] = e.origin;
  }
  if (issues.size() == before_fields) validate(out, source, issues);
  if (!issues.empty()) throw ConfigError(std::move(issues));
  return out;
}

std::string resolved_spec_text(const JobSpec& spec) {
  LoadedSpec loaded{spec, {}};
  for (const auto& f : schema()) loaded.origin[f.path] = {"training run", 0};
  return print_resolved(loaded);
}

}  // namespace holmes::spec
