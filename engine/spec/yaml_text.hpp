// Parsing the YAML files users write (job specs, topology and calibration files) with the
// checks yaml-cpp leaves out or words obscurely:
//   - a key given twice in one mapping: YAML forbids it, yaml-cpp keeps both entries and a
//     reader takes one of them silently (the last value winning, two `model:` sections
//     merged). Every repetition is a problem naming both lines;
//   - indentation with tabs: yaml-cpp says "illegal map value" or "illegal tab when looking
//     for indentation"; the message says that tabs cannot indent YAML and where the tab is.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "common/errors.hpp"

namespace holmes::spec {

struct YamlText {
  YAML::Node root;                  // undefined when the text does not parse
  bool parsed = false;              // false: issues holds the one parse error
  std::vector<ConfigIssue> issues;  // the parse error, or every key given twice
};

// Parses `text` (from `source`, a file name for messages). A parse error's message starts
// with `malformed` ("malformed YAML", "not valid YAML") followed by yaml-cpp's reason, or by
// the tab explanation when the text indents with a tab at or before the error's line.
YamlText parse_yaml_text(const std::string& text, const std::string& source,
                         const std::string& malformed = "malformed YAML");

// Every key given twice in one mapping anywhere under `root`, as a problem at the later one:
// path 'model.layers', "'layers' is given twice in 'model' (lines 3 and 7) ...".
std::vector<ConfigIssue> duplicate_keys(const YAML::Node& root, const std::string& source);

// "line 4 indents with a tab ..." for the first line at or before `line` (1-based; 0 = any)
// whose indentation holds a tab; "" when there is none.
std::string tab_indentation_problem(const std::string& text, int line);

}  // namespace holmes::spec
