#include "engine/spec/yaml_text.hpp"

#include <fmt/format.h>

#include <map>
#include <sstream>

namespace holmes::spec {

namespace {

std::string section_name(const std::string& path) { return path.empty() ? "the top level" : "'" + path + "'"; }

// Walks every mapping and list under `node`; `path` names `node` ("" = the root).
void find_duplicates(const YAML::Node& node, const std::string& path, const std::string& source,
                     std::vector<ConfigIssue>& out) {
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) find_duplicates(node[i], fmt::format("{}[{}]", path, i), source, out);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;  // key -> 1-based line of its first appearance
  for (const auto& kv : node) {
    // Keys that are not scalars (a mapping as key) have no name to compare; readers refuse them.
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
    const std::string child = path.empty() ? key : path + "." + key;
    const YAML::Mark m = kv.first.Mark();
    if (!key.empty()) {
      auto [it, fresh] = first_line.emplace(key, m.line + 1);
      if (!fresh)
        out.push_back({source, child, m.line + 1, m.column + 1,
                       fmt::format("'{}' is given twice in {} (lines {} and {}); YAML forbids a key twice in one "
                                   "mapping, and which value would count is not defined: keep one",
                                   key, section_name(path), it->second, m.line + 1)});
    }
    find_duplicates(kv.second, child, source, out);
  }
}

// The indentation of `line` (its leading blanks) holds a tab and the line has content.
bool indents_with_tab(const std::string& line) {
  const auto content = line.find_first_not_of(" \t");
  if (content == std::string::npos || line[content] == '#') return false;
  return line.find('\t') < content;
}

}  // namespace

std::string tab_indentation_problem(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l;
  int found = 0;
  for (int n = 1; std::getline(in, l) && (line <= 0 || n <= line); ++n) {
    if (!indents_with_tab(l)) continue;
    found = n;
    if (line <= 0) break;  // the first one
  }
  if (found == 0) return "";
  return fmt::format("line {} indents with a tab; tabs cannot indent YAML (the YAML standard forbids them there): "
                     "indent with spaces", found);
}

YamlText parse_yaml_text(const std::string& text, const std::string& source, const std::string& malformed) {
  YamlText out;
  try {
    out.root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // The tab nearest before the error (the error's own line included) is the one yaml-cpp tripped on.
    const std::string tab = tab_indentation_problem(text, e.mark.line + 1);
    out.issues.push_back({source, "", e.mark.line + 1, e.mark.column + 1,
                          fmt::format("{}: {}", malformed, tab.empty() ? e.msg : tab + " (yaml-cpp: " + e.msg + ")")});
    return out;
  }
  out.parsed = true;
  out.issues = duplicate_keys(out.root, source);
  return out;
}

std::vector<ConfigIssue> duplicate_keys(const YAML::Node& root, const std::string& source) {
  std::vector<ConfigIssue> out;
  find_duplicates(root, "", source, out);
  return out;
}

}  // namespace holmes::spec
